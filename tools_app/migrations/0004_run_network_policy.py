from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tools_app", "0002_run_spare"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="network_policy",
            field=models.TextField(blank=True, default=""),
        ),
    ]

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tools_app", "0003_integration_allow_test_runs"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="network_policy",
            field=models.TextField(blank=True, default=""),
        ),
    ]

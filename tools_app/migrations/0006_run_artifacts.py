# Run artifacts move from files under a worker's state dir to where every process can
# reach them: the database by default. Rows from before keep their files (store "file").

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tools_app", "0005_worker_heartbeat"),
    ]

    operations = [
        migrations.AddField(
            model_name="runartifact",
            name="store",
            field=models.CharField(
                choices=[("database", "Database"), ("storage", "Storage"), ("file", "File")],
                default="file",
                max_length=10,
            ),
        ),
        migrations.AlterField(
            model_name="runartifact",
            name="store",
            field=models.CharField(
                choices=[("database", "Database"), ("storage", "Storage"), ("file", "File")],
                default="database",
                max_length=10,
            ),
        ),
        migrations.AddField(
            model_name="runartifact",
            name="content",
            field=models.BinaryField(editable=False, null=True),
        ),
        migrations.AlterField(
            model_name="runartifact",
            name="path",
            field=models.CharField(blank=True, max_length=500),
        ),
    ]

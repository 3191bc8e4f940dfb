from django.contrib.auth.management import create_permissions
from django.db import migrations


def auditors_read_everything(apps, schema_editor):
    """The auditor group with every model's view permission. Permissions are made after
    migrate; made here first, so a fresh database has them when this runs."""
    from tools_app.roles import grant_view_permissions

    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    grant_view_permissions(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("axes", "0010_accessattemptexpiration"),
        ("tools_app", "0009_tool_presets_allow_test_runs"),
    ]

    operations = [migrations.RunPython(auditors_read_everything, migrations.RunPython.noop)]

from django.apps import AppConfig
from django.db.backends.signals import connection_created
from django.db.models.signals import m2m_changed, post_migrate


class ToolsAppConfig(AppConfig):
    name = "tools_app"
    verbose_name = "Tool Console"

    def ready(self) -> None:
        from axes.signals import user_locked_out
        from django.contrib.auth import get_user_model

        from tools_app import checks, runs, staticcheck, vault  # noqa: F401  (register checks)
        from tools_app.roles import ensure_groups, staff_follows_groups
        from tools_app.statedir import private_sqlite_files
        from tools_app.views.auth import record_lockout

        post_migrate.connect(ensure_groups, sender=self)
        m2m_changed.connect(
            staff_follows_groups,
            sender=get_user_model().groups.through,
            dispatch_uid="staff_follows_groups",
        )
        connection_created.connect(private_sqlite_files, dispatch_uid="private_sqlite_files")
        user_locked_out.connect(record_lockout, dispatch_uid="audit_lockout")

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ToolsAppConfig(AppConfig):
    name = "tools_app"
    verbose_name = "Tool Console"

    def ready(self) -> None:
        from tools_app import checks, runs, staticcheck, vault  # noqa: F401  (register checks)
        from tools_app.roles import ensure_groups

        post_migrate.connect(ensure_groups, sender=self)

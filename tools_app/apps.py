from django.apps import AppConfig


class ToolsAppConfig(AppConfig):
    name = "tools_app"
    verbose_name = "Tool Console"

    def ready(self) -> None:
        # Imported for what importing them does: system checks, then signal receivers.
        from tools_app import checks, runs, signals, staticcheck, vault  # noqa: F401

from django.apps import AppConfig


class ToolsAppConfig(AppConfig):
    name = "tools_app"
    verbose_name = "Tool Console"

    def ready(self) -> None:
        # Imported for what importing them does: system checks, then signal receivers.
        from tools_app import checks, signals  # noqa: F401
        from tools_app.integrations import vault  # noqa: F401
        from tools_app.runs import execute  # noqa: F401

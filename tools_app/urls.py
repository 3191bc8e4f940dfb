from django.urls import path

from tools_app.views import tools

urlpatterns = [
    # Tools: browse (tools_app/views/tools.py)
    path("", tools.index, name="index"),
    path("tools/", tools.tool_list, name="tools"),
    path("tools/<str:name>/", tools.tool_detail, name="tool"),
    # Runs (tools_app/views/runs.py)
    # Integrations (tools_app/views/integrations.py)
    # Agent tokens (tools_app/views/tokens.py)
]

from django.urls import path

from tools_app.views import (
    analytics,
    audit,
    cases,
    docs,
    editor,
    home,
    integrations,
    oauth,
    openapi,
    presets,
    runs,
    system,
    tokens,
    tools,
)

urlpatterns = [
    # Home (tools_app/views/home.py)
    path("", home.home, name="index"),
    # Tools: browse (tools_app/views/tools.py)
    path("tools/", tools.tool_list, name="tools"),
    path("tools/highlight.css", tools.highlight_css, name="highlight_css"),
    # Editing (tools_app/views/editor.py). Pages about the tool collection live under
    # tools/-/: "-" can never be a tool name (NAME_RE), so no tool, whatever its name
    # (`new`, `import`), is shadowed by a console page (tests/test_tool_urls.py).
    path("tools/-/new/", editor.tool_new, name="tool_new"),
    path("tools/-/import/", editor.tool_import, name="tool_import"),
    path("tools/-/import-openapi/", openapi.openapi_import_page, name="tool_import_openapi"),
    path("tools/<str:name>/edit/", editor.tool_edit, name="tool_edit"),
    path("tools/<str:name>/validate/", editor.tool_validate, name="tool_validate"),
    path("tools/<str:name>/edit/run/", editor.tool_edit_run, name="tool_edit_run"),
    path("tools/<str:name>/versions/", editor.tool_versions, name="tool_versions"),
    path(
        "tools/<str:name>/versions/<int:number>/download.zip",
        editor.tool_download,
        name="tool_download",
    ),
    path("tools/<str:name>/diff/", editor.tool_diff, name="tool_diff"),
    path("tools/<str:name>/rollback/<int:number>/", editor.tool_rollback, name="tool_rollback"),
    path("tools/<str:name>/publish/<int:number>/", editor.tool_publish, name="tool_publish"),
    path("tools/<str:name>/unpublish/", editor.tool_unpublish, name="tool_unpublish"),
    path("tools/<str:name>/disable/", editor.tool_disable, name="tool_disable"),
    path("tools/<str:name>/enable/", editor.tool_enable, name="tool_enable"),
    path("tools/<str:name>/presets/", presets.tool_presets, name="tool_presets"),
    path("tools/<str:name>/presets/clear/", presets.tool_preset_clear, name="tool_preset_clear"),
    path(
        "tools/<str:name>/presets/test-runs/",
        presets.tool_preset_test_runs,
        name="tool_preset_test_runs",
    ),
    path("tools/<str:name>/samples/", presets.tool_samples, name="tool_samples"),
    # A tool's page, one URL per tab (Versions is tool_versions above).
    path("tools/<str:name>/", tools.tool_detail, name="tool"),
    path("tools/<str:name>/inputs/", tools.tool_inputs, name="tool_inputs"),
    path("tools/<str:name>/source/", tools.tool_source, name="tool_source"),
    path("tools/<str:name>/registry/", tools.tool_registry, name="tool_registry"),
    path("tools/<str:name>/versions/<int:number>/cases/", cases.tool_cases, name="tool_cases"),
    path("tools/<str:name>/analytics/", analytics.tool_analytics, name="tool_analytics"),
    # The console's run analytics (tools_app/views/analytics.py)
    path("analytics/", analytics.console_analytics, name="analytics"),
    # Documentation (tools_app/views/docs.py, docs/*.md)
    path("docs/", docs.docs_index, name="docs"),
    path("docs/<slug:page>/", docs.docs_page, name="docs_page"),
    # Runs (tools_app/views/runs.py)
    path("tools/<str:name>/run/", runs.tool_run, name="tool_run"),
    path("runs/", runs.run_list, name="runs"),
    path("runs/<uuid:run_id>/", runs.run_detail, name="run"),
    path("runs/<uuid:run_id>/updates/", runs.run_updates, name="run_updates"),
    path("runs/<uuid:run_id>/cancel/", runs.run_cancel, name="run_cancel"),
    path("runs/<uuid:run_id>/sample/", presets.run_save_sample, name="run_save_sample"),
    path("runs/<uuid:run_id>/case/", cases.run_save_case, name="run_save_case"),
    path(
        "runs/<uuid:run_id>/artifacts/<int:artifact_id>/",
        runs.run_artifact,
        name="run_artifact",
    ),
    # Checks of a version's test cases (tools_app/views/cases.py)
    path("checks/<uuid:check_id>/", cases.check_detail, name="check"),
    path("checks/<uuid:check_id>/live/", cases.check_live, name="check_live"),
    path(
        "checks/<uuid:check_id>/cases/<int:position>/accept/",
        cases.check_accept,
        name="check_accept",
    ),
    path("checks/<uuid:check_id>/override/", cases.check_override, name="check_override"),
    # Integrations (tools_app/views/integrations.py)
    path("integrations/", integrations.integration_list, name="integrations"),
    path("integrations/new/", integrations.integration_new, name="integration_new"),
    path(
        "integrations/new/<slug:type_slug>/",
        integrations.integration_create,
        name="integration_create",
    ),
    path(
        "integrations/new/<slug:type_slug>/test/",
        integrations.integration_test_new,
        name="integration_test_new",
    ),
    path(
        "integrations/environment/",
        integrations.integration_environment,
        name="integration_environment",
    ),
    # OAuth2 (tools_app/views/oauth.py): one callback for every integration.
    path(
        "integrations/oauth/callback/",
        oauth.integration_oauth_callback,
        name="integration_oauth_callback",
    ),
    path(
        "integrations/<slug:slug>/oauth/connect/",
        oauth.integration_oauth_connect,
        name="integration_oauth_connect",
    ),
    path(
        "integrations/<slug:slug>/oauth/disconnect/",
        oauth.integration_oauth_disconnect,
        name="integration_oauth_disconnect",
    ),
    path("integrations/<slug:slug>/", integrations.integration_detail, name="integration"),
    path("integrations/<slug:slug>/edit/", integrations.integration_edit, name="integration_edit"),
    path("integrations/<slug:slug>/test/", integrations.integration_test, name="integration_test"),
    path(
        "integrations/<slug:slug>/disable/",
        integrations.integration_disable,
        name="integration_disable",
    ),
    path(
        "integrations/<slug:slug>/enable/",
        integrations.integration_enable,
        name="integration_enable",
    ),
    path(
        "integrations/<slug:slug>/test-runs/",
        integrations.integration_test_runs,
        name="integration_test_runs",
    ),
    path(
        "integrations/<slug:slug>/delete/",
        integrations.integration_delete,
        name="integration_delete",
    ),
    # Agent tokens (tools_app/views/tokens.py)
    path("tokens/", tokens.token_list, name="tokens"),
    path("tokens/new/", tokens.token_create, name="token_create"),
    path("tokens/<int:pk>/revoke/", tokens.token_revoke, name="token_revoke"),
    path("tokens/<int:pk>/pins/", tokens.token_pins, name="token_pins"),
    # The audit log (tools_app/views/audit.py)
    path("audit/", audit.audit_list, name="audit"),
    path("audit/secrets/find/", audit.secret_find, name="secret_find"),
    # Health (tools_app/views/system.py)
    path("system/", system.system, name="system"),
    path("system/egress/", system.egress_allow, name="egress_allow"),
    path("system/egress/<int:pk>/remove/", system.egress_remove, name="egress_remove"),
    path("warnings/dismiss/", system.dismiss_warnings, name="dismiss_warnings"),
]

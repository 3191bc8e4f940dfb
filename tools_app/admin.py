"""Django admin is the auditors' view: every model is here, secrets never are.

Most models are read-only here because their state changes belong to the console's own
code paths (catalog/versions.py for tools, the vault for secrets), which validate and audit. The
few edits admin allows are audited like any other state change, in the same append-only
log, with field names but never values."""

from __future__ import annotations

import json

from axes.admin import AccessAttemptAdmin, AccessFailureLogAdmin, AccessLogAdmin
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.core.exceptions import PermissionDenied
from django.db import DataError, NotSupportedError, transaction
from django.db.models import F, QuerySet, TextField
from django.db.models.functions import Cast
from django.http import HttpRequest, HttpResponseBadRequest, StreamingHttpResponse
from django.urls import path
from django.utils import timezone
from django.utils.html import format_html

from tools_app.audit import Actor, record
from tools_app.audit_targets import attach_targets, target_label, target_url
from tools_app.catalog.presets import set_allow_test_runs as set_preset_test_runs
from tools_app.catalog.versions import set_enabled
from tools_app.integrations import ledger, ledger_export
from tools_app.integrations.policy import set_allow_test_runs
from tools_app.lib import nesting
from tools_app.models import (
    AgentToken,
    AuditEvent,
    CaseCheck,
    CaseRun,
    EgressException,
    Integration,
    IntegrationSecret,
    KeysDocument,
    LedgerHead,
    OAuthConnection,
    Run,
    RunArtifact,
    RunHour,
    RunHourMark,
    RunUpdate,
    SecretUse,
    SigningKey,
    Tool,
    ToolPreset,
    ToolVersion,
    WorkerHeartbeat,
)

# Admin's navigation sidebar takes a quarter of a 1280 px screen on every page, which the
# audit log's columns need; the breadcrumbs and the index page lead everywhere it does.
admin.site.enable_nav_sidebar = False


class CheckedChangeList(ChangeList):
    """A list whose query string is checked like Django checks most of it: a lookup the
    database cannot run is a bad request (admin redirects to ?e=1), not a 500.

    Django admin lets the URL filter any field of the model. It catches most bad values,
    but these reached the database or the date hierarchy as 500s: a date part out of range
    (?created_at__year=99999), a huge day (OverflowError), a NUL byte in a search on
    PostgreSQL, a JSON lookup SQLite cannot run (?scopes__contains=x)."""

    def get_filters(self, request: HttpRequest):
        try:
            return super().get_filters(request)
        except OverflowError as exc:
            raise IncorrectLookupParameters(exc) from exc

    def get_results(self, request: HttpRequest) -> None:
        try:
            # A savepoint, so a refused query leaves any surrounding transaction usable.
            with transaction.atomic(using=self.queryset.db):
                super().get_results(request)
        except (ValueError, OverflowError, DataError, NotSupportedError) as exc:
            raise IncorrectLookupParameters(exc) from exc


class ConsoleAdmin(admin.ModelAdmin):
    def get_changelist(self, request: HttpRequest, **kwargs):
        return CheckedChangeList


class ReadOnlyAdmin(ConsoleAdmin):
    """Viewable by staff with the view permission; nobody adds, changes or deletes, not
    even superusers (who otherwise pass every permission check)."""

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


def _describe(message: str | list) -> str:
    """Admin's change message (a JSON list naming changed fields, or plain text) as text.
    It names fields only, so it never carries a value such as a password."""
    if isinstance(message, str):
        try:
            message = json.loads(message) if message.startswith("[") else message
        except ValueError:
            return message
    if isinstance(message, str):
        return message
    parts = []
    for entry in message:
        for verb, detail in entry.items():
            fields = ", ".join(detail.get("fields", [])) if isinstance(detail, dict) else ""
            parts.append(f"{verb} {fields}".strip())
    return "; ".join(parts) or "no fields changed"


class AuditedAdmin(ConsoleAdmin):
    """Writes an audit event for every add, change and delete done through admin, next to
    Django's own LogEntry (which is not append-only and records no IP)."""

    def _audit(self, request: HttpRequest, action: str, obj, summary: str) -> None:
        label = f"{obj._meta.verbose_name} {obj}"
        record(Actor.from_request(request), action, obj, f"{label}: {summary}"[:2000])

    def log_addition(self, request: HttpRequest, obj, message):
        self._audit(request, "admin.add", obj, _describe(message) or "added")
        return super().log_addition(request, obj, message)

    def log_change(self, request: HttpRequest, obj, message):
        self._audit(request, "admin.change", obj, _describe(message) or "changed")
        return super().log_change(request, obj, message)

    def log_deletions(self, request: HttpRequest, queryset):
        for obj in queryset:
            self._audit(request, "admin.delete", obj, "deleted")
        return super().log_deletions(request, queryset)


# --- Audit log -------------------------------------------------------------------------


class AuditChangeList(CheckedChangeList):
    """The audit log's page of events, with each event's target looked up once per model
    (not once per row), so the list can name and link what still exists."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        attach_targets(self.result_list)


SUMMARY_CHARS = 90


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    # Compact columns that fit 1280 px beside the filters: the time in 24-hour form like
    # the rest of the console, the actor's kind as a tooltip, the summary shortened (the
    # whole text in its tooltip and on the event's page).
    list_display = ("when", "who", "action", "target_link", "short_summary", "ip")
    list_display_links = ("when",)
    list_filter = (
        "action",
        "actor_kind",
        "actor",
        ("created_at", admin.DateFieldListFilter),
        "target_type",
    )
    search_fields = ("actor", "action", "target", "summary")
    date_hierarchy = "created_at"
    list_select_related = ("actor_user", "actor_token")
    show_full_result_count = False  # a big log makes the extra COUNT(*) slow

    class Media:
        css = {"all": ("css/admin-audit.css",)}

    def get_changelist(self, request: HttpRequest, **kwargs):
        return AuditChangeList

    def get_actions(self, request: HttpRequest):
        return {}  # no bulk actions at all, delete or otherwise

    @admin.display(description="when", ordering="created_at")
    def when(self, event: AuditEvent) -> str:
        moment = timezone.localtime(event.created_at)
        return format_html(
            '<time datetime="{}">{}</time>',
            moment.isoformat(),
            moment.strftime("%Y-%m-%d %H:%M:%S %Z"),
        )

    @admin.display(description="actor", ordering="actor")
    def who(self, event: AuditEvent) -> str:
        return format_html(
            '<span title="{}">{}</span>', event.get_actor_kind_display(), event.actor
        )

    @admin.display(description="target", ordering="target")
    def target_link(self, event: AuditEvent) -> str:
        label, url = target_label(event), target_url(event)
        if url:
            return format_html('<a href="{}">{}</a>', url, label)
        return label

    @admin.display(description="summary")
    def short_summary(self, event: AuditEvent) -> str:
        summary = event.summary
        if len(summary) <= SUMMARY_CHARS:
            return summary
        return format_html('<span title="{}">{}…</span>', summary, summary[: SUMMARY_CHARS - 1])


# --- Tools -----------------------------------------------------------------------------


class ToolVersionInline(ReadOnlyInline):
    model = ToolVersion
    fields = ("number", "source", "author", "created_at", "published_at", "sha256", "note")
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # One query for any number of versions, without their (large) files.
        return (
            super()
            .get_queryset(request)
            .select_related("author")
            .defer("toolmd", "manifest", "files")
        )


@admin.register(Tool)
class ToolAdmin(ConsoleAdmin):
    list_display = ("name", "label", "language", "enabled", "latest_number", "published_number")
    list_filter = ("language", "enabled", "presets_allow_test_runs")
    search_fields = ("name", "description")
    # Content and publishing change only through versions (the console, sync, imports),
    # which validate and write DATA_PATH. Admin may only switch a tool on or off, and
    # whether test runs receive its sensitive presets.
    fields = (
        "name",
        "label",
        "description",
        "language",
        "integration_slugs",
        "enabled",
        "presets_allow_test_runs",
        "latest_number",
        "published_version",
        "seed_version",
        "created_at",
        "updated_at",
    )
    readonly_fields = tuple(f for f in fields if f not in ("enabled", "presets_allow_test_runs"))
    inlines = [ToolVersionInline]

    @admin.display(description="published", ordering="published_number")
    def published_number(self, tool: Tool) -> int | None:
        return tool.published_number

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The published version's number without loading its files.
        return (
            super().get_queryset(request).annotate(published_number=F("published_version__number"))
        )

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False  # tools are created from TOOL.md files, in the console or by import

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False  # disable instead: deleting would also drop its runs and history

    def save_model(self, request: HttpRequest, obj: Tool, form, change: bool) -> None:
        # Through versions.set_enabled: it audits and updates DATA_PATH/tools.
        if "enabled" in form.changed_data:
            set_enabled(obj, obj.enabled, actor=Actor.from_request(request))
        if "presets_allow_test_runs" in form.changed_data:
            # Through the presets' own function, which writes its audit event.
            actor = Actor.from_request(request)
            set_preset_test_runs(obj, obj.presets_allow_test_runs, actor=actor)


@admin.register(ToolVersion)
class ToolVersionAdmin(ReadOnlyAdmin):
    list_display = ("tool", "number", "source", "author", "created_at", "published_at")
    list_filter = ("source", ("created_at", admin.DateFieldListFilter))
    search_fields = ("tool__name", "note", "sha256")
    list_select_related = ("tool", "author")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        qs = super().get_queryset(request)
        # The change page shows the files; the list does not need them.
        if request.resolver_match and request.resolver_match.url_name.endswith("changelist"):
            qs = qs.defer("toolmd", "manifest", "files", "signature")
        return qs


# --- Signing keys (docs/signing.md): managed with `manage.py signing_keys` only ----------


@admin.register(SigningKey)
class SigningKeyAdmin(ReadOnlyAdmin):
    list_display = ("key_id", "role", "created_at", "retired_at", "created_by")
    list_filter = ("role",)
    list_select_related = ("created_by",)
    # Never "private_key_sealed": sealed, but still the one thing an attacker wants.
    fields = ("key_id", "role", "public_key", "created_at", "retired_at", "created_by")


@admin.register(KeysDocument)
class KeysDocumentAdmin(ReadOnlyAdmin):
    list_display = ("serial", "issued_at", "expires_at")
    fields = ("serial", "issued_at", "expires_at", "envelope")


# --- The secret-usage ledger (tools_app/integrations/ledger.py): append-only ----------


@admin.register(SecretUse)
class SecretUseAdmin(ReadOnlyAdmin):
    """Auditors read, filter and export the ledger; nobody changes it, here or anywhere.
    The export links keep the list's filters (the same query string)."""

    list_display = (
        "seq",
        "created_at",
        "integration",
        "field_names",
        "tool",
        "version",
        "draft",
        "who",
        "via",
        "outcome",
    )
    list_display_links = ("seq",)
    list_filter = (
        "integration",
        "token_name",
        "tool",
        "via",
        "draft",
        "outcome",
        ("created_at", admin.DateFieldListFilter),
    )
    search_fields = ("integration", "tool", "username", "token_name", "=run_id")
    date_hierarchy = "created_at"
    show_full_result_count = False
    change_list_template = "admin/tools_app/secretuse/change_list.html"
    # The fingerprints are keyed HMACs, not values; shown so an auditor can compare rows.
    fields = (*ledger.GRANT_FIELDS, "outcome", "prev_hash", "row_hash", "outcome_mac")

    def get_actions(self, request: HttpRequest):
        return {}

    @admin.display(description="fields")
    def field_names(self, row: SecretUse) -> str:
        return ", ".join(row.fields)

    @admin.display(description="started by")
    def who(self, row: SecretUse) -> str:
        return row.who

    def get_urls(self):
        export = self.admin_site.admin_view(self.export)
        # One route per format: nothing in the URL for a visitor to make up.
        return [
            *(
                path(f"export.{fmt}", export, {"fmt": fmt}, name=f"tools_app_secretuse_{fmt}")
                for fmt in ledger_export.FORMATS
            ),
            *super().get_urls(),
        ]

    def export(self, request: HttpRequest, fmt: str):
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            changelist = self.get_changelist_instance(request)
            rows = changelist.get_queryset(request)
        except (IncorrectLookupParameters, ValueError, OverflowError) as exc:
            return HttpResponseBadRequest(f"bad filter: {type(exc).__name__}")
        content_type, lines = ledger_export.FORMATS[fmt]
        response = StreamingHttpResponse(lines(rows.order_by("seq")), content_type=content_type)
        stamp = timezone.localtime().strftime("%Y%m%d-%H%M%S")
        response["Content-Disposition"] = f'attachment; filename="secret-ledger-{stamp}.{fmt}"'
        return response


@admin.register(LedgerHead)
class LedgerHeadAdmin(ReadOnlyAdmin):
    list_display = ("__str__", "last_seq", "pruned_seq", "pruned_rows", "pruned_at")
    # Never "secret_sealed".
    fields = ("last_seq", "last_hash", "pruned_seq", "pruned_hash", "pruned_rows", "pruned_at")


# --- Integrations and tokens -----------------------------------------------------------


class IntegrationSecretInline(ReadOnlyInline):
    model = IntegrationSecret
    # Which secret fields are set, when and by whom. Never the ciphertext.
    fields = ("field", "set_at", "set_by")
    readonly_fields = fields
    show_change_link = False


@admin.register(Integration)
class IntegrationAdmin(AuditedAdmin):
    list_display = (
        "slug",
        "type_slug",
        "label",
        "enabled",
        "allow_test_runs",
        "updated_at",
        "updated_by",
    )
    list_filter = ("type_slug", "enabled", "allow_test_runs")
    search_fields = ("slug", "label")
    list_select_related = ("updated_by",)
    fields = (
        "slug",
        "type_slug",
        "label",
        "enabled",
        "allow_test_runs",
        "values",
        "custom_fields",
        "revision",
        "updated_by",
        "updated_at",
    )
    # Values and fields are edited in the console, which knows the integration type and
    # keeps secrets write-only. The slug is what tools refer to, so it is fixed too.
    readonly_fields = tuple(f for f in fields if f not in ("label", "enabled", "allow_test_runs"))
    inlines = [IntegrationSecretInline]

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False  # secrets can only be entered through the console's forms

    def save_model(self, request: HttpRequest, obj: Integration, form, change: bool) -> None:
        allow = obj.allow_test_runs
        if "allow_test_runs" in form.changed_data:
            # Saved through the policy's own function, which writes its audit event.
            obj.allow_test_runs = form.initial.get("allow_test_runs", False)
        # A console form open on the old revision must not silently overwrite this change.
        obj.revision += 1
        obj.updated_by = request.user
        super().save_model(request, obj, form, change)
        if allow != obj.allow_test_runs:
            set_allow_test_runs(obj, allow, actor=Actor.from_request(request))
            obj.refresh_from_db()


@admin.register(IntegrationSecret)
class IntegrationSecretAdmin(ReadOnlyAdmin):
    list_display = ("integration", "field", "set_at", "set_by")
    list_filter = ("integration",)
    list_select_related = ("integration", "set_by")
    fields = ("integration", "field", "set_at", "set_by")  # never "ciphertext"


@admin.register(OAuthConnection)
class OAuthConnectionAdmin(ReadOnlyAdmin):
    # Connected, refreshed and revoked on the integration's page. Never the tokens.
    list_display = ("integration", "state", "account", "expires_at", "refreshed_at")
    list_filter = ("state",)
    list_select_related = ("integration",)
    search_fields = ("integration__slug", "account")
    fields = (
        "integration",
        "state",
        "error",
        "account",
        "scope",
        "expires_at",
        "connected_at",
        "connected_by",
        "refreshed_at",
    )  # never access_ciphertext or refresh_ciphertext


@admin.register(ToolPreset)
class ToolPresetAdmin(ReadOnlyAdmin):
    # Presets are set on the tool's presets page, which keeps sensitive ones write-only.
    list_display = ("tool", "input", "sensitive", "set_at", "set_by")
    list_filter = ("sensitive",)
    list_select_related = ("tool", "set_by")
    fields = ("tool", "input", "sensitive", "set_at", "set_by")  # never value or ciphertext


@admin.register(AgentToken)
class AgentTokenAdmin(AuditedAdmin):
    list_display = (
        "name",
        "prefix",
        "scopes",
        "created_by",
        "created_at",
        "last_used_at",
        "active",
    )
    list_filter = (("revoked_at", admin.EmptyFieldListFilter),)
    search_fields = ("name", "prefix")
    list_select_related = ("created_by",)
    # The hash is useless to a person and the token itself is never stored. Scopes are
    # fixed at issue time: a token with other scopes is a new token.
    fields = ("name", "prefix", "scopes", "created_by", "created_at", "last_used_at", "revoked_at")
    readonly_fields = tuple(f for f in fields if f != "name")
    actions = ["revoke"]

    @admin.display(boolean=True)
    def active(self, token: AgentToken) -> bool:
        return token.is_active

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False  # tokens are issued in the console, which shows the token once

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[AgentToken]) -> None:
        actor = Actor.from_request(request)
        revoked = 0
        for token in queryset.filter(revoked_at__isnull=True):
            token.revoke()
            record(actor, "token.revoke", token, f"{token} revoked in admin")
            revoked += 1
        self.message_user(request, f"Revoked {revoked} token(s).", messages.SUCCESS)


# --- Runs ------------------------------------------------------------------------------


def shown_json(text: str | None) -> str:
    """A JSON column's text as admin shows it: pretty-printed within the nesting cap; a
    value stored before the cap (or a tool's result) deeper than that is not parsed by
    Django's JSONField, whose recursion ran out of stack and made the page a 500."""
    if text is None:
        return "-"
    try:
        value = nesting.loads(text, root="")
    except nesting.TooDeep as exc:
        return f"(not shown: {exc})"
    except ValueError:
        return text[:10_000]
    return json.dumps(value, indent=2, ensure_ascii=False)


class SafeJsonAdmin:
    """Reads the model's JSON fields as text (a Cast in the query) and shows them with
    shown_json, in place of the JSONField's own parsing."""

    json_fields: tuple[str, ...] = ()

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        texts = {f"{name}_text": Cast(name, TextField()) for name in self.json_fields}
        return super().get_queryset(request).defer(*self.json_fields).annotate(**texts)

    def get_exclude(self, request: HttpRequest, obj=None):
        return (*(super().get_exclude(request, obj) or ()), *self.json_fields)

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        shown = tuple(f"{name}_shown" for name in self.json_fields)
        return (*super().get_readonly_fields(request, obj), *shown)


def json_display(name: str):
    """The read-only field `<name>_shown` of a SafeJsonAdmin."""

    @admin.display(description=name)
    def show(self, obj) -> str:
        return format_html("<pre>{}</pre>", shown_json(getattr(obj, f"{name}_text", None)))

    return show


class RunUpdateInline(SafeJsonAdmin, ReadOnlyInline):
    model = RunUpdate
    json_fields = ("content",)
    fields = ("seq", "created_at", "content_shown", "progress", "total")
    readonly_fields = ("seq", "created_at", "progress", "total")
    show_change_link = False
    content_shown = json_display("content")


class RunArtifactInline(ReadOnlyInline):
    model = RunArtifact
    fields = ("name", "size")
    readonly_fields = fields


@admin.register(Run)
class RunAdmin(SafeJsonAdmin, ReadOnlyAdmin):
    list_display = ("id", "tool", "status", "via", "user", "token", "created_at", "finished_at")
    list_filter = ("status", "via", ("created_at", admin.DateFieldListFilter))
    search_fields = ("tool__name", "id")
    list_select_related = ("tool", "user", "token")
    # Sensitive params live sealed until the run starts; `params` holds the masked copy.
    exclude = ("sealed_params",)
    json_fields = ("params", "result", "notices", "response")
    params_shown = json_display("params")
    result_shown = json_display("result")
    notices_shown = json_display("notices")
    response_shown = json_display("response")
    inlines = [RunArtifactInline, RunUpdateInline]


@admin.register(RunHour)
class RunHourAdmin(ReadOnlyAdmin):
    """The Analytics tab's hourly rollups (tools_app/analytics/rollup.py), rebuilt from the
    runs: looked at, never edited."""

    list_display = ("tool", "version", "hour", "runs", "errors", "in_progress", "stale")
    search_fields = ("tool__name",)
    list_select_related = ("tool", "version")
    # The sorted values as stored (8-byte doubles); their counts say enough here.
    exclude = ("durations", "waits")


@admin.register(RunHourMark)
class RunHourMarkAdmin(ReadOnlyAdmin):
    list_display = ("tool", "since", "through")
    search_fields = ("tool__name",)
    list_select_related = ("tool",)


@admin.register(RunUpdate)
class RunUpdateAdmin(SafeJsonAdmin, ReadOnlyAdmin):
    json_fields = ("content",)
    content_shown = json_display("content")
    list_display = ("run", "seq", "created_at")
    list_select_related = ("run",)


@admin.register(RunArtifact)
class RunArtifactAdmin(ReadOnlyAdmin):
    list_display = ("run", "name", "size")
    list_select_related = ("run",)
    search_fields = ("name",)


# --- Cases ---------------------------------------------------------------------------
# Checks are started and overridden in the console (runs/replay.py, runs/gate.py), which
# audit them. The cases' sealed inputs live in the version's cases.yaml, never here.


class CaseRunInline(ReadOnlyInline):
    model = CaseRun
    fields = ("position", "name", "outcome", "run", "message")
    readonly_fields = fields
    show_change_link = False


@admin.register(CaseCheck)
class CaseCheckAdmin(ReadOnlyAdmin):
    list_display = ("id", "tool", "version", "status", "total", "passed", "failed", "created_at")
    list_filter = ("status", "via", "published", ("created_at", admin.DateFieldListFilter))
    search_fields = ("tool__name", "id")
    list_select_related = ("tool", "version", "user")
    fields = (
        "tool",
        "version",
        "status",
        "via",
        "user",
        "token",
        "total",
        "passed",
        "failed",
        "errored",
        "publish_requested",
        "published",
        "override_reason",
        "override_by",
        "created_at",
        "finished_at",
    )
    inlines = [CaseRunInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The version's number, not its files.
        return (
            super()
            .get_queryset(request)
            .select_related("tool", "version")
            .defer("version__files", "version__toolmd", "version__manifest")
        )


@admin.register(CaseRun)
class CaseRunAdmin(SafeJsonAdmin, ReadOnlyAdmin):
    list_display = ("case_check", "position", "name", "outcome", "run")
    list_filter = ("outcome",)
    list_select_related = ("case_check", "run")
    search_fields = ("name",)
    json_fields = ("checks",)
    checks_shown = json_display("checks")


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(ReadOnlyAdmin):
    list_display = ("name", "pid", "queues", "concurrency", "isolation", "started_at", "seen_at")
    search_fields = ("name",)


@admin.register(EgressException)
class EgressExceptionAdmin(ReadOnlyAdmin):
    """Added and removed on the System page, which checks and audits each change."""

    list_display = ("entry", "note", "created_at", "created_by")
    search_fields = ("entry", "note")


# --- People ----------------------------------------------------------------------------
# Roles are groups, so changing a user's groups changes what they may do: audit it.

admin.site.unregister(User)
admin.site.unregister(Group)


@admin.register(User)
class AuditedUserAdmin(AuditedAdmin, UserAdmin):
    pass


@admin.register(Group)
class AuditedGroupAdmin(AuditedAdmin, GroupAdmin):
    pass


# --- Login throttling (django-axes) ----------------------------------------------------
# Axes' own admins, with the checked changelist and audited changes: deleting an access
# attempt lifts a lock-out, which is a state change like any other.

for _model, _axes_admin in (
    (AccessAttempt, AccessAttemptAdmin),
    (AccessLog, AccessLogAdmin),
    (AccessFailureLog, AccessFailureLogAdmin),
):
    if admin.site.is_registered(_model):
        admin.site.unregister(_model)
    _audited = type(f"Audited{_axes_admin.__name__}", (AuditedAdmin, _axes_admin), {})
    admin.site.register(_model, _audited)

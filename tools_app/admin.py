"""Django admin is the auditors' view: every model is here, secrets never are."""

from django.contrib import admin
from django.http import HttpRequest

from tools_app.models import (
    AgentToken,
    AuditEvent,
    Integration,
    Run,
    RunArtifact,
    RunUpdate,
    Tool,
    ToolVersion,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "actor", "action", "target", "summary", "ip")
    list_filter = ("action", "actor_kind", "actor", ("created_at", admin.DateFieldListFilter))
    search_fields = ("actor", "action", "target", "summary")
    date_hierarchy = "created_at"

    def get_actions(self, request: HttpRequest):
        return {}  # no bulk delete either


class ToolVersionInline(admin.TabularInline):
    model = ToolVersion
    fields = ("number", "source", "author", "created_at", "published_at", "sha256", "note")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(Tool)
class ToolAdmin(admin.ModelAdmin):
    list_display = ("name", "label", "language", "enabled", "latest_number", "published_version")
    list_filter = ("language", "enabled")
    search_fields = ("name", "description")
    readonly_fields = ("latest_number", "published_version", "seed_version", "integration_slugs")
    inlines = [ToolVersionInline]


@admin.register(ToolVersion)
class ToolVersionAdmin(ReadOnlyAdmin):
    list_display = ("tool", "number", "source", "author", "created_at", "published_at")
    list_filter = ("source",)
    search_fields = ("tool__name", "note")
    list_select_related = ("tool", "author")


@admin.register(AgentToken)
class AgentTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "prefix", "scopes", "created_by", "created_at", "last_used_at")
    list_filter = ("revoked_at",)
    # The hash is useless to a person and the token itself is never stored.
    exclude = ("token_hash",)
    readonly_fields = ("prefix", "created_by", "created_at", "last_used_at")

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False  # tokens are issued from the console, which shows the token once


@admin.register(Integration)
class IntegrationAdmin(admin.ModelAdmin):
    list_display = ("slug", "type_slug", "label", "enabled", "updated_at", "updated_by")
    list_filter = ("type_slug", "enabled")
    search_fields = ("slug", "label")
    # Secrets live in IntegrationSecret, which is deliberately not registered here.
    readonly_fields = ("type_slug", "values", "custom_fields", "revision", "updated_by")


class RunUpdateInline(admin.TabularInline):
    model = RunUpdate
    fields = ("seq", "created_at", "content")
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ("id", "tool", "status", "via", "user", "token", "created_at", "finished_at")
    list_filter = ("status", "via", "tool")
    list_select_related = ("tool", "user", "token")
    exclude = ("sealed_params",)
    inlines = [RunUpdateInline]


@admin.register(RunArtifact)
class RunArtifactAdmin(ReadOnlyAdmin):
    list_display = ("run", "name", "size")

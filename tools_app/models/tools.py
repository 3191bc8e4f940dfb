from __future__ import annotations

import base64
from collections.abc import Mapping

from django.conf import settings
from django.db import models
from django.db.models import Q

from tools_app.manifest.languages import ENTRY_FILES, LANGUAGES
from tools_app.models.fields import OrderedJSONField

# The parser's languages (TYPESCRIPT = "typescript"...), then HTTP. HTTP is not a
# language: kind: http tools run no code, and the list says so rather than the parser's
# default language (docs/http-tools.md).
Language = models.TextChoices(
    "Language",
    [(language.upper(), language) for language in LANGUAGES]
    + [("HTTP", ("http", "http (no code)"))],
)


class VersionState(models.TextChoices):
    """Where a version stands. A tool's state (Tool.status) is that of its latest
    published version, else draft; a disabled tool is disabled whatever its versions."""

    DRAFT = "draft"
    PUBLISHED = "published"
    # The published version of a tool that is switched off: agents see nothing.
    DISABLED = "disabled"
    # Published once, then replaced by another published version.
    SUPERSEDED = "superseded"


# What each tool state means as a filter (the tool list's Status field).
TOOL_STATUS_FILTERS = {
    VersionState.PUBLISHED: Q(enabled=True, published_version__isnull=False),
    VersionState.DRAFT: Q(enabled=True, published_version__isnull=True),
    VersionState.DISABLED: Q(enabled=False),
}


class ToolQuerySet(models.QuerySet):
    def published(self) -> ToolQuerySet:
        """Tools agents see: enabled, with a published version."""
        return self.filter(TOOL_STATUS_FILTERS[VersionState.PUBLISHED])

    def with_status(self, status: str) -> ToolQuerySet:
        """Tools whose `status` is `status` (published, draft or disabled)."""
        return self.filter(TOOL_STATUS_FILTERS[VersionState(status)])

    def search(self, query: str) -> ToolQuerySet:
        """Tools holding every word of `query`, in any order, each in the name, the label
        or the description ("searxng web" finds web_search)."""
        tools = self
        for word in dict.fromkeys(query.split()):
            tools = tools.filter(
                Q(name__icontains=word) | Q(label__icontains=word) | Q(description__icontains=word)
            )
        return tools

    def using_integration(self, slug: str) -> ToolQuerySet:
        return self.filter(integration_slugs__contains=f",{slug},")


class Tool(models.Model):
    """A named tool. Its content lives in immutable ToolVersions; the fields here are a
    denormalized copy of the latest version's manifest so lists can filter and sort
    without loading versions."""

    name = models.CharField(max_length=64, unique=True)
    label = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    language = models.CharField(max_length=16, choices=Language.choices)
    # ",slug1,slug2," so that one LIKE finds the tools that use an integration on any database.
    integration_slugs = models.CharField(max_length=1000, blank=True, default="")
    enabled = models.BooleanField(default=True)
    latest_number = models.PositiveIntegerField(default=0)
    published_version = models.ForeignKey(
        "ToolVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # An admin's switch (tools_app/catalog/presets.py): runs of versions other than the published
    # one, started by developers, receive the tool's sensitive presets too. Off: only the
    # published version, admins and `run_tool` get them, as with integrations.
    presets_allow_test_runs = models.BooleanField(
        "allow test runs with sensitive presets", default=False
    )
    # The highest version imported from seed/, so the page can say a newer seed arrived.
    seed_version = models.PositiveIntegerField(null=True, blank=True)
    # The serial of the last manifest signed for this tool (tools_app/signing/versions.py):
    # every signature takes the next one, so a replayed older signature is recognisable.
    signing_serial = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ToolQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def integrations(self) -> list[str]:
        return [s for s in self.integration_slugs.split(",") if s]

    @property
    def status(self) -> VersionState:
        if not self.enabled:
            return VersionState.DISABLED
        return VersionState.PUBLISHED if self.published_version_id else VersionState.DRAFT

    def version_state(self, version: ToolVersion) -> VersionState:
        """The state of `version`, one of this tool's versions."""
        if version.pk == self.published_version_id:
            return VersionState.PUBLISHED if self.enabled else VersionState.DISABLED
        return VersionState.DRAFT if version.published_at is None else VersionState.SUPERSEDED

    def copy_manifest(self, manifest: Mapping) -> None:
        self.label = manifest.get("label") or manifest["name"]
        self.description = manifest.get("description", "")
        if manifest.get("kind") == "http":
            self.language = Language.HTTP
        else:
            self.language = manifest.get("language", Language.TYPESCRIPT)
        slugs = manifest.get("integrations") or []
        self.integration_slugs = f",{','.join(slugs)}," if slugs else ""


class VersionSource(models.TextChoices):
    SEED = "seed"
    CONSOLE = "console"
    IMPORT = "import"
    ROLLBACK = "rollback"


class ToolVersion(models.Model):
    """One immutable version of a tool: TOOL.md, parsed manifest and every file."""

    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    toolmd = models.TextField()
    manifest = OrderedJSONField()
    # path -> text, or path -> {"base64": ...} for files that are not UTF-8.
    files = models.JSONField()
    sha256 = models.CharField(max_length=64)
    size = models.PositiveIntegerField(default=0)
    source = models.CharField(max_length=16, choices=VersionSource.choices)
    note = models.CharField(max_length=500, blank=True)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)
    # An admin published it although its cases failed (runs/gate.py override): pages mark it.
    published_with_failing_cases = models.BooleanField(default=False)
    # The DSSE envelope of its signed manifest (docs/signing.md), set when published.
    signature = models.JSONField(null=True, blank=True)
    signed_serial = models.PositiveIntegerField(null=True, blank=True)
    signing_key_id = models.CharField(max_length=16, blank=True, default="")

    class Meta:
        ordering = ["tool", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["tool", "number"], name="unique_tool_version"),
        ]

    def __str__(self) -> str:
        return f"{self.tool_id}@{self.number}"

    @property
    def is_draft(self) -> bool:
        return self.published_at is None

    def file_bytes(self) -> dict[str, bytes]:
        return decode_files(self.files)

    @property
    def entry(self) -> str | None:
        for candidate in ENTRY_FILES.get(self.manifest.get("language", ""), ()):
            if candidate in self.files:
                return candidate
        return None


def encode_files(files: Mapping[str, bytes]) -> dict[str, object]:
    encoded: dict[str, object] = {}
    for path in sorted(files):
        data = files[path]
        try:
            encoded[path] = data.decode("utf-8")
        except UnicodeDecodeError:
            encoded[path] = {"base64": base64.b64encode(data).decode("ascii")}
    return encoded


def decode_files(files: Mapping[str, object]) -> dict[str, bytes]:
    decoded: dict[str, bytes] = {}
    for path, value in files.items():
        if isinstance(value, str):
            decoded[path] = value.encode("utf-8")
        else:
            decoded[path] = base64.b64decode(value["base64"])  # type: ignore[index]
    return decoded

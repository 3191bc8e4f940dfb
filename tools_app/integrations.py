"""Integrations (DESIGN.md section 4): types, validation, write-only secrets, the runner's
environment, the connection test and key rotation.

Views, commands and Django admin all go through the functions here, so every change is
validated the same way, written in one transaction and audited with the names of the
fields that changed, never their values.

Integration types are YAML files `seed/integrations/<slug>.yaml`:

    label: SearXNG                      # required
    description: ...                    # required
    custom: false                       # true: admins define the fields per integration
    fields:                             # required unless custom
      - name: url                       # ^[a-z][a-z0-9_]{0,63}$, unique
        label: Base URL                 # defaults to name
        env: SEARXNG_URL                # the variable a tool receives; unique
        kind: url                       # string (default) | url | path
        secret: false                   # true: encrypted, write-only; kind must be string
        required: true
        default: ...                    # used when empty (not for secrets)
        help: ...
    test:                               # optional: a 2xx (or `expect`) means it works
      method: GET                       # GET | HEAD | POST
      url: "{url}/search?q=test&format=json"
      headers: {Authorization: "Bearer {token}"}   # dropped when a placeholder is empty
      body: ...                         # POST only
      expect: [200]                     # default: any 2xx

Placeholders `{field}` name fields of the type; url fields are inserted as they are
(without a trailing slash), other values percent-encoded in the URL and verbatim in
headers. Parsing never expands YAML anchors/aliases and every error names the file, the
line and the key, like TOOL.md errors.
"""

from __future__ import annotations

import ipaddress
import json
import re
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus, urlsplit

import yaml
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django.views.decorators.debug import sensitive_variables
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from tools_app import egress, egress_config, http, vault
from tools_app.audit import Actor, record
from tools_app.checks import warning_source
from tools_app.models import Integration, IntegrationSecret, Tool

TYPE_SLUG_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")
# Same as tool manifests' integration slugs (tools_app.toolmd.SLUG_RE).
SLUG_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
FIELD_NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")
ENV_RE = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")
KINDS = ("string", "url", "path")
METHODS = ("GET", "HEAD", "POST")
TYPE_KEYS = ("label", "description", "custom", "fields", "test")
FIELD_KEYS = ("name", "label", "env", "kind", "secret", "required", "default", "help")
TEST_KEYS = ("method", "url", "headers", "body", "expect")

MAX_TYPE_FILE = 64 * 1024
MAX_SECRET = 64 * 1024  # bytes, UTF-8
MAX_VALUE = 8 * 1024
MAX_URL = 2048
MAX_PATH = 4096
MAX_FIELDS = 50
MAX_LABEL = 200
TEST_TIMEOUT = 10.0
EXCERPT_CHARS = 300

# Paths that the integration pages use themselves.
RESERVED_SLUGS = frozenset({"new", "environment", "test"})
# Variables an integration may not set: they would change how the tool's runtime behaves.
RESERVED_ENV = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "OLDPWD", "TMPDIR", "TMP", "TEMP",
        "LANG", "LANGUAGE", "TERM", "TZ", "IFS", "ENV", "BASH_ENV", "PS4", "CDPATH",
        "GLOBIGNORE", "SHELLOPTS", "BASHOPTS", "PROMPT_COMMAND", "DATA_PATH", "PI_TOOLS_DIRS",
    }
)  # fmt: skip
RESERVED_ENV_PREFIXES = (
    "LD_", "DYLD_", "LC_", "NODE_", "NPM_", "PYTHON", "PERL", "RUBY", "INPUT_", "TOOL_",
    "CONSOLE_", "DJANGO_", "CELERY_", "BASH_FUNC_",
)  # fmt: skip

# ----------------------------------------------------------------------------------------
# Errors


class IntegrationError(Exception):
    """A problem a person can act on; the message never contains a secret value."""


class UnknownType(IntegrationError):
    pass


class UnknownIntegration(IntegrationError):
    pass


class InvalidIntegration(IntegrationError):
    """Bad input. `errors` maps a field name (or "slug", "label", "custom_fields",
    "__all__") to messages."""

    def __init__(self, errors: Mapping[str, list[str]]) -> None:
        self.errors = {k: list(v) for k, v in errors.items() if v}
        super().__init__(
            "; ".join(
                f"{k}: {m}" if k != "__all__" else m for k, ms in self.errors.items() for m in ms
            )
        )


class Conflict(IntegrationError):
    """Someone saved the integration after the form was opened."""

    def __init__(self, integration: Integration, base_revision: int) -> None:
        self.integration = integration
        self.base_revision = base_revision
        who = integration.updated_by.get_username() if integration.updated_by else "someone"
        when = timezone.localtime(integration.updated_at).strftime("%Y-%m-%d %H:%M:%S")
        super().__init__(
            f"{integration.slug} was changed by {who} at {when} after you opened this form, "
            "so your changes were not saved. Your entries are kept below (secret fields must "
            "be typed again): review them against the current values and save again."
        )


class InUse(IntegrationError):
    def __init__(self, integration: Integration, tools: list[Tool]) -> None:
        self.integration = integration
        self.tools = tools
        names = ", ".join(t.name for t in tools)
        super().__init__(
            f"{integration.slug} is declared by published tools ({names}); "
            "confirm to delete it anyway (those tools then fail until it is configured again)"
        )


class SecretsUnavailable(IntegrationError):
    """The encryption keys are unusable, so no secret can be stored: nothing was saved."""


class IntegrationUnavailable(IntegrationError):
    """Raised to the runner: the run fails with this message."""


class RotationError(IntegrationError):
    def __init__(self, slug: str, field_name: str, rotated: int, reason: str) -> None:
        self.slug = slug
        self.field = field_name
        self.rotated = rotated
        super().__init__(
            f"stopped at integration '{slug}', field '{field_name}': {reason}. "
            f"{rotated} secret{'s' if rotated != 1 else ''} re-encrypted before it; "
            "nothing was changed for this one. Add the key it was encrypted with to "
            "CONSOLE_ENCRYPTION_KEYS (after the new one) or set the secret again, then rerun."
        )


# ----------------------------------------------------------------------------------------
# Types


@dataclass(frozen=True)
class Problem:
    path: str
    line: int
    key: str
    message: str
    severity: str = "error"

    def __str__(self) -> str:
        mark = "warning: " if self.severity == "warning" else ""
        return f"{self.path}:{self.line}: {self.key}: {mark}{self.message}"


@dataclass(frozen=True)
class FieldSpec:
    name: str
    env: str
    label: str = ""
    kind: str = "string"
    secret: bool = False
    required: bool = False
    default: str = ""
    help: str = ""

    @property
    def display(self) -> str:
        return self.label or self.name

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "label": self.label,
            "env": self.env,
            "kind": self.kind,
            "secret": self.secret,
            "required": self.required,
        }


@dataclass(frozen=True)
class TestSpec:
    url: str
    method: str = "GET"
    headers: tuple[tuple[str, str], ...] = ()
    body: str = ""
    expect: tuple[int, ...] = ()  # empty: any 2xx


@dataclass(frozen=True)
class IntegrationType:
    slug: str
    label: str
    description: str
    fields: tuple[FieldSpec, ...] = ()
    test: TestSpec | None = None
    custom: bool = False
    path: str = ""

    def field(self, name: str) -> FieldSpec | None:
        return next((f for f in self.fields if f.name == name), None)


@dataclass(frozen=True)
class TypeRegistry:
    types: dict[str, IntegrationType]
    problems: list[Problem]


class _Refused(Exception):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


class _Loader(yaml.SafeLoader):
    """Composes nodes only; anchors and aliases are refused before anything expands."""

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _Refused(
                event.start_mark.line + 1, "YAML anchors and aliases (& and *) are not allowed"
            )
        return super().compose_node(parent, index)


class _Map(dict):
    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.lines: dict[str, int] = {}


class _Seq(list):
    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.lines: list[int] = []


_constructor = SafeConstructor()
_SCALARS = {
    "tag:yaml.org,2002:str": lambda n: n.value,
    "tag:yaml.org,2002:int": _constructor.construct_yaml_int,
    "tag:yaml.org,2002:bool": _constructor.construct_yaml_bool,
    "tag:yaml.org,2002:null": lambda n: None,
    "tag:yaml.org,2002:float": _constructor.construct_yaml_float,
}


def _value(node: Node) -> Any:
    line = node.start_mark.line + 1
    if isinstance(node, MappingNode):
        result = _Map(line)
        for key_node, value_node in node.value:
            key = _value(key_node)
            if not isinstance(key, str):
                raise _Refused(key_node.start_mark.line + 1, "keys must be strings")
            if key in result:
                raise _Refused(key_node.start_mark.line + 1, f"duplicate key {key!r}")
            result[key] = _value(value_node)
            result.lines[key] = key_node.start_mark.line + 1
        return result
    if isinstance(node, SequenceNode):
        seq = _Seq(line)
        for item in node.value:
            seq.append(_value(item))
            seq.lines.append(item.start_mark.line + 1)
        return seq
    assert isinstance(node, ScalarNode)
    make = _SCALARS.get(node.tag)
    if make is None:
        raise _Refused(line, f"unsupported YAML value (tag {node.tag})")
    return make(node)


class _Checker:
    def __init__(self, path: str) -> None:
        self.path = path
        self.problems: list[Problem] = []

    def error(self, line: int, key: str, message: str) -> None:
        self.problems.append(Problem(self.path, line, key, message))

    def warning(self, line: int, key: str, message: str) -> None:
        self.problems.append(Problem(self.path, line, key, message, "warning"))

    @property
    def failed(self) -> bool:
        return any(p.severity == "error" for p in self.problems)


def _display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path(settings.BASE_DIR).resolve()))
    except ValueError:
        return str(path)


def _text(c: _Checker, m: _Map, key: str, path: str, *, required: bool, limit: int = 2000) -> str:
    value = m.get(key)
    line = m.lines.get(key, m.line)
    if value is None or value == "":
        if required:
            c.error(line, path, "is required")
        return ""
    if not isinstance(value, str):
        c.error(line, path, f"must be a string, not {type(value).__name__}")
        return ""
    if len(value) > limit:
        c.error(line, path, f"is longer than {limit} characters")
        return ""
    return value.strip()


def _flag(c: _Checker, m: _Map, key: str, path: str) -> bool:
    value = m.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        c.error(m.lines.get(key, m.line), path, f"must be true or false, not {value!r}")
        return False
    return value


def env_problem(env: str) -> str | None:
    """Why `env` cannot be an integration's variable name, or None."""
    if not ENV_RE.fullmatch(env):
        return (
            f"{env!r} is not a valid environment variable name "
            "(capital letters, digits and _, not starting with a digit)"
        )
    if env in RESERVED_ENV or env.startswith(RESERVED_ENV_PREFIXES):
        return f"{env!r} is reserved for the tool runtime"
    return None


def _check_field(c: _Checker, item: Any, index: int, line: int) -> FieldSpec | None:
    path = f"fields[{index}]"
    if not isinstance(item, _Map):
        c.error(line, path, "must be a mapping with name, env, ...")
        return None
    for key in item:
        if key not in FIELD_KEYS:
            c.error(
                item.lines[key], f"{path}.{key}", f"unknown key (allowed: {', '.join(FIELD_KEYS)})"
            )
    name = _text(c, item, "name", f"{path}.name", required=True, limit=64)
    if name and not FIELD_NAME_RE.fullmatch(name):
        c.error(
            item.lines["name"], f"{path}.name", f"{name!r} does not match {FIELD_NAME_RE.pattern}"
        )
    env = _text(c, item, "env", f"{path}.env", required=True, limit=128)
    if env and (problem := env_problem(env)):
        c.error(item.lines["env"], f"{path}.env", problem)
    kind = _text(c, item, "kind", f"{path}.kind", required=False) or "string"
    if kind not in KINDS:
        c.error(item.lines["kind"], f"{path}.kind", f"{kind!r} is not one of {', '.join(KINDS)}")
    secret = _flag(c, item, "secret", f"{path}.secret")
    if secret and kind != "string":
        c.error(item.lines["kind"], f"{path}.kind", "secret fields must be of kind string")
    default = item.get("default")
    if default is not None and not isinstance(default, str):
        c.error(item.lines["default"], f"{path}.default", "must be a string")
        default = None
    if secret and default:
        c.error(item.lines["default"], f"{path}.default", "secret fields cannot have a default")
    if default and kind in KINDS and not secret:
        problem = value_problem(kind, default)
        if problem:
            c.error(item.lines["default"], f"{path}.default", problem)
    spec = FieldSpec(
        name=name,
        env=env,
        label=_text(c, item, "label", f"{path}.label", required=False, limit=MAX_LABEL) or name,
        kind=kind,
        secret=secret,
        required=_flag(c, item, "required", f"{path}.required"),
        default=(default or "").strip(),
        help=_text(c, item, "help", f"{path}.help", required=False),
    )
    return spec


def placeholders(template: str) -> list[str]:
    """Field names used as {name} in a template; raises ValueError on a bad template."""
    names = []
    for _literal, name, spec, conversion in string.Formatter().parse(template):
        if name is None:
            continue
        if spec or conversion or not FIELD_NAME_RE.fullmatch(name):
            raise ValueError(f"{{{name}}} must be a plain {{field_name}}")
        names.append(name)
    return names


def _check_template(
    c: _Checker, template: str, line: int, path: str, fields: Mapping[str, FieldSpec]
) -> None:
    try:
        names = placeholders(template)
    except ValueError as exc:
        c.error(line, path, f"bad placeholder: {exc} (write {{{{ and }}}} for literal braces)")
        return
    for name in names:
        if name not in fields:
            c.error(line, path, f"{{{name}}} is not a field of this type")


def _check_test(c: _Checker, m: _Map, fields: Mapping[str, FieldSpec]) -> TestSpec | None:
    test = m["test"]
    line = m.lines["test"]
    if test is None:
        return None
    if not isinstance(test, _Map):
        c.error(line, "test", "must be a mapping with method, url, headers, expect")
        return None
    for key in test:
        if key not in TEST_KEYS:
            c.error(
                test.lines[key], f"test.{key}", f"unknown key (allowed: {', '.join(TEST_KEYS)})"
            )
    method = (_text(c, test, "method", "test.method", required=False) or "GET").upper()
    if method not in METHODS:
        c.error(
            test.lines["method"], "test.method", f"{method!r} is not one of {', '.join(METHODS)}"
        )
    url = _text(c, test, "url", "test.url", required=True, limit=MAX_URL)
    if url:
        _check_template(c, url, test.lines["url"], "test.url", fields)
        scheme = url.split(":", 1)[0].lower() if ":" in url.split("{", 1)[0] else ""
        starts_with_url_field = any(
            url.startswith("{" + f.name + "}") and f.kind == "url" for f in fields.values()
        )
        if scheme not in ("http", "https") and not starts_with_url_field:
            c.error(
                test.lines["url"],
                "test.url",
                "must start with http://, https:// or a {field} of kind url",
            )
    headers: list[tuple[str, str]] = []
    raw_headers = test.get("headers")
    if raw_headers is not None:
        if not isinstance(raw_headers, _Map):
            c.error(test.lines["headers"], "test.headers", "must be a mapping of name: value")
        else:
            for name, value in raw_headers.items():
                hline = raw_headers.lines[name]
                if not re.fullmatch(r"[A-Za-z0-9-]{1,100}", name):
                    c.error(hline, f"test.headers.{name}", "is not a valid header name")
                    continue
                if not isinstance(value, str):
                    c.error(hline, f"test.headers.{name}", "must be a string")
                    continue
                _check_template(c, value, hline, f"test.headers.{name}", fields)
                headers.append((name, value))
    body = _text(c, test, "body", "test.body", required=False, limit=16 * 1024)
    if body:
        _check_template(c, body, test.lines["body"], "test.body", fields)
        if method != "POST":
            c.error(test.lines["body"], "test.body", "only a POST test can have a body")
    expect: list[int] = []
    raw_expect = test.get("expect")
    if raw_expect is not None:
        items = raw_expect if isinstance(raw_expect, list) else [raw_expect]
        for item in items:
            if isinstance(item, bool) or not isinstance(item, int) or not 100 <= item <= 599:
                c.error(test.lines["expect"], "test.expect", f"{item!r} is not an HTTP status")
            else:
                expect.append(item)
    return TestSpec(url=url, method=method, headers=tuple(headers), body=body, expect=tuple(expect))


def parse_type(
    text: str | bytes, path: str, slug: str
) -> tuple[IntegrationType | None, list[Problem]]:
    """Parse and validate one type file. Never raises on bad input."""
    c = _Checker(path)
    if len(text) > MAX_TYPE_FILE:
        c.error(1, "file", f"is larger than {MAX_TYPE_FILE // 1024} KiB")
        return None, c.problems
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            c.error(1, "file", f"is not UTF-8 (byte {exc.start})")
            return None, c.problems
    if not TYPE_SLUG_RE.fullmatch(slug):
        c.error(1, "file", f"the file name {slug!r} must match {TYPE_SLUG_RE.pattern}")
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        data = _value(node) if node is not None else None
    except _Refused as exc:
        c.error(exc.line, "yaml", exc.message)
        return None, c.problems
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        c.error(line, "yaml", getattr(exc, "problem", None) or str(exc).splitlines()[0])
        return None, c.problems
    finally:
        loader.dispose()
    if not isinstance(data, _Map):
        c.error(1, "file", "must be a YAML mapping with label, description and fields")
        return None, c.problems
    for key in data:
        if key not in TYPE_KEYS:
            c.warning(data.lines[key], key, f"unknown key, ignored (known: {', '.join(TYPE_KEYS)})")
    label = _text(c, data, "label", "label", required=True, limit=MAX_LABEL)
    description = _text(c, data, "description", "description", required=True)
    custom = _flag(c, data, "custom", "custom")
    fields: dict[str, FieldSpec] = {}
    raw_fields = data.get("fields")
    if raw_fields is None or raw_fields == []:
        if not custom:
            c.error(data.lines.get("fields", data.line), "fields", "is required (a list of fields)")
    elif not isinstance(raw_fields, _Seq):
        c.error(data.lines["fields"], "fields", "must be a list of fields")
    elif custom:
        c.error(data.lines["fields"], "fields", "a custom type has no fields: admins define them")
    else:
        envs: dict[str, str] = {}
        for index, (item, line) in enumerate(zip(raw_fields, raw_fields.lines, strict=True)):
            spec = _check_field(c, item, index, line)
            if spec is None or not spec.name:
                continue
            if spec.name in fields:
                c.error(line, f"fields[{index}].name", f"duplicate field {spec.name!r}")
            elif spec.env and spec.env in envs:
                c.error(
                    line,
                    f"fields[{index}].env",
                    f"{spec.env} is already used by {envs[spec.env]!r}",
                )
            else:
                fields[spec.name] = spec
                envs[spec.env] = spec.name
        if len(fields) > MAX_FIELDS:
            c.error(data.lines["fields"], "fields", f"more than {MAX_FIELDS} fields")
    test = None
    if "test" in data:
        if custom:
            c.error(data.lines["test"], "test", "a custom type cannot have a test")
        else:
            test = _check_test(c, data, fields)
    if c.failed:
        return None, c.problems
    return (
        IntegrationType(
            slug=slug,
            label=label,
            description=description,
            fields=tuple(fields.values()),
            test=test,
            custom=custom,
            path=path,
        ),
        c.problems,
    )


def types_dir() -> Path:
    return Path(
        getattr(settings, "INTEGRATION_TYPES_PATH", None) or settings.SEED_PATH / "integrations"
    )


_types_cache: dict[tuple, TypeRegistry] = {}


def load_types(directory: Path | None = None) -> TypeRegistry:
    """All valid types in `directory` (default seed/integrations), plus every problem.
    Cached until a file changes."""
    directory = Path(directory or types_dir())
    try:
        files = sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml"))
    except OSError:
        files = []
    stamp = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files if p.is_file())
    cached = _types_cache.get((str(directory), stamp))
    if cached is not None:
        return cached
    types: dict[str, IntegrationType] = {}
    problems: list[Problem] = []
    for path in files:
        shown = _display_path(path)
        if not path.is_file():
            problems.append(Problem(shown, 1, "file", "is not a regular file"))
            continue
        if path.stat().st_size > MAX_TYPE_FILE:
            problems.append(
                Problem(shown, 1, "file", f"is larger than {MAX_TYPE_FILE // 1024} KiB")
            )
            continue
        itype, found = parse_type(path.read_bytes(), shown, path.stem)
        problems += found
        if itype is None:
            continue
        if itype.slug in types:
            problems.append(Problem(shown, 1, "file", f"type {itype.slug!r} is defined twice"))
            continue
        types[itype.slug] = itype
    registry = TypeRegistry(types=types, problems=problems)
    _types_cache.clear()
    _types_cache[(str(directory), stamp)] = registry
    return registry


def integration_types() -> dict[str, IntegrationType]:
    return load_types().types


def get_type(slug: str) -> IntegrationType:
    types = integration_types()
    try:
        return types[slug]
    except KeyError:
        known = ", ".join(sorted(types)) or "none installed"
        raise UnknownType(f"unknown integration type {slug!r} (known: {known})") from None


@warning_source
def integration_type_warnings() -> list[str]:
    return [f"Integration type file: {p}" for p in load_types().problems if p.severity == "error"]


# ----------------------------------------------------------------------------------------
# Custom fields: "ENV_NAME [secret] [required] [url|path]", one per line.

CUSTOM_FLAGS = ("secret", "required", "url", "path")


def parse_custom_fields(text: str) -> list[FieldSpec]:
    """Parse an admin's field list; raises InvalidIntegration naming the line."""
    specs: list[FieldSpec] = []
    errors: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        env, *flags = line.split()
        problem = env_problem(env)
        if problem:
            errors.append(f"line {number}: {problem}")
            continue
        unknown = [f for f in flags if f.lower() not in CUSTOM_FLAGS]
        if unknown:
            errors.append(
                f"line {number}: unknown flag {unknown[0]!r} (use: {', '.join(CUSTOM_FLAGS)})"
            )
            continue
        flags = [f.lower() for f in flags]
        kind = "url" if "url" in flags else "path" if "path" in flags else "string"
        if "secret" in flags and kind != "string":
            errors.append(f"line {number}: a secret field cannot be a url or path")
            continue
        if any(s.env == env for s in specs):
            errors.append(f"line {number}: {env} is listed twice")
            continue
        specs.append(
            FieldSpec(
                name=env.lower(),
                env=env,
                label=env,
                kind=kind,
                secret="secret" in flags,
                required="required" in flags,
            )
        )
    if len(specs) > MAX_FIELDS:
        errors.append(f"more than {MAX_FIELDS} fields")
    if not specs and not errors:
        errors.append("define at least one field, e.g. MY_API_TOKEN secret required")
    if errors:
        raise InvalidIntegration({"custom_fields": errors})
    return specs


def format_custom_fields(specs: Iterable[FieldSpec]) -> str:
    lines = []
    for s in specs:
        flags = [f for f in ("secret", "required") if getattr(s, f)]
        if s.kind != "string":
            flags.append(s.kind)
        lines.append(" ".join([s.env, *flags]))
    return "\n".join(lines)


def _spec_from_dict(d: Mapping[str, Any]) -> FieldSpec:
    return FieldSpec(
        name=str(d.get("name", "")),
        env=str(d.get("env", "")),
        label=str(d.get("label") or d.get("name", "")),
        kind=str(d.get("kind") or "string"),
        secret=bool(d.get("secret")),
        required=bool(d.get("required")),
    )


def fields_of(integration: Integration) -> tuple[FieldSpec, ...]:
    """The field definitions of an integration: its type's, or its own for custom ones."""
    if integration.custom_fields:
        return tuple(_spec_from_dict(d) for d in integration.custom_fields)
    itype = integration_types().get(integration.type_slug)
    return itype.fields if itype is not None else ()


def type_of(integration: Integration) -> IntegrationType | None:
    return integration_types().get(integration.type_slug)


# ----------------------------------------------------------------------------------------
# Validation


def value_problem(kind: str, value: str) -> str | None:
    if "\x00" in value:
        return "must not contain NUL characters"
    if kind == "url":
        if len(value) > MAX_URL:
            return f"is longer than {MAX_URL} characters"
        return url_problem(value)
    if kind == "path":
        if len(value) > MAX_PATH:
            return f"is longer than {MAX_PATH} characters"
        if not value.startswith("/"):
            return "must be an absolute path, e.g. /data/mail/index.sqlite3"
        return None
    if len(value) > MAX_VALUE:
        return f"is longer than {MAX_VALUE // 1024} KiB"
    return None


_HOST_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9-]{1,63})*\.?")


def url_problem(value: str) -> str | None:
    """http(s) URLs with a host; single-label hosts (http://searxng:8080, a container
    name) are fine. Credentials in the URL are refused: they belong in a secret field."""
    example = "must be an http:// or https:// URL, e.g. https://search.example.org"
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        return example + " (no spaces)"
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return example
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return example
    if parts.username is not None or parts.password is not None:
        return "must not contain a user name or password: put credentials in a secret field"
    host = parts.hostname or ""
    if not host or (port is not None and not 0 < port < 65536):
        return example
    if host.startswith("[") or ":" in host:
        try:
            ipaddress.IPv6Address(host.strip("[]"))
        except ValueError:
            return example
    elif not _HOST_RE.fullmatch(host):
        return example
    if "#" in value:
        return "must not contain a #fragment"
    return None


@sensitive_variables()
def secret_problem(value: str) -> str | None:
    if "\x00" in value:
        return "must not contain NUL characters"
    if len(value.encode("utf-8")) > MAX_SECRET:
        return f"is larger than {MAX_SECRET // 1024} KiB"
    return None


def slug_problem(slug: str) -> str | None:
    if not SLUG_RE.fullmatch(slug):
        return (
            f"{slug!r} is not a valid slug: lower-case letters, digits, _ and -, "
            "starting with a letter or digit, at most 64 characters"
        )
    if slug in RESERVED_SLUGS:
        return f"{slug!r} is reserved"
    return None


@sensitive_variables()
def _normalize_secret(value: str) -> str:
    # A secret pasted or piped with a trailing newline almost never means the newline.
    return value.rstrip("\r\n")


@dataclass
class _Plan:
    values: dict[str, str]
    set_secrets: dict[str, str]
    clear_secrets: set[str]
    changed: list[str] = field(default_factory=list)


@sensitive_variables()
def _plan(
    fields: tuple[FieldSpec, ...],
    *,
    current_values: Mapping[str, str],
    stored_secrets: set[str],
    values: Mapping[str, str],
    secrets: Mapping[str, str],
    clear: Iterable[str],
    errors: dict[str, list[str]],
) -> _Plan:
    by_name = {f.name: f for f in fields}
    known = ", ".join(by_name) or "none"
    new_values = {k: v for k, v in current_values.items() if k in by_name}
    set_secrets: dict[str, str] = {}
    clear_secrets: set[str] = set()
    for name, raw in values.items():
        spec = by_name.get(name)
        if spec is None:
            errors.setdefault(name, []).append(f"unknown field {name!r} (fields: {known})")
            continue
        if spec.secret:
            errors.setdefault(name, []).append(
                f"{name!r} is a secret field: it cannot be set as a plain value"
            )
            continue
        value = (raw or "").strip()
        if value:
            problem = value_problem(spec.kind, value)
            if problem:
                errors.setdefault(name, []).append(f"{spec.display} {problem}")
                continue
            new_values[name] = value
        else:
            new_values.pop(name, None)
    for name, raw in secrets.items():
        spec = by_name.get(name)
        if spec is None:
            errors.setdefault(name, []).append(f"unknown field {name!r} (fields: {known})")
            continue
        if not spec.secret:
            errors.setdefault(name, []).append(f"{name!r} is not a secret field")
            continue
        value = _normalize_secret(raw or "")
        if not value:
            continue  # empty keeps the stored secret
        problem = secret_problem(value)
        if problem:
            errors.setdefault(name, []).append(f"{spec.display} {problem}")
            continue
        set_secrets[name] = value
    for name in clear:
        spec = by_name.get(name)
        if spec is None:
            errors.setdefault(name, []).append(f"unknown field {name!r} (fields: {known})")
        elif name in set_secrets:
            errors.setdefault(name, []).append(
                f"{spec.display}: type a new value or clear it, not both"
            )
        elif spec.secret:
            if name in stored_secrets:
                clear_secrets.add(name)
        else:
            new_values.pop(name, None)
    after_secrets = (stored_secrets - clear_secrets) | set(set_secrets)
    for spec in fields:
        if not spec.required or errors.get(spec.name):
            continue
        present = spec.name in after_secrets if spec.secret else bool(new_values.get(spec.name))
        if not present and not spec.default:
            errors.setdefault(spec.name, []).append(f"{spec.display} is required")
    changed = sorted(
        {n for n in by_name if new_values.get(n) != current_values.get(n)}
        | set(set_secrets)
        | clear_secrets
    )
    return _Plan(new_values, set_secrets, clear_secrets, changed)


@sensitive_variables()
def _store_secrets(integration: Integration, plan: _Plan, user) -> None:
    now = timezone.now()
    for name, value in plan.set_secrets.items():
        try:
            token, kid = vault.encrypt(value)
        except vault.VaultError as exc:  # raised inside the transaction: nothing is saved
            raise SecretsUnavailable(f"Encryption keys: {exc}. Nothing was saved.") from None
        IntegrationSecret.objects.update_or_create(
            integration=integration,
            field=name,
            defaults={"ciphertext": token, "key_id": kid, "set_at": now, "set_by": user},
        )
    if plan.clear_secrets:
        integration.secrets.filter(field__in=plan.clear_secrets).delete()


def _summary(plan: _Plan, fields: tuple[FieldSpec, ...]) -> tuple[str, dict[str, Any]]:
    secret_names = {f.name for f in fields if f.secret}
    plain = [n for n in plan.changed if n not in secret_names]
    parts = []
    if plain:
        parts.append("changed " + ", ".join(plain))
    if plan.set_secrets:
        parts.append("set secret " + ", ".join(sorted(plan.set_secrets)))
    if plan.clear_secrets:
        parts.append("cleared secret " + ", ".join(sorted(plan.clear_secrets)))
    data = {
        "fields_changed": plain,
        "secrets_set": sorted(plan.set_secrets),
        "secrets_cleared": sorted(plan.clear_secrets),
    }
    return "; ".join(parts), data


# ----------------------------------------------------------------------------------------
# Create, update, enable/disable, delete


@sensitive_variables()
def create_integration(
    slug: str,
    type_slug: str,
    *,
    actor: Actor,
    label: str = "",
    values: Mapping[str, str] | None = None,
    secrets: Mapping[str, str] | None = None,
    custom_fields: list[FieldSpec] | str | None = None,
    enabled: bool = True,
) -> Integration:
    itype = get_type(type_slug)
    slug = (slug or type_slug).strip()
    errors: dict[str, list[str]] = {}
    if problem := slug_problem(slug):
        errors["slug"] = [problem]
    elif Integration.objects.filter(slug=slug).exists():
        errors["slug"] = [f"an integration with slug {slug!r} already exists"]
    label = (label or "").strip()
    if len(label) > MAX_LABEL:
        errors["label"] = [f"is longer than {MAX_LABEL} characters"]
    fields = itype.fields
    if itype.custom:
        fields = _custom_specs(custom_fields, errors)
    elif custom_fields:
        errors["custom_fields"] = [f"type {type_slug!r} has fixed fields"]
    plan = _plan(
        fields,
        current_values={},
        stored_secrets=set(),
        values=values or {},
        secrets=secrets or {},
        clear=(),
        errors=errors,
    )
    if errors:
        raise InvalidIntegration(errors)
    with transaction.atomic():
        integration = Integration.objects.create(
            slug=slug,
            type_slug=type_slug,
            label=label,
            enabled=enabled,
            values=plan.values,
            custom_fields=[f.as_dict() for f in fields] if itype.custom else [],
            updated_by=actor.user,
        )
        _store_secrets(integration, plan, actor.user)
        summary, data = _summary(plan, fields)
        record(
            actor,
            "integration.create",
            integration,
            summary=f"created {slug} ({type_slug})" + (f"; {summary}" if summary else ""),
            data={"type": type_slug, **data},
        )
    return integration


def _custom_specs(
    custom_fields: list[FieldSpec] | str | None, errors: dict
) -> tuple[FieldSpec, ...]:
    if isinstance(custom_fields, str):
        try:
            return tuple(parse_custom_fields(custom_fields))
        except InvalidIntegration as exc:
            errors.update(exc.errors)
            return ()
    if not custom_fields:
        errors["custom_fields"] = ["define at least one field, e.g. MY_API_TOKEN secret required"]
        return ()
    return tuple(custom_fields)


def get_integration(slug: str) -> Integration:
    integration = Integration.objects.filter(slug=slug).first()
    if integration is None:
        raise UnknownIntegration(f"no integration with slug {slug!r}")
    return integration


@sensitive_variables()
def update_integration(
    integration: Integration | str,
    *,
    actor: Actor,
    revision: int | None = None,
    label: str | None = None,
    values: Mapping[str, str] | None = None,
    secrets: Mapping[str, str] | None = None,
    clear: Iterable[str] = (),
    custom_fields: list[FieldSpec] | str | None = None,
    enabled: bool | None = None,
) -> Integration:
    """Apply a change. `values` lists non-secret fields to set ("" unsets); fields not
    named keep their values. Empty `secrets` entries keep the stored secret; `clear`
    removes. With `revision`, a save made since then raises Conflict and changes nothing."""
    slug = integration if isinstance(integration, str) else integration.slug
    with transaction.atomic():
        current = Integration.objects.select_for_update().filter(slug=slug).first()
        if current is None:
            raise UnknownIntegration(f"no integration with slug {slug!r}")
        if revision is not None and current.revision != revision:
            raise Conflict(current, revision)
        errors: dict[str, list[str]] = {}
        fields = fields_of(current)
        removed: list[str] = []
        if custom_fields is not None:
            if current.custom_fields or (type_of(current) and type_of(current).custom):
                fields = _custom_specs(custom_fields, errors)
                old = {f.name for f in fields_of(current)}
                removed = sorted(old - {f.name for f in fields})
            else:
                errors["custom_fields"] = [f"type {current.type_slug!r} has fixed fields"]
        elif not fields:
            errors["__all__"] = [
                f"integration type {current.type_slug!r} is not installed; its fields are unknown"
            ]
        new_label = current.label if label is None else label.strip()
        if len(new_label) > MAX_LABEL:
            errors["label"] = [f"is longer than {MAX_LABEL} characters"]
        stored = set(current.secrets.values_list("field", flat=True))
        names = {f.name for f in fields}
        plan = _plan(
            fields,
            current_values=current.values or {},
            stored_secrets=stored & names,
            values=values or {},
            secrets=secrets or {},
            clear=clear,
            errors=errors,
        )
        if errors:
            raise InvalidIntegration(errors)
        plan.clear_secrets |= stored - names  # secrets of fields that no longer exist
        changed_meta = []
        if new_label != current.label:
            changed_meta.append("label")
        if enabled is not None and enabled != current.enabled:
            changed_meta.append("enabled")
        new_custom = [f.as_dict() for f in fields] if current.custom_fields or custom_fields else []
        if custom_fields is not None and new_custom != current.custom_fields:
            changed_meta.append("custom_fields")
        if not plan.changed and not changed_meta and not plan.clear_secrets:
            return current
        current.label = new_label
        if enabled is not None:
            current.enabled = enabled
        current.values = plan.values
        current.custom_fields = new_custom if custom_fields is not None else current.custom_fields
        current.revision += 1
        current.updated_by = actor.user
        current.save()
        _store_secrets(current, plan, actor.user)
        summary, data = _summary(plan, fields)
        parts = [
            p
            for p in (", ".join(changed_meta) and "changed " + ", ".join(changed_meta), summary)
            if p
        ]
        if removed:
            parts.append("removed field " + ", ".join(removed))
        record(
            actor,
            "integration.update",
            current,
            summary="; ".join(parts),
            data={**data, "changed": changed_meta, "fields_removed": removed},
        )
    return current


def set_enabled(integration: Integration, enabled: bool, *, actor: Actor) -> Integration:
    with transaction.atomic():
        current = Integration.objects.select_for_update().get(pk=integration.pk)
        if current.enabled == enabled:
            return current
        current.enabled = enabled
        current.revision += 1
        current.updated_by = actor.user
        current.save(update_fields=["enabled", "revision", "updated_by", "updated_at"])
        record(
            actor,
            "integration.enable" if enabled else "integration.disable",
            current,
            summary=f"{'enabled' if enabled else 'disabled'} {current.slug}",
        )
    return current


def tools_using(slug: str) -> list[Tool]:
    """Tools whose latest or published version declares the integration."""
    tools = {
        t.pk: t for t in Tool.objects.using_integration(slug).select_related("published_version")
    }
    for tool in Tool.objects.filter(published_version__isnull=False).select_related(
        "published_version"
    ):
        if tool.pk not in tools and slug in (
            tool.published_version.manifest.get("integrations") or []
        ):
            tools[tool.pk] = tool
    return sorted(tools.values(), key=lambda t: t.name)


def published_tools_using(slug: str) -> list[Tool]:
    return [
        t
        for t in tools_using(slug)
        if t.enabled
        and t.published_version is not None
        and slug in (t.published_version.manifest.get("integrations") or [])
    ]


def delete_integration(integration: Integration, *, actor: Actor, confirm: bool = False) -> None:
    """Delete, refused (InUse) while published tools declare it unless confirmed."""
    in_use = published_tools_using(integration.slug)
    if in_use and not confirm:
        raise InUse(integration, in_use)
    with transaction.atomic():
        slug, type_slug = integration.slug, integration.type_slug
        secrets = sorted(integration.secrets.values_list("field", flat=True))
        record(
            actor,
            "integration.delete",
            integration,
            summary=f"deleted {slug} ({type_slug})"
            + (f"; declared by {', '.join(t.name for t in in_use)}" if in_use else ""),
            data={
                "type": type_slug,
                "secrets_deleted": secrets,
                "tools": [t.name for t in in_use],
            },
        )
        integration.delete()


# ----------------------------------------------------------------------------------------
# What pages show: which fields are set, never values


@dataclass(frozen=True)
class FieldState:
    spec: FieldSpec
    is_set: bool
    value: str = ""  # non-secret fields only, for admins
    set_at: Any = None
    set_by: str = ""


def field_states(integration: Integration) -> list[FieldState]:
    secrets = {s.field: s for s in integration.secrets.select_related("set_by")}
    states = []
    for spec in fields_of(integration):
        if spec.secret:
            stored = secrets.get(spec.name)
            states.append(
                FieldState(
                    spec=spec,
                    is_set=stored is not None,
                    set_at=stored.set_at if stored else None,
                    set_by=(stored.set_by.get_username() if stored and stored.set_by else "")
                    if stored
                    else "",
                )
            )
        else:
            value = (integration.values or {}).get(spec.name, "")
            states.append(FieldState(spec=spec, is_set=bool(value), value=value))
    return states


# ----------------------------------------------------------------------------------------
# The runner's environment


def secret_label(slug: str, field_name: str) -> str:
    """What a secret value is replaced with in everything stored or shown about a run."""
    return "{{" + f"{slug}.{field_name}" + "}}"


@sensitive_variables()
def environment_for(slugs: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
    """The variables for a tool that declares `slugs`, and its secrets for redaction.

    Returns (env, secrets): env maps variable name -> value for the declared integrations
    only; secrets maps label `{{slug.field}}` -> plaintext for every secret injected.
    Raises IntegrationUnavailable (a message the run shows) when an integration is
    missing, disabled, incomplete, collides with another, or a secret cannot be
    decrypted. Nothing is partially returned."""
    env: dict[str, str] = {}
    owners: dict[str, str] = {}
    labels: dict[str, str] = {}
    slugs = list(dict.fromkeys(slugs))
    found = {
        i.slug: i for i in Integration.objects.filter(slug__in=slugs).prefetch_related("secrets")
    }
    for slug in slugs:
        integration = found.get(slug)
        if integration is None:
            raise IntegrationUnavailable(
                f"integration {slug!r} is not configured: an admin must create it "
                "(Integrations > New) before this tool can run"
            )
        if not integration.enabled:
            raise IntegrationUnavailable(
                f"integration {slug!r} is disabled: an admin must enable it "
                "before this tool can run"
            )
        fields = fields_of(integration)
        if not fields:
            raise IntegrationUnavailable(
                f"integration {slug!r} has type {integration.type_slug!r}, which is not installed"
            )
        stored = {s.field: s for s in integration.secrets.all()}
        for spec in fields:
            if spec.secret:
                secret = stored.get(spec.name)
                if secret is None:
                    value = ""
                else:
                    try:
                        value = vault.decrypt(secret.ciphertext, what=f"secret {slug}.{spec.name}")
                    except vault.VaultError as exc:
                        raise IntegrationUnavailable(str(exc)) from None
            else:
                value = (integration.values or {}).get(spec.name) or spec.default
            if not value:
                if spec.required:
                    raise IntegrationUnavailable(
                        f"integration {slug!r} lacks required field {spec.name!r} "
                        f"({spec.env}): an admin must set it"
                    )
                continue
            if spec.env in owners:
                raise IntegrationUnavailable(
                    f"integrations {owners[spec.env]!r} and {slug!r} both set {spec.env}"
                )
            owners[spec.env] = slug
            env[spec.env] = value
            if spec.secret:
                labels[secret_label(slug, spec.name)] = value
    return env, labels


@dataclass(frozen=True)
class PreviewVariable:
    env: str
    field: str
    secret: bool
    is_set: bool


@dataclass(frozen=True)
class PreviewItem:
    slug: str
    state: str  # ok | missing | disabled | incomplete | unknown_type
    message: str
    variables: tuple[PreviewVariable, ...] = ()
    integration: Integration | None = None


def env_preview(tool_or_slugs: Tool | Iterable[str]) -> list[PreviewItem]:
    """For each integration a tool declares: the variable names it would receive (never
    values) and whether anything stops the run."""
    if isinstance(tool_or_slugs, Tool):
        tool = tool_or_slugs
        version = tool.published_version
        slugs = (version.manifest.get("integrations") if version else None) or tool.integrations
    else:
        slugs = list(tool_or_slugs)
    found = {
        i.slug: i for i in Integration.objects.filter(slug__in=slugs).prefetch_related("secrets")
    }
    items = []
    for slug in dict.fromkeys(slugs):
        integration = found.get(slug)
        if integration is None:
            items.append(
                PreviewItem(slug, "missing", "not configured: the tool gets none of its variables")
            )
            continue
        fields = fields_of(integration)
        if not fields:
            items.append(
                PreviewItem(
                    slug,
                    "unknown_type",
                    f"type {integration.type_slug!r} is not installed",
                    (),
                    integration,
                )
            )
            continue
        stored = {s.field for s in integration.secrets.all()}
        variables = tuple(
            PreviewVariable(
                env=f.env,
                field=f.name,
                secret=f.secret,
                is_set=(f.name in stored)
                if f.secret
                else bool((integration.values or {}).get(f.name) or f.default),
            )
            for f in fields
        )
        missing = [
            v.env for v, f in zip(variables, fields, strict=True) if f.required and not v.is_set
        ]
        if not integration.enabled:
            state, message = "disabled", "disabled: runs that need it fail"
        elif missing:
            state, message = "incomplete", "required but not set: " + ", ".join(missing)
        else:
            state, message = "ok", ""
        items.append(PreviewItem(slug, state, message, variables, integration))
    return items


# ----------------------------------------------------------------------------------------
# Connection test


@dataclass(frozen=True)
class TestOutcome:
    ok: bool
    message: str
    status: int | None = None
    excerpt: str = ""
    elapsed_ms: int | None = None
    available: bool = True  # False: the type has no test


@sensitive_variables()
def redact(text: str, secrets: Mapping[str, str]) -> str:
    """Replace every secret (and its usual encodings) with its label; longest first."""
    pairs: list[tuple[str, str]] = []
    for label, value in secrets.items():
        if not value:
            continue
        forms = {value, quote(value, safe=""), quote_plus(value), json.dumps(value)[1:-1]}
        pairs += [(form, label) for form in forms if form]
    for form, label in sorted(pairs, key=lambda p: -len(p[0])):
        text = text.replace(form, label)
    return text


def _fill(
    template: str, values: Mapping[str, str], kinds: Mapping[str, str], *, in_url: bool
) -> str:
    out = []
    for literal, name, _spec, _conv in string.Formatter().parse(template):
        out.append(literal)
        if name is None:
            continue
        value = values.get(name, "")
        if kinds.get(name) == "url":
            value = value.rstrip("/")
        elif in_url:
            value = quote(value, safe="")
        out.append(value)
    return "".join(out)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


@sensitive_variables()
def connection_test(
    itype: IntegrationType,
    *,
    actor: Actor,
    values: Mapping[str, str],
    secrets: Mapping[str, str],
    clear: Iterable[str] = (),
    integration: Integration | None = None,
    slug: str = "",
    transport: Any = None,
) -> TestOutcome:
    """Run the type's `test` request with the form's values, before saving.

    A typed secret is used; an empty secret field uses the stored one, but stored secrets
    are only ever sent to the saved URL's origin (changing the URL requires typing the
    secret again, so a write-only secret cannot be redirected to another server)."""
    slug = (integration.slug if integration else slug) or itype.slug
    outcome = _connection_test(itype, values, secrets, set(clear), integration, slug, transport)
    if outcome.available:
        record(
            actor,
            "integration.test",
            integration,
            summary=f"tested {slug} ({itype.slug}): "
            + ("ok" if outcome.ok else f"HTTP {outcome.status}" if outcome.status else "failed"),
            data={"type": itype.slug, "slug": slug, "ok": outcome.ok, "status": outcome.status},
        )
    return outcome


@sensitive_variables()
def _connection_test(
    itype: IntegrationType,
    values: Mapping[str, str],
    typed: Mapping[str, str],
    clear: set[str],
    integration: Integration | None,
    slug: str,
    transport: Any,
) -> TestOutcome:
    test = itype.test
    if test is None:
        return TestOutcome(
            False, f"The {itype.label} type has no connection test.", available=False
        )
    fields = itype.fields
    kinds = {f.name: f.kind for f in fields}
    secret_names = {f.name for f in fields if f.secret}
    filled: dict[str, str] = {}
    labels: dict[str, str] = {}
    used_stored: list[str] = []
    problems: list[str] = []
    stored = {s.field: s for s in integration.secrets.all()} if integration else {}
    for spec in fields:
        if spec.secret:
            value = _normalize_secret(typed.get(spec.name) or "")
            if value:
                if problem := secret_problem(value):
                    problems.append(f"{spec.display} {problem}")
                    continue
            elif spec.name in stored and spec.name not in clear:
                try:
                    value = vault.decrypt(
                        stored[spec.name].ciphertext, what=f"secret {slug}.{spec.name}"
                    )
                except vault.VaultError as exc:
                    return TestOutcome(False, str(exc))
                used_stored.append(spec.name)
            if value:
                labels[secret_label(slug, spec.name)] = value
        else:
            value = (values.get(spec.name) or "").strip() or spec.default
            if value and (problem := value_problem(spec.kind, value)):
                problems.append(f"{spec.display} {problem}")
                continue
        filled[spec.name] = value
    if problems:
        return TestOutcome(False, "Not tested: " + "; ".join(problems))
    needed = placeholders(test.url) + [f.name for f in fields if f.required]
    empty = list(dict.fromkeys(n for n in needed if not filled.get(n)))
    if empty:
        names = ", ".join(itype.field(n).display if itype.field(n) else n for n in empty)
        return TestOutcome(False, f"Not tested: fill in {names} first.")
    url = _fill(test.url, filled, kinds, in_url=True)
    if used_stored and integration is not None:
        saved = {**{f.name: f.default for f in fields}, **(integration.values or {})}
        saved_url = _fill(
            test.url, {**filled, **{k: v for k, v in saved.items() if v}}, kinds, in_url=True
        )
        if _origin(url) != _origin(saved_url):
            names = ", ".join(used_stored)
            return TestOutcome(
                False,
                f"Not tested: the stored {names} is only sent to the saved address. "
                "Type the secret again to test it against a new address.",
            )
    headers = {}
    for name, template in test.headers:
        used = placeholders(template)
        if used and not all(filled.get(n) for n in used):
            continue  # an optional credential that is not set: send no header
        headers[name] = _fill(template, filled, kinds, in_url=False)
    body = _fill(test.body, filled, kinds, in_url=False) if test.body else None
    try:
        result = http.request(
            test.method,
            url,
            headers=headers,
            content=body,
            timeout=TEST_TIMEOUT,
            max_body=16 * 1024,
            secret_headers=[
                name
                for name, template in test.headers
                if any(p in secret_names for p in placeholders(template))
            ],
            transport=transport,
            policy=egress_config.console_policy(integration),
        )
    except (http.HttpError, egress.PolicyError) as exc:
        return TestOutcome(False, redact(f"Request failed: {exc}", labels))
    excerpt = " ".join(redact(result.text(), labels).split())
    if len(excerpt) > EXCERPT_CHARS:
        excerpt = excerpt[:EXCERPT_CHARS] + "…"
    ok = result.status in test.expect if test.expect else result.ok
    elapsed_ms = int(result.elapsed * 1000)
    if ok:
        message = f"Connection works: HTTP {result.status} {result.reason} in {elapsed_ms} ms."
    else:
        expected = ", ".join(map(str, test.expect)) if test.expect else "2xx"
        message = (
            f"The provider answered HTTP {result.status} {result.reason} (expected {expected})."
        )
    return TestOutcome(ok, redact(message, labels), result.status, excerpt, elapsed_ms)


# ----------------------------------------------------------------------------------------
# Key rotation


@dataclass(frozen=True)
class RotationResult:
    rotated: int
    already_current: int
    runs: int = 0  # queued runs whose sealed sensitive inputs were re-encrypted too

    @property
    def total(self) -> int:
        return self.rotated + self.already_current


@sensitive_variables()
def rotate_keys(*, batch_size: int = 500, actor: Actor | None = None) -> RotationResult:
    """Re-encrypt every secret under the first key, in batches, each in a transaction.

    Rows already under the first key (by key_id) are skipped, so an interrupted rotation
    resumes where it stopped and a second run changes nothing. A secret no configured key
    decrypts stops the rotation with RotationError naming it; the rows before it in its
    batch are saved, it and everything after are left as they are."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    actor = actor or Actor.system()
    primary = vault.primary_key_id()
    already = IntegrationSecret.objects.filter(key_id=primary).count()
    rotated = 0
    last_pk = 0
    failure: tuple[int, str] | None = None
    while failure is None:
        with transaction.atomic():
            rows = list(
                IntegrationSecret.objects.select_for_update()
                .filter(pk__gt=last_pk)
                .exclude(key_id=primary)
                .order_by("pk")
                .only("pk", "integration_id", "field", "ciphertext", "key_id")[:batch_size]
            )
            if not rows:
                break
            done = []
            for row in rows:
                try:
                    row.ciphertext, row.key_id = vault.rotate(row.ciphertext)
                except vault.VaultError:
                    failure = (row.integration_id, row.field)
                    break
                done.append(row)
            if done:
                _write_ciphertexts(done)
            rotated += len(done)
            last_pk = rows[-1].pk
    runs = _rotate_sealed_runs() if failure is None else 0
    result = RotationResult(rotated=rotated, already_current=already, runs=runs)
    if failure is not None:
        integration_slug = (
            Integration.objects.filter(pk=failure[0]).values_list("slug", flat=True).first() or "?"
        )
        error = RotationError(
            integration_slug, failure[1], rotated, "no configured key can decrypt it"
        )
        record(
            actor,
            "integrations.rotate_keys",
            summary=f"re-encrypted {rotated} secrets, then stopped at "
            f"{integration_slug}.{failure[1]}: no configured key can decrypt it",
            data={"rotated": rotated, "failed": f"{integration_slug}.{failure[1]}"},
        )
        raise error
    record(
        actor,
        "integrations.rotate_keys",
        summary=f"re-encrypted {rotated} secrets under the first key ({already} already were)",
        data={"rotated": rotated, "already_current": already, "runs": runs},
    )
    return result


# The name the design notes use.
rotate = rotate_keys


def _write_ciphertexts(rows: list[IntegrationSecret]) -> None:
    """One parameterised UPDATE per row through executemany: much faster than
    bulk_update's CASE expressions, and the same on SQLite and PostgreSQL."""
    meta = IntegrationSecret._meta
    quote = connection.ops.quote_name
    table, pk = quote(meta.db_table), quote(meta.pk.column)
    ciphertext, key_id = (quote(meta.get_field(f).column) for f in ("ciphertext", "key_id"))
    # Identifiers come from the model and are quoted; values are parameters.
    sql = f"UPDATE {table} SET {ciphertext} = %s, {key_id} = %s WHERE {pk} = %s"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.executemany(sql, [(r.ciphertext, r.key_id, r.pk) for r in rows])


def _rotate_sealed_runs() -> int:
    """Queued runs keep their sensitive inputs encrypted until they start: re-encrypt
    those too, so removing the old key does not break them. A run whose inputs no key
    decrypts is left alone; it fails with a clear error when it starts."""
    from tools_app.models import Run

    count = 0
    pending = Run.objects.exclude(sealed_params="").values_list("pk", "sealed_params")
    for pk, sealed in pending.iterator():
        try:
            new, _kid = vault.rotate(sealed, what="a queued run's sensitive inputs")
        except vault.VaultError:
            continue
        # Only if unchanged meanwhile (the run may have started and cleared it).
        count += Run.objects.filter(pk=pk, sealed_params=sealed).update(sealed_params=new)
    return count


def readable_paths_for(slugs: Iterable[str]) -> list[Path]:
    """Host paths a tool declaring `slugs` may read: the values of the declared, enabled
    integrations' `path` fields (e.g. the e-mail database). The runner binds them
    read-only into the sandbox, which otherwise sees only the tool's own folder."""
    paths: list[Path] = []
    for integration in Integration.objects.enabled().filter(slug__in=list(slugs)):
        for spec in fields_of(integration):
            value = (integration.values or {}).get(spec.name) or spec.default
            if spec.kind == "path" and not spec.secret and value:
                paths.append(Path(value))
    return paths

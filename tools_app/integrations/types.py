"""Integration type files `seed/integrations/<slug>.yaml`: parsing and the registry
(the file format is described in the package docstring)."""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings

from tools_app.config_warnings import ConsoleWarning, Level, warning_source
from tools_app.integrations.errors import UnknownType
from tools_app.integrations.oauth_spec import OAuthSpec, check_oauth
from tools_app.integrations.validation import (
    EGRESS_MODES,
    FIELD_KEYS,
    FIELD_KINDS,
    FIELD_NAME_RE,
    MAX_FIELDS,
    MAX_LABEL,
    MAX_TYPE_FILE,
    MAX_URL,
    METHODS,
    TEST_KEYS,
    TYPE_KEYS,
    TYPE_SLUG_RE,
    env_problem,
    value_problem,
)
from tools_app.lib import strictyaml
from tools_app.lib.strictyaml import Problem


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
    oauth: OAuthSpec | None = None  # integrations/oauth_spec.py
    # A run granted an integration of this type reaches its URLs' hosts and nothing else
    # (`egress: confined`; egress/config.py).
    confines_egress: bool = False

    def field(self, name: str) -> FieldSpec | None:
        return next((f for f in self.fields if f.name == name), None)


@dataclass(frozen=True)
class TypeRegistry:
    types: dict[str, IntegrationType]
    problems: list[Problem]


_Map = strictyaml.Map
_Seq = strictyaml.Seq


def _unknown_keys(
    report: strictyaml.Report, m: _Map, allowed: tuple[str, ...], message: str, path: str = ""
) -> None:
    # Type files name an unknown key as written, where TOOL.md quotes odd ones (key_label).
    strictyaml.report_unknown_keys(report, m, allowed, message, path, label=str)


# Type files hold no dates: a timestamp-looking value is a tag error, not a datetime.
_SCALAR_TAGS = frozenset(strictyaml.SCALAR_TAGS - {strictyaml.TAG + "timestamp"})


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
    line = m.key_lines.get(key, m.line)
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
        c.error(m.key_lines.get(key, m.line), path, f"must be true or false, not {value!r}")
        return False
    return value


def _check_field(
    c: _Checker, item: Any, index: int, line: int, *, env_required: bool = True
) -> FieldSpec | None:
    path = f"fields[{index}]"
    if not isinstance(item, _Map):
        c.error(line, path, "must be a mapping with name, env, ...")
        return None
    _unknown_keys(c.error, item, FIELD_KEYS, "unknown key (allowed: {allowed})", path)
    name = _text(c, item, "name", f"{path}.name", required=True, limit=64)
    if name and not FIELD_NAME_RE.fullmatch(name):
        c.error(
            item.key_lines["name"],
            f"{path}.name",
            f"{name!r} does not match {FIELD_NAME_RE.pattern}",
        )
    # An OAuth type's fields configure the console; tools get only the access token.
    env = _text(c, item, "env", f"{path}.env", required=env_required, limit=128)
    if env and (problem := env_problem(env)):
        c.error(item.key_lines["env"], f"{path}.env", problem)
    kind = _text(c, item, "kind", f"{path}.kind", required=False) or "string"
    if kind not in FIELD_KINDS:
        c.error(
            item.key_lines["kind"],
            f"{path}.kind",
            f"{kind!r} is not one of {', '.join(FIELD_KINDS)}",
        )
    secret = _flag(c, item, "secret", f"{path}.secret")
    if secret and kind != "string":
        c.error(item.key_lines["kind"], f"{path}.kind", "secret fields must be of kind string")
    default = item.get("default")
    if default is not None and not isinstance(default, str):
        c.error(item.key_lines["default"], f"{path}.default", "must be a string")
        default = None
    if secret and default:
        c.error(item.key_lines["default"], f"{path}.default", "secret fields cannot have a default")
    if default and kind in FIELD_KINDS and not secret:
        problem = value_problem(kind, default)
        if problem:
            c.error(item.key_lines["default"], f"{path}.default", problem)
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
    line = m.key_lines["test"]
    if test is None:
        return None
    if not isinstance(test, _Map):
        c.error(line, "test", "must be a mapping with method, url, headers, expect")
        return None
    _unknown_keys(c.error, test, TEST_KEYS, "unknown key (allowed: {allowed})", "test")
    method = (_text(c, test, "method", "test.method", required=False) or "GET").upper()
    if method not in METHODS:
        c.error(
            test.key_lines["method"],
            "test.method",
            f"{method!r} is not one of {', '.join(METHODS)}",
        )
    url = _text(c, test, "url", "test.url", required=True, limit=MAX_URL)
    if url:
        _check_template(c, url, test.key_lines["url"], "test.url", fields)
        scheme = url.split(":", 1)[0].lower() if ":" in url.split("{", 1)[0] else ""
        starts_with_url_field = any(
            url.startswith("{" + f.name + "}") and f.kind == "url" for f in fields.values()
        )
        if scheme not in ("http", "https") and not starts_with_url_field:
            c.error(
                test.key_lines["url"],
                "test.url",
                "must start with http://, https:// or a {field} of kind url",
            )
    headers: list[tuple[str, str]] = []
    raw_headers = test.get("headers")
    if raw_headers is not None:
        if not isinstance(raw_headers, _Map):
            c.error(test.key_lines["headers"], "test.headers", "must be a mapping of name: value")
        else:
            for name, value in raw_headers.items():
                hline = raw_headers.key_lines[name]
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
        _check_template(c, body, test.key_lines["body"], "test.body", fields)
        if method != "POST":
            c.error(test.key_lines["body"], "test.body", "only a POST test can have a body")
    expect: list[int] = []
    raw_expect = test.get("expect")
    if raw_expect is not None:
        items = raw_expect if isinstance(raw_expect, list) else [raw_expect]
        for item in items:
            if isinstance(item, bool) or not isinstance(item, int) or not 100 <= item <= 599:
                c.error(test.key_lines["expect"], "test.expect", f"{item!r} is not an HTTP status")
            else:
                expect.append(item)
    return TestSpec(url=url, method=method, headers=tuple(headers), body=body, expect=tuple(expect))


def envs_of(fields: Mapping[str, FieldSpec]) -> set[str]:
    return {f.env for f in fields.values() if f.env}


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
    try:
        node = strictyaml.compose(text)
    except strictyaml.Refused as exc:
        c.error(exc.mark.line + 1, "yaml", exc.message)
        return None, c.problems
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        c.error(line, "yaml", getattr(exc, "problem", None) or str(exc).splitlines()[0])
        return None, c.problems
    except UnicodeError:
        c.error(1, "yaml", "the text is not valid Unicode")
        return None, c.problems
    reader = strictyaml.Reader(c.error, scalar_tags=_SCALAR_TAGS)
    data = reader.convert(node) if node is not None else None
    if c.failed:  # duplicate keys, tags, non-string keys: the file cannot be trusted further
        return None, c.problems
    if not isinstance(data, _Map):
        c.error(1, "file", "must be a YAML mapping with label, description and fields")
        return None, c.problems
    _unknown_keys(c.warning, data, TYPE_KEYS, "unknown key, ignored (known: {allowed})")
    label = _text(c, data, "label", "label", required=True, limit=MAX_LABEL)
    description = _text(c, data, "description", "description", required=True)
    custom = _flag(c, data, "custom", "custom")
    fields: dict[str, FieldSpec] = {}
    raw_fields = data.get("fields")
    if raw_fields is None or raw_fields == []:
        if not custom:
            c.error(
                data.key_lines.get("fields", data.line), "fields", "is required (a list of fields)"
            )
    elif not isinstance(raw_fields, _Seq):
        c.error(data.key_lines["fields"], "fields", "must be a list of fields")
    elif custom:
        c.error(
            data.key_lines["fields"], "fields", "a custom type has no fields: admins define them"
        )
    else:
        envs: dict[str, str] = {}
        for index, (item, line) in enumerate(zip(raw_fields, raw_fields.item_lines, strict=True)):
            spec = _check_field(c, item, index, line, env_required="oauth" not in data)
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
            c.error(data.key_lines["fields"], "fields", f"more than {MAX_FIELDS} fields")
    test = None
    if "test" in data:
        if custom:
            c.error(data.key_lines["test"], "test", "a custom type cannot have a test")
        else:
            test = _check_test(c, data, fields)
    oauth = None
    if "oauth" in data and custom:
        c.error(data.key_lines["oauth"], "oauth", "a custom type cannot use OAuth")
    elif "oauth" in data:
        kinds = {f.name: (f.kind, f.secret) for f in fields.values()}
        oauth = check_oauth(c.error, data, kinds)
        if oauth is not None and oauth.env in envs_of(fields):
            c.error(data.key_lines["oauth"], "oauth.env", f"{oauth.env} is also a field's env")
    confines = _check_egress(c, data, fields, oauth)
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
            oauth=oauth,
            confines_egress=confines,
        ),
        c.problems,
    )


def _check_egress(
    c: _Checker, m: _Map, fields: Mapping[str, FieldSpec], oauth: OAuthSpec | None
) -> bool:
    """`egress: confined`: the type's URLs are all its tools may reach, so it needs one
    (a non-secret url field, or an OAuth type's api_hosts); custom types have no say."""
    mode = _text(c, m, "egress", "egress", required=False) or "open"
    line = m.key_lines.get("egress", m.line)
    if mode not in EGRESS_MODES:
        c.error(line, "egress", f"{mode!r} is not one of {', '.join(EGRESS_MODES)}")
        return False
    if mode == "open":
        return False
    if m.get("custom") is True:
        c.error(line, "egress", "a custom type cannot confine egress: admins define its fields")
        return False
    urls = (
        oauth.api_hosts
        if oauth is not None
        else [f for f in fields.values() if f.kind == "url" and not f.secret]
    )
    if not urls:
        c.error(line, "egress", "confined needs a url field (or oauth.api_hosts) to allow")
        return False
    return True


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
def integration_type_warnings() -> list[ConsoleWarning]:
    return [
        ConsoleWarning(
            f"Integration type file: {p}", "An integration type file is invalid", Level.ERROR
        )
        for p in load_types().problems
        if p.severity == "error"
    ]

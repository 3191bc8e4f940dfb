"""cases.yaml: a tool's test cases (docs/cases.md), parsed and checked.

Parsing never raises: it returns every case that reads cleanly and every problem found,
each naming the file, the 1-based line and the key, like TOOL.md's (manifest/toolmd.py).
The YAML goes through the same strict reader (tools_app.lib.strictyaml): no anchors or
aliases, no custom tags, no duplicate keys, nesting capped.

What the file is checked against comes as arguments (the tool's inputs, its kind, the
names of its samples), never from a database: the caller read them from TOOL.md. With
`inputs=None` nothing of TOOL.md is known and only the file itself is checked.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

import jmespath
import jmespath.exceptions
import jmespath.functions
import jsonschema
import yaml

from tools_app.lib import strictyaml
from tools_app.lib.strictyaml import ERROR, INVALID, WARNING, Map, Problem, Refused, Seq, kind
from tools_app.manifest.inputs import InputSpec

if TYPE_CHECKING:  # cases_of() reads a manifest's inputs, kind and name only
    from tools_app.manifest.toolmd import Manifest

CASES_FILE = "cases.yaml"
MAX_CASES = 100
MAX_BYTES = 256 * 1024
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")

EXPECTATION_KINDS = (
    "is_error",
    "text",
    "contains",
    "not_contains",
    "regex",
    "json_equals",
    "json_subset",
    "jmespath",
    "schema",
    "duration_under",
    "artifact",
)
# The keys an expectation of each kind may carry beside its own.
OPTION_KEYS: dict[str, tuple[str, ...]] = {
    "json_equals": ("ignore",),
    "jmespath": ("op", "value"),
    "artifact": ("media_type",),
}
OPS = ("==", "!=", ">", ">=", "<", "<=", "contains", "matches")
TOP_KEYS = ("cases",)
CASE_KEYS = ("name", "description", "inputs", "sealed", "sample", "expect")

# An ignored path: keys joined by dots, `[*]` for every item of a list, `[n]` for one.
_PATH_PART_RE = re.compile(r"\.?([^.\[\]]+)|\[(\*|\d+)\]")
WILDCARD = "*"


def parse_path(path: str) -> list[str | int] | None:
    """`items[*].id` -> ["items", "*", "id"]; None when `path` is not such a path."""
    if not isinstance(path, str) or not path or path.startswith("."):
        return None
    parts: list[str | int] = []
    position = 0
    while position < len(path):
        match = _PATH_PART_RE.match(path, position)
        if match is None or (match.group(0).startswith(".") and not parts):
            return None
        key, index = match.groups()
        if key is not None:
            if position and not match.group(0).startswith("."):
                return None  # `a[0]b`: a key must follow a dot
            parts.append(key)
        else:
            parts.append(WILDCARD if index == "*" else int(index))
        position = match.end()
    return parts


@dataclass(frozen=True)
class Expectation:
    kind: str  # one of EXPECTATION_KINDS
    value: Any  # the kind's main value
    options: Mapping[str, Any] = field(default_factory=dict)  # ignore / op, value / media_type
    line: int = 0  # 1-based line in cases.yaml

    def to_yaml(self) -> dict[str, Any]:
        """Back to the file form: {kind: value, option: ...}."""
        return {self.kind: self.value, **self.options}


@dataclass(frozen=True)
class Case:
    name: str
    description: str = ""
    inputs: Mapping[str, Any] = field(default_factory=dict)
    sealed: Mapping[str, str] = field(default_factory=dict)  # input name -> vault token
    sample: str | None = None
    expect: tuple[Expectation, ...] = ()
    line: int = 0

    def to_yaml(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name}
        if self.description:
            data["description"] = self.description
        if self.inputs:
            data["inputs"] = dict(self.inputs)
        if self.sealed:
            data["sealed"] = dict(self.sealed)
        if self.sample:
            data["sample"] = self.sample
        data["expect"] = [e.to_yaml() for e in self.expect]
        return data


@dataclass(frozen=True)
class CasesResult(strictyaml.Checked):
    cases: tuple[Case, ...] = ()
    problems: list[Problem] = field(default_factory=list)

    def case(self, name: str) -> Case | None:
        return next((c for c in self.cases if c.name == name), None)


class _Problems:
    def __init__(self, path: str) -> None:
        self.path = path
        self.problems: list[Problem] = []

    def error(self, line: int, key: str, message: str) -> None:
        self.add(line, key, message, ERROR)

    def warning(self, line: int, key: str, message: str) -> None:
        self.add(line, key, message, WARNING)

    def add(self, line: int, key: str, message: str, severity: str) -> None:
        # One problem, one output line, whatever odd text the file held.
        self.problems.append(Problem(self.path, line, key, " ".join(message.split()), severity))

    def count(self) -> int:
        return sum(p.severity == ERROR for p in self.problems)


def _plain(p: _Problems, value: Any, line: int, key: str) -> Any:
    """A JSON value from what the reader gave (Map/Seq -> dict/list), or INVALID
    (reported): dates and non-finite numbers are no JSON."""
    if value is INVALID:
        return INVALID
    if isinstance(value, dict):
        lines = getattr(value, "value_lines", {})
        result = {}
        for k, v in value.items():
            item = _plain(p, v, lines.get(k, line), f"{key}.{strictyaml.key_label(k)}")
            if item is INVALID:
                return INVALID
            result[k] = item
        return result
    if isinstance(value, list):
        lines = getattr(value, "item_lines", [])
        items = []
        for i, v in enumerate(value):
            item = _plain(p, v, lines[i] if i < len(lines) else line, f"{key}[{i}]")
            if item is INVALID:
                return INVALID
            items.append(item)
        return items
    if isinstance(value, datetime | date):
        p.error(line, key, "is a date, which JSON has not: quote it to make it a string")
        return INVALID
    if isinstance(value, float) and not math.isfinite(value):
        p.error(line, key, f"{value} is not a JSON number")
        return INVALID
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _regex_problem(pattern: str) -> str | None:
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"is not a valid regular expression: {exc}"
    return None


def _jmespath_problem(expression: str) -> str | None:
    try:
        parsed = jmespath.compile(expression).parsed
    except jmespath.exceptions.LexerError as exc:
        return f"is not a valid JMESPath expression: {exc.message} at position {exc.lex_position}"
    except jmespath.exceptions.IncompleteExpressionError:
        return "is not a valid JMESPath expression: it ends too early"
    except jmespath.exceptions.ParseError as exc:
        return (
            f"is not a valid JMESPath expression: unexpected {exc.token_value!r} at position "
            f"{exc.lex_position}"
        )
    except Exception as exc:  # jmespath raises more than its own errors on odd input
        return f"is not a valid JMESPath expression: {type(exc).__name__}"
    unknown = sorted(_functions(parsed) - set(_JMESPATH_FUNCTIONS))
    if unknown:
        return f"calls an unknown JMESPath function: {', '.join(unknown)}()"
    return None


_JMESPATH_FUNCTIONS = jmespath.functions.Functions.FUNCTION_TABLE


def _functions(node: Any) -> set[str]:
    """The names of the functions an expression's tree calls."""
    names: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("type") == "function_expression" and isinstance(item.get("value"), str):
                names.add(item["value"])
            stack.extend(item.get("children") or ())
        elif isinstance(item, list):
            stack.extend(item)
    return names


def _remote_ref(schema: Any) -> str | None:
    """The first `$ref` that points outside the schema (nothing is ever fetched)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and not ref.startswith("#"):
                return ref
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None


def schema_problem(schema: Any) -> str | None:
    """Why `schema` is no usable JSON Schema (draft 2020-12), or None."""
    if not isinstance(schema, dict | bool):
        return f"must be a JSON Schema (a mapping), got {kind(schema)}"
    if (ref := _remote_ref(schema)) is not None:
        return f"$ref {ref!r} points outside the schema; only local refs (#/...) are read"
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(part) for part in exc.path)
        return f"is not a valid JSON Schema: {exc.message}" + (f" (at {where})" if where else "")
    except Exception as exc:  # a pathological schema the checker itself trips on
        return f"is not a usable JSON Schema: {type(exc).__name__}"
    return None


def _string(p: _Problems, value: Any, line: int, key: str, *, empty: bool = True) -> bool:
    if not isinstance(value, str):
        hint = " (quote it)" if _is_number(value) or isinstance(value, bool) else ""
        p.error(line, key, f"must be a string{hint}, got {kind(value)}")
        return False
    if not empty and not value:
        p.error(line, key, "must not be empty")
        return False
    return True


def _expectation(p: _Problems, item: Any, line: int, key: str) -> Expectation | None:
    if item is INVALID:
        return None
    if not isinstance(item, Map):
        p.error(line, key, f"must be a mapping like {{contains: some text}}, got {kind(item)}")
        return None
    kinds = [k for k in item if k in EXPECTATION_KINDS]
    if not kinds:
        p.error(line, key, f"names no expectation: give one of {', '.join(EXPECTATION_KINDS)}")
        return None
    if len(kinds) > 1:
        p.error(line, key, f"holds {' and '.join(kinds)}: give each expectation its own item")
        return None
    what = kinds[0]
    allowed = OPTION_KEYS.get(what, ())
    before = p.count()
    for k in item:
        if k != what and k not in allowed:
            hint = f" (allowed: {', '.join(allowed)})" if allowed else ""
            label = strictyaml.key_label(k)
            p.error(item.key_lines[k], f"{key}.{label}", f"unknown key for {what}{hint}")
    value_line = item.value_lines[what]
    here = f"{key}.{what}"
    value = _plain(p, item[what], value_line, here)
    if value is INVALID:
        return None
    options: dict[str, Any] = {}
    if what == "is_error":
        if not isinstance(value, bool):
            p.error(value_line, here, f"must be true or false, got {kind(value)}")
    elif what in ("text", "contains", "not_contains"):
        _string(p, value, value_line, here, empty=what == "text")
    elif what == "regex":
        if _string(p, value, value_line, here, empty=False) and (why := _regex_problem(value)):
            p.error(value_line, here, why)
    elif what == "json_equals":
        if "ignore" in item:
            ignore = _ignore(p, item, f"{key}.ignore")
            if ignore is not None:
                options["ignore"] = ignore
    elif what == "json_subset":
        if not isinstance(value, dict | list):
            p.error(value_line, here, f"must be a mapping or a list, got {kind(value)}")
    elif what == "jmespath":
        if _string(p, value, value_line, here, empty=False) and (why := _jmespath_problem(value)):
            p.error(value_line, here, why)
        options = _jmespath_options(p, item, key, line)
    elif what == "schema":
        if (why := schema_problem(value)) is not None:
            p.error(value_line, here, why)
    elif what == "duration_under":
        if not _is_number(value) or value <= 0:
            p.error(value_line, here, f"must be a number of seconds above 0, got {kind(value)}")
    elif what == "artifact":
        _string(p, value, value_line, here, empty=False)
        if "media_type" in item:
            media_line = item.value_lines["media_type"]
            media = item["media_type"]
            if media is not INVALID and _string(
                p, media, media_line, f"{key}.media_type", empty=False
            ):
                options["media_type"] = media
    if p.count() > before:
        return None
    return Expectation(what, value, options, line)


def _ignore(p: _Problems, item: Map, key: str) -> list[str] | None:
    raw = item["ignore"]
    line = item.value_lines["ignore"]
    if raw is INVALID:
        return None
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list):
        p.error(
            line, key, f"must be a list of paths like [fetched_at, 'items[*].id'], got {kind(raw)}"
        )
        return None
    paths = []
    for i, path in enumerate(raw):
        where = f"{key}[{i}]"
        item_line = raw.item_lines[i] if isinstance(raw, Seq) else line
        if path is INVALID:
            return None
        if not isinstance(path, str) or parse_path(path) is None:
            p.error(
                item_line, where, f"{strictyaml.show(path)} is not a path like a.b or items[*].id"
            )
            return None
        paths.append(path)
    return paths


def _jmespath_options(p: _Problems, item: Map, key: str, line: int) -> dict[str, Any]:
    op = item.get("op", "==")
    op_line = item.value_lines.get("op", line)
    if op is INVALID:
        return {}
    if op is None:
        op = "=="
    if not isinstance(op, str) or op not in OPS:
        p.error(op_line, f"{key}.op", f"{strictyaml.show(op)} is not one of {' '.join(OPS)}")
        return {}
    if "value" not in item:
        p.error(
            line, f"{key}.value", "is required: the value the expression's result is compared with"
        )
        return {}
    value_line = item.value_lines["value"]
    value = _plain(p, item["value"], value_line, f"{key}.value")
    if value is INVALID:
        return {}
    if op == "matches":
        if _string(p, value, value_line, f"{key}.value", empty=False) and (
            why := _regex_problem(value)
        ):
            p.error(value_line, f"{key}.value", why)
    elif op in (">", ">=", "<", "<=") and not (_is_number(value) or isinstance(value, str)):
        p.error(value_line, f"{key}.value", f"{op} compares numbers or strings, got {kind(value)}")
    return {"op": op, "value": value}


def _inputs(p: _Problems, c: Map, key: str, name: str) -> dict[str, Any] | None:
    raw = c.get(name)
    if raw is None:
        return {}
    line = c.value_lines[name]
    if raw is INVALID:
        return None
    if not isinstance(raw, Map):
        p.error(
            line, f"{key}.{name}", f"must be a mapping of input names to values, got {kind(raw)}"
        )
        return None
    value = _plain(p, raw, line, f"{key}.{name}")
    return None if value is INVALID else value


def _check_inputs(
    p: _Problems,
    c: Map,
    key: str,
    inputs: dict[str, Any],
    sealed: dict[str, Any],
    specs: Mapping[str, InputSpec],
) -> None:
    declared = ", ".join(specs) if specs else "none"
    for group, values in (("inputs", inputs), ("sealed", sealed)):
        lines = c[group].key_lines if isinstance(c.get(group), Map) else {}
        for input_name in values:
            line = lines.get(input_name, c.line)
            where = f"{key}.{group}.{strictyaml.key_label(input_name)}"
            spec = specs.get(input_name)
            if spec is None:
                p.error(line, where, f"unknown input {input_name!r} (TOOL.md's inputs: {declared})")
            elif group == "inputs" and spec.sensitive:
                p.error(
                    line,
                    where,
                    f"{input_name!r} is a sensitive input: it must be sealed, never written in "
                    "plain (the console seals it when it saves a case)",
                )
            elif group == "sealed" and not spec.sensitive:
                p.warning(line, where, f"{input_name!r} is not sensitive: give it under inputs")
            if group == "sealed" and input_name in inputs:
                p.error(line, where, f"{input_name!r} is given under inputs too")
    for spec in specs.values():
        given = spec.name in inputs or spec.name in sealed
        if not (given or spec.optional or spec.has_default or spec.visibility == "hidden"):
            p.warning(
                c.line,
                f"{key}.inputs",
                f"input {spec.name!r} is required by TOOL.md: the case's run will be refused",
            )


def _case(
    p: _Problems,
    c: Any,
    line: int,
    key: str,
    *,
    inputs: Mapping[str, InputSpec] | None,
    tool_kind: str,
    samples: Collection[str],
) -> Case | None:
    if c is INVALID:
        return None
    if not isinstance(c, Map):
        p.error(line, key, f"must be a mapping with name, inputs and expect, got {kind(c)}")
        return None
    before = p.count()
    strictyaml.report_unknown_keys(
        p.error, c, CASE_KEYS, "unknown key {key!r} (allowed: {allowed})", key
    )
    name = c.get("name")
    if name is None:
        p.error(c.line, f"{key}.name", "is required")
    elif name is not INVALID:
        name_line = c.value_lines["name"]
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            p.error(
                name_line,
                f"{key}.name",
                f"{strictyaml.show(name)} is not a case name: lowercase letters, digits, _ and -, "
                "at most 64 characters",
            )
    description = c.get("description")
    if description is None:
        description = ""
    elif description is not INVALID and not isinstance(description, str):
        p.error(
            c.value_lines["description"],
            f"{key}.description",
            f"must be a string, got {kind(description)}",
        )
    case_inputs = _inputs(p, c, key, "inputs")
    sealed = _inputs(p, c, key, "sealed")
    if sealed:
        for input_name, token in sealed.items():
            if not isinstance(token, str) or not token:
                p.error(
                    c["sealed"].value_lines[input_name],
                    f"{key}.sealed.{strictyaml.key_label(input_name)}",
                    "must be the vault token the console wrote when it sealed the value",
                )
    if inputs is not None and case_inputs is not None and sealed is not None:
        _check_inputs(p, c, key, case_inputs, sealed, inputs)
    sample = c.get("sample")
    if sample is not None and sample is not INVALID:
        sample_line = c.value_lines["sample"]
        if not isinstance(sample, str) or not sample:
            p.error(sample_line, f"{key}.sample", f"must be a sample's name, got {kind(sample)}")
        elif inputs is not None and tool_kind != "http":
            p.error(
                sample_line,
                f"{key}.sample",
                "is only for kind: http tools (the case replays offline against "
                "samples/<name>.json)",
            )
        elif inputs is not None and sample not in samples:
            known = ", ".join(sorted(samples)) or "none"
            p.error(
                sample_line,
                f"{key}.sample",
                f"no samples/{sample}.json in the tool (samples: {known})",
            )
    expect: list[Expectation] = []
    raw = c.get("expect")
    if raw is None:
        p.warning(c.line, f"{key}.expect", "the case expects nothing: it errors when it runs")
    elif raw is not INVALID:
        if not isinstance(raw, Seq):
            p.error(
                c.value_lines["expect"],
                f"{key}.expect",
                f"must be a list of expectations, got {kind(raw)}",
            )
        else:
            if not raw:
                p.warning(
                    c.value_lines["expect"],
                    f"{key}.expect",
                    "the case expects nothing: it errors when it runs",
                )
            for i, (item, item_line) in enumerate(zip(raw, raw.item_lines, strict=True)):
                expectation = _expectation(p, item, item_line, f"{key}.expect[{i}]")
                if expectation is not None:
                    expect.append(expectation)
    if p.count() > before or name is INVALID or case_inputs is None or sealed is None:
        return None
    return Case(
        name=name,
        description=description.strip() if isinstance(description, str) else "",
        inputs=case_inputs,
        sealed=sealed,
        sample=sample if isinstance(sample, str) else None,
        expect=tuple(expect),
        line=line,
    )


def parse_cases(
    data: bytes | str,
    path: str = CASES_FILE,
    *,
    inputs: Mapping[str, InputSpec] | None = None,
    kind: str = "code",
    samples: Collection[str] = (),
) -> CasesResult:
    """Parse and check a cases.yaml; never raises on any input.

    `inputs`, `kind` and `samples` (sample names without `samples/` and `.json`) are the
    tool's, from TOOL.md; with `inputs=None` only the file itself is checked."""
    p = _Problems(path)
    try:
        cases = _parse(p, data, inputs, kind, samples)
    except RecursionError:  # belt and braces: the reader's depth cap should prevent it
        p.error(1, "file", "YAML nested too deeply")
        cases = []
    except Exception as exc:  # parsing promises never to raise; say what went wrong instead
        p.error(1, "file", f"cannot be read: {type(exc).__name__}")
        cases = []
    return CasesResult(tuple(cases), p.problems)


def _parse(
    p: _Problems,
    data: bytes | str,
    inputs: Mapping[str, InputSpec] | None,
    tool_kind: str,
    samples: Collection[str],
) -> list[Case]:
    size = len(data) if isinstance(data, bytes) else len(data.encode("utf-8", "surrogatepass"))
    if size > MAX_BYTES:
        p.error(1, "file", f"is {size} bytes; a cases.yaml may have at most {MAX_BYTES}")
        return []
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            p.error(
                line, "file", f"is not valid UTF-8 (byte {data[exc.start]:#04x} at {exc.start})"
            )
            return []
    else:
        text = data
    text = text.removeprefix("\ufeff")
    try:
        root = strictyaml.compose(text)
    except Refused as exc:
        p.error(exc.mark.line + 1, "yaml", exc.message)
        return []
    except yaml.YAMLError as exc:
        p.error(strictyaml.error_line(exc, text), "yaml", strictyaml.error_message(exc))
        return []
    except UnicodeError:
        p.error(1, "yaml", "YAML syntax error: the text is not valid Unicode")
        return []
    if root is None:
        return []
    reader = strictyaml.Reader(p.error, first_line=1, root_key="yaml")
    value = reader.convert(root)
    if value is INVALID:
        return []
    if not isinstance(value, Map):
        p.error(1, "yaml", f"must be a mapping with the key cases, got {kind(value)}")
        return []
    for key in value:
        if key not in TOP_KEYS:
            label = strictyaml.key_label(key)
            p.warning(value.key_lines[key], label, f"unknown key {key!r} is ignored")
    raw = value.get("cases")
    if raw is None or raw is INVALID:
        return []
    if not isinstance(raw, Seq):
        p.error(value.value_lines["cases"], "cases", f"must be a list of cases, got {kind(raw)}")
        return []
    if len(raw) > MAX_CASES:
        line = raw.item_lines[MAX_CASES]
        p.error(line, "cases", f"{len(raw)} cases; a tool may have at most {MAX_CASES}")
        return []
    cases: list[Case] = []
    first_line: dict[str, int] = {}
    for i, (item, line) in enumerate(zip(raw, raw.item_lines, strict=True)):
        key = f"cases[{i}]"
        case = _case(p, item, line, key, inputs=inputs, tool_kind=tool_kind, samples=samples)
        name = item.get("name") if isinstance(item, Map) else None
        if isinstance(name, str):
            if name in first_line:
                name_line = item.value_lines["name"]
                p.error(
                    name_line,
                    f"{key}.name",
                    f"duplicate case name {name!r} (first on line {first_line[name]})",
                )
                continue
            first_line[name] = line
        if case is not None:
            cases.append(case)
    return cases


def sample_names(files: Collection[str]) -> list[str]:
    """The names `sample:` may take: samples/<name>.json of the tool folder."""
    return sorted(
        name.removeprefix("samples/").removesuffix(".json")
        for name in files
        if name.startswith("samples/") and name.endswith(".json") and name.count("/") == 1
    )


def cases_of(files: Mapping[str, bytes], manifest: Manifest, folder: str = "") -> CasesResult:
    """The cases of a tool folder {path: bytes} whose TOOL.md gave `manifest`; an empty
    result when it has no cases.yaml. Problems name `<folder or tool name>/cases.yaml`."""
    if CASES_FILE not in files:
        return CasesResult()
    path = f"{folder or manifest.name}/{CASES_FILE}"
    return parse_cases(
        files[CASES_FILE],
        path,
        inputs=manifest.inputs,
        kind=manifest.kind,
        samples=sample_names(files),
    )

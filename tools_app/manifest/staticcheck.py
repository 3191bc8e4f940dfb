"""Static checks over a tool's files: likely mistakes that are warnings, never errors.

- environment variables the code reads that no declared integration provides (the runner
  injects only the declared integrations' variables, so such a read finds nothing);
- network use (fetch, http modules, sockets, curl, wget...) in a tool with `network: false`
  (the sandbox has no network, so it fails at run time);
- inputs declared in TOOL.md that the code never reads;
- a TOOL.md body without the sections the seed tools use (Authentication, Usage, Examples,
  Errors, Notes), which agents and people rely on.

These are text heuristics (regular expressions over code with comments blanked), tuned to
avoid false alarms rather than to catch everything. They run on every save and live in the
editor, and `python manage.py check --tag tools` (tools_app/checks.py) runs them over every
tool's latest version.

Like the TOOL.md parser, they read no settings and no database: which variables the declared
integrations provide comes in as an `IntegrationEnv`, which
tools_app/integrations/environment.py builds."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tools_app.lib.strictyaml import WARNING, Problem
from tools_app.manifest.toolmd import Manifest

# What the seed tools' bodies have (`## Authentication` ...). A heading counts when it
# starts with the word: "## Error handling" is the Errors section.
SECTIONS = ("Authentication", "Usage", "Examples", "Errors", "Notes")
_SECTION_PREFIXES = {"Authentication": "auth", "Examples": "example", "Errors": "error"}

# Variables every run has (docs/runs.md, "Isolation"): the runner's fixed minimal environment.
RUNTIME_ENV = frozenset(
    {
        "TOOL_CALL_ID",
        "TOOL_OUTPUT_DIR",
        "PATH",
        "HOME",
        "TMPDIR",
        "TMP",
        "TEMP",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "TZ",
        "PWD",
        "USER",
        "LOGNAME",
        "SHELL",
        "TERM",
        "NODE_ENV",
        "NODE_OPTIONS",
        "PYTHONPATH",
        "PYTHONIOENCODING",
        "PYTHONUNBUFFERED",
    }
)
# Bash's own variables: never from the environment the runner sets.
BASH_VARIABLES = frozenset(
    {
        "BASH",
        "BASHPID",
        "BASH_SOURCE",
        "BASH_LINENO",
        "BASH_REMATCH",
        "BASH_VERSION",
        "BASH_ARGV",
        "BASH_ARGC",
        "BASH_COMMAND",
        "BASH_SUBSHELL",
        "EUID",
        "UID",
        "GROUPS",
        "HOSTNAME",
        "HOSTTYPE",
        "IFS",
        "LINENO",
        "FUNCNAME",
        "OLDPWD",
        "OPTARG",
        "OPTIND",
        "OSTYPE",
        "PIPESTATUS",
        "PPID",
        "RANDOM",
        "REPLY",
        "SECONDS",
        "SHLVL",
        "EPOCHSECONDS",
        "EPOCHREALTIME",
        "SRANDOM",
        "COLUMNS",
        "LINES",
    }
)

CODE_SUFFIXES = {
    "typescript": (".ts", ".mts", ".cts", ".js", ".mjs", ".cjs"),
    "javascript": (".js", ".mjs", ".cjs"),
    "python": (".py",),
    "bash": (".sh", ".bash"),
}

_JS_ENV = [
    re.compile(r"\bprocess\.env\.([A-Za-z_][A-Za-z0-9_]*)"),
    re.compile(r"\bprocess\.env\[\s*['\"`]([A-Za-z_][A-Za-z0-9_]*)['\"`]\s*\]"),
    re.compile(r"\bDeno\.env\.get\(\s*['\"]([A-Za-z_][A-Za-z0-9_]*)['\"]"),
]
_JS_ENV_DESTRUCTURE = re.compile(r"\{([^{}]*)\}\s*=\s*process\.env\b")
_PY_ENV = [
    re.compile(r"\bos\.environ\[\s*['\"]([A-Za-z_][A-Za-z0-9_]*)['\"]\s*\]"),
    re.compile(r"\b(?:os\.)?environ\.get\(\s*['\"]([A-Za-z_][A-Za-z0-9_]*)['\"]"),
    re.compile(r"\b(?:os\.)?getenv\(\s*['\"]([A-Za-z_][A-Za-z0-9_]*)['\"]"),
]
# $NAME and ${NAME...}: only upper-case names; lower-case ones are the script's own.
_SH_ENV = re.compile(r"\$\{?#?!?([A-Z_][A-Z0-9_]*)")
_SH_ASSIGNED = [
    re.compile(
        r"(?:^|[\s;&|(])(?:export\s+|local\s+|declare\s+(?:-\w+\s+)*|readonly\s+)?"
        r"([A-Za-z_][A-Za-z0-9_]*)(?:\[[^\]]*\])?\+?=",
        re.M,
    ),
    # `read -r key value`: every word after `read` (option values too; harmless here).
    re.compile(r"\b(?:read|mapfile|readarray)\b([^;&|<>\n]*)"),
    re.compile(r"\bfor\s+([A-Za-z_][A-Za-z0-9_]*)\s+in\b"),
    re.compile(
        r"\b(?:local|declare|typeset|export|readonly)\s+(?:-\w+\s+)*([A-Za-z_][A-Za-z0-9_ ]*)"
    ),
]

_NETWORK = {
    "js": [
        (re.compile(r"(?<![\w.])fetch\s*\("), "fetch()", "code"),
        (
            re.compile(
                r"""(?:require\(\s*|from\s+|import\s*\(\s*|import\s+)['"](?:node:)?"""
                r"""(http|https|http2|net|tls|dgram|dns|undici|axios|node-fetch|ws)['"]"""
            ),
            "the {0} module",
            "text",
        ),
        (re.compile(r"\bnew\s+(WebSocket|XMLHttpRequest|EventSource)\b"), "{0}", "code"),
    ],
    "python": [
        (
            re.compile(
                r"^\s*(?:import|from)\s+(urllib\.request|urllib3|http\.client|socket|ssl|requests"
                r"|httpx|aiohttp|ftplib|smtplib|imaplib|poplib|telnetlib|websockets?)\b",
                re.M,
            ),
            "the {0} module",
            "code",
        ),
        (
            re.compile(r"\bfrom\s+urllib\s+import\s+[^\n]*\brequest\b"),
            "urllib.request",
            "code",
        ),
        (re.compile(r"\burlopen\s*\("), "urlopen()", "code"),
    ],
    "bash": [
        (
            re.compile(
                r"(?:^|[\s;&|(`]|\$\()(curl|wget|nc|ncat|netcat|ssh|scp|sftp|rsync|telnet|ftp"
                r"|dig|nslookup|ping)(?=\s|$)",
                re.M,
            ),
            "{0}",
            "code",
        ),
        (re.compile(r"/dev/(?:tcp|udp)/"), "/dev/tcp", "code"),
    ],
}


@dataclass(frozen=True)
class Source:
    path: str
    kind: str  # js | python | bash
    text: str  # comments blanked out, line structure kept
    code: str  # comments and string contents blanked (bash: single-quoted strings only)


@dataclass(frozen=True)
class IntegrationEnv:
    """What the console knows of a tool's declared integrations: the environment variables
    they provide, and the slugs whose variables are unknown (in declaration order)."""

    provided: frozenset[str] = frozenset()
    unknown: tuple[str, ...] = ()


# A tool that declares no integration: nothing to look up.
NO_INTEGRATIONS = IntegrationEnv()


def check_tool(
    name: str, files: Mapping[str, bytes], manifest: Manifest, *, env: IntegrationEnv
) -> list[Problem]:
    """Every static-check warning for one valid tool (its manifest already parsed); `env`
    describes the integrations the manifest declares."""
    sources = list(_sources(files, manifest.language))
    toolmd_path = f"{name}/TOOL.md"
    problems: list[Problem] = []
    problems += _env_problems(name, sources, manifest, toolmd_path, env)
    if not manifest.network:
        problems += _network_problems(name, sources)
    problems += _unread_inputs(sources, manifest, toolmd_path, files)
    problems += _missing_sections(files, manifest, toolmd_path)
    return problems


# --- Source files -------------------------------------------------------------------------


def _sources(files: Mapping[str, bytes], language: str) -> Iterable[Source]:
    kind = {"typescript": "js", "javascript": "js"}.get(language, language)
    for path in sorted(files):
        if not path.endswith(CODE_SUFFIXES[language]):
            continue
        try:
            raw = files[path].decode("utf-8-sig")
        except UnicodeDecodeError:
            continue
        text = _blank_comments(raw, kind)
        code = _bash_code(text) if kind == "bash" else _blank_comments(raw, kind, strings=True)
        yield Source(path, kind, text, code)


def _blank_comments(text: str, kind: str, strings: bool = False) -> str:
    """Replace comments (and with `strings`, the insides of string literals) with spaces,
    keeping newlines so that offsets keep their lines.

    Strings are always recognised, so that `#` or `//` inside one is not taken for a
    comment; they are kept unless `strings` is set."""
    if kind == "js":
        pattern = (
            r"""//[^\n]*|/\*.*?\*/|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"|`(?:\\.|[^`\\])*`"""
        )
    elif kind == "python":
        pattern = r"""#[^\n]*|'''.*?'''|\"\"\".*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*\""""
    else:  # bash: a # that starts a word begins a comment
        pattern = r"""(?:(?<=\s)|^)#[^\n]*|'[^']*'|"(?:\\.|[^"\\])*\""""

    def blank(match: re.Match[str]) -> str:
        token = match.group()
        if token.startswith(("#", "//", "/*")):
            return re.sub(r"[^\n]", " ", token)
        if strings:
            quote = 3 if token[:3] in ("'''", '"""') else 1
            return token[:quote] + re.sub(r"[^\n]", " ", token[quote:-quote]) + token[-quote:]
        return token

    return re.sub(pattern, blank, text, flags=re.S | re.M)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


# --- Environment variables ----------------------------------------------------------------


def _env_reads(source: Source) -> dict[str, int]:
    """{variable: first line} the source reads from the environment."""
    found: dict[str, int] = {}

    def add(var: str, offset: int) -> None:
        found.setdefault(var, _line_of(source.text, offset))

    if source.kind == "js":
        for pattern in _JS_ENV:
            for m in pattern.finditer(source.text):
                add(m.group(1), m.start())
        for m in _JS_ENV_DESTRUCTURE.finditer(source.text):
            for part in m.group(1).split(","):
                var = part.split(":")[0].split("=")[0].strip()
                if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
                    add(var, m.start())
    elif source.kind == "python":
        for pattern in _PY_ENV:
            for m in pattern.finditer(source.text):
                add(m.group(1), m.start())
    else:
        code = source.code
        assigned = _bash_assigned(code)
        for m in _SH_ENV.finditer(code):
            var = m.group(1)
            if var not in assigned and var not in BASH_VARIABLES:
                add(var, m.start())
    return found


def _bash_code(text: str) -> str:
    """Bash with single-quoted strings blanked: '$X' is not an expansion."""
    return re.sub(r"'[^'\n]*'", lambda m: " " * len(m.group()), text)


def _bash_assigned(code: str) -> set[str]:
    names: set[str] = set()
    for pattern in _SH_ASSIGNED:
        for m in pattern.finditer(code):
            names.update(re.findall(r"(?<![-\w])[A-Za-z_][A-Za-z0-9_]*", m.group(1)))
    return names


def _env_problems(
    name: str, sources: list[Source], manifest: Manifest, toolmd_path: str, env: IntegrationEnv
) -> list[Problem]:
    provided, unknown = env.provided, env.unknown
    problems = [
        Problem(
            toolmd_path,
            1,
            "integrations",
            f"integration {slug!r} is not a known integration type, so the environment "
            "variables it provides cannot be checked",
            WARNING,
        )
        for slug in unknown
    ]
    if unknown:
        return problems  # any variable might come from the unknown integration
    inputs = {f"INPUT_{key.upper()}" for key in manifest.inputs}
    declared = ", ".join(manifest.integrations) or "none"
    for source in sources:
        for var, line in _env_reads(source).items():
            if var in RUNTIME_ENV or var in provided or var in inputs:
                continue
            if var.startswith("INPUT_") and source.kind == "bash":
                message = (
                    f"reads ${var}, but TOOL.md declares no input "
                    f"{var.removeprefix('INPUT_').lower()!r}"
                )
            else:
                message = (
                    f"reads environment variable {var}, which no declared integration "
                    f"provides (integrations: {declared}); the runner will not set it"
                )
            problems.append(Problem(f"{name}/{source.path}", line, "env", message, WARNING))
    return problems


# --- Network ------------------------------------------------------------------------------


def _network_problems(name: str, sources: list[Source]) -> list[Problem]:
    problems = []
    for source in sources:
        for pattern, what, where in _NETWORK[source.kind]:
            # Calls are looked for outside strings; module names are strings themselves.
            text = source.code if where == "code" else source.text
            match = pattern.search(text)
            if match is None:
                continue
            used = what.format(match.group(match.lastindex or 0)) if match.lastindex else what
            problems.append(
                Problem(
                    f"{name}/{source.path}",
                    _line_of(text, match.start()),
                    "network",
                    f"uses the network ({used}) but TOOL.md says network: false; "
                    "the sandbox has no network, so this fails at run time",
                    WARNING,
                )
            )
            break  # one warning per file is enough
    return problems


# --- Inputs -------------------------------------------------------------------------------


def _unread_inputs(
    sources: list[Source], manifest: Manifest, toolmd_path: str, files: Mapping[str, bytes]
) -> list[Problem]:
    if not sources:
        return []
    problems = []
    lines = _input_lines(files)
    for input_name in manifest.inputs:
        # Lenient on purpose: the name anywhere in the code (params.x, params["x"], a
        # destructuring, jq's .x, INPUT_X) counts as reading it.
        words = [re.compile(rf"(?<![A-Za-z0-9_]){re.escape(input_name)}(?![A-Za-z0-9_])")]
        words.append(re.compile(rf"\bINPUT_{re.escape(input_name.upper())}\b"))
        if any(w.search(s.text) for s in sources for w in words):
            continue
        problems.append(
            Problem(
                toolmd_path,
                lines.get(input_name, 1),
                f"inputs.{input_name}",
                f"input {input_name!r} is declared but the code never reads it",
                WARNING,
            )
        )
    return problems


def _input_lines(files: Mapping[str, bytes]) -> dict[str, int]:
    """The TOOL.md line of each input's key (first occurrence under `inputs:`)."""
    try:
        text = files["TOOL.md"].decode("utf-8-sig")
    except (KeyError, UnicodeDecodeError):
        return {}
    lines: dict[str, int] = {}
    in_inputs = False
    for number, line in enumerate(text.splitlines(), start=1):
        if re.match(r"inputs\s*:", line):
            in_inputs = True
            continue
        if in_inputs and re.match(r"\S", line):
            if line.startswith("---"):
                break
            in_inputs = False
            continue
        match = re.match(r"\s+([a-z_][a-z0-9_]*)\s*:", line) if in_inputs else None
        if match:
            lines.setdefault(match.group(1), number)
    return lines


# --- TOOL.md body sections ----------------------------------------------------------------


def body_sections(body: str) -> list[tuple[int, str]]:
    """(line offset in the body, heading text) of the level-2 headings outside code."""
    headings = []
    fence: str | None = None
    for offset, line in enumerate(body.splitlines()):
        stripped = line.strip()
        marker = re.match(r"(`{3,}|~{3,})", stripped)
        if marker:
            if fence is None:
                fence = marker.group(1)[0] * len(marker.group(1))
            elif stripped.startswith(fence):
                fence = None
            continue
        if fence is None:
            match = re.match(r"##\s+(.+?)\s*#*\s*$", line)
            if match:
                headings.append((offset, match.group(1)))
    return headings


def _missing_sections(
    files: Mapping[str, bytes], manifest: Manifest, toolmd_path: str
) -> list[Problem]:
    titles = [title.lower() for _, title in body_sections(manifest.body)]
    missing = [
        section
        for section in SECTIONS
        if not any(t.startswith(_SECTION_PREFIXES.get(section, section.lower())) for t in titles)
    ]
    if not missing:
        return []
    text = files["TOOL.md"].decode("utf-8-sig", errors="replace")
    body_line = len(text.splitlines()) - len(manifest.body.splitlines()) + 1
    listed = ", ".join(f"## {section}" for section in missing)
    return [
        Problem(
            toolmd_path,
            max(1, body_line),
            "body",
            f"missing section{'s' if len(missing) > 1 else ''} {listed} "
            f"(seed tools document {', '.join(SECTIONS)})",
            WARNING,
        )
    ]

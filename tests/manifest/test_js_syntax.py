"""TypeScript and JavaScript tools' files are parsed by Node (never run) wherever tools are
checked: a syntax error is an error at its file, line and column
(tools_app/manifest/jssyntax.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import tool_files
from tools_app.http_tools.checks import ValidationContext
from tools_app.manifest import jssyntax
from tools_app.manifest.folder import validate_files

# Code tools: their checks read nothing of a console.
NO_CONSOLE = ValidationContext()

REPO = Path(__file__).resolve().parents[2]


def problems_of(files: dict[str, str], language: str = "typescript") -> list[str]:
    entry = {"typescript": "index.ts", "javascript": "index.js"}[language]
    tool = tool_files("p", language, source=files.pop(entry, None))
    tool |= {name: text.encode() for name, text in files.items()}
    return [str(p) for p in validate_files(tool, "p/TOOL.md", context=NO_CONSOLE).problems]


@pytest.mark.parametrize(
    ("name", "source", "expected"),
    [
        # swc's message (Node's type stripper), at the `=`.
        (
            "index.ts",
            "export async function execute() {\n  const x: = 1;\n  return x;\n}\n",
            "p/index.ts:2: typescript: Syntax error: Unexpected token `=`.",
        ),
        # V8's message for the stripped code: valid TypeScript, invalid JavaScript.
        (
            "index.ts",
            "export const x: number = 1;\nconst x = 2;\nexport async function execute() {}\n",
            "p/index.ts:2: typescript: Syntax error: Identifier 'x' has already been declared "
            "(column 7)",
        ),
        # A tab (and any character) counts as one column, whatever width it is shown with.
        (
            "index.ts",
            "export async function execute() {\n\tlet é: number = (;\n}\n",
            "p/index.ts:2: typescript: Syntax error: Expression expected (column 19)",
        ),
        (
            "index.js",
            "export async function execute() {\n\tlet é = (;\n}\n",
            "p/index.js:2: javascript: Syntax error: Unexpected token ';' (column 11)",
        ),
        # An error spanning lines has no one column.
        (
            "index.ts",
            "export async function execute() {\n\tconst s: string = `abc\n}\n",
            "p/index.ts:2: typescript: Syntax error: Unterminated template",
        ),
        # What Node's strip-only mode refuses fails every run: an error too.
        (
            "index.ts",
            "enum Color { Red }\nexport async function execute() {}\n",
            "p/index.ts:1: typescript: Not supported: TypeScript enum is not supported in "
            "strip-only mode (column 1)",
        ),
        (
            "index.js",
            "export async function execute() {\n  return (;\n}\n",
            "p/index.js:2: javascript: Syntax error: Unexpected token ';' (column 11)",
        ),
        # A CommonJS helper is compiled as CommonJS (its package.json says so).
        (
            "lib/helper.cjs",
            "module.exports = {\n  a: 1\n  b: 2\n};\n",
            "p/lib/helper.cjs:3: javascript: Syntax error: Unexpected identifier 'b' (column 3)",
        ),
    ],
)
def test_it_reports_a_syntax_error_at_its_line_and_column(name, source, expected):
    language = "javascript" if name.endswith(".js") else "typescript"
    shown = problems_of({name: source}, language)
    assert any(problem.startswith(expected) for problem in shown), shown


def test_valid_typescript_and_javascript_pass():
    files = {
        "index.ts": "import { helper } from './lib/helper.mjs';\n"
        "type P = { n: number };\n"
        "export async function execute(id: string, params: P) {\n"
        "  return { content: [{ type: 'text', text: helper(params.n as number) }] };\n}\n",
        "lib/helper.mjs": "export const helper = (n) => String(n);\n",
        "lib/old.js": "module.exports = function old() { return 1; };\n",
    }
    result = validate_files(
        tool_files("p", source=files.pop("index.ts")) | {k: v.encode() for k, v in files.items()},
        "p/TOOL.md",
        context=NO_CONSOLE,
    )
    assert result.manifest is not None and result.problems == []


def test_top_level_await_makes_an_es_module_as_in_node():
    assert problems_of({"index.ts": "const page: string = await Promise.resolve('x');\n"}) == []


def test_an_es_module_by_its_package_json_is_checked_as_one():
    # Valid CommonJS (a top-level return), but "type": "module" makes it an ES module.
    shown = problems_of(
        {
            "package.json": '{"type": "module"}',
            "index.js": "export async function execute() {}\nreturn 1;\n",
        },
        "javascript",
    )
    assert any(
        p.startswith("p/index.js:2: javascript: Syntax error: Illegal return") for p in shown
    )


def test_it_parses_code_it_never_runs(tmp_path):
    """A top-level statement that would write a file on import writes nothing."""
    marker = tmp_path / "ran"
    source = (
        f"import {{ writeFileSync }} from 'node:fs';\nwriteFileSync({str(marker)!r}, 'x');\n"
        "export async function execute() {}\n"
    )
    assert problems_of({"index.ts": source}) == []
    assert not marker.exists()


def test_a_file_the_parser_gives_up_on_is_a_warning_and_the_others_are_still_checked():
    # Nesting too deep for swc breaks its WebAssembly instance for good: the files after
    # it are parsed in a new Node process.
    shown = problems_of(
        {
            "a_deep.ts": "(" * 100_000,
            "index.ts": "export async function execute() {\n  const x: = 1;\n}\n",
        }
    )
    assert any(p.startswith("p/a_deep.ts:1: typescript: warning: was not checked") for p in shown)
    assert any(p.startswith("p/index.ts:2: typescript: Syntax error") for p in shown), shown


def test_messages_name_no_path_of_this_machine():
    shown = problems_of(
        {
            "index.ts": "export async function execute() {\n  const x: = 1;\n}\n",
            "b.mjs": "export const a = 1;\nexport const a = 2;\n",
            "c.cjs": "let = ;\n",
        }
    )
    assert len(shown) == 3, shown
    for problem in shown:
        assert str(REPO) not in problem and "/tmp" not in problem and "file:" not in problem


def test_a_check_that_cannot_run_is_a_warning(monkeypatch):
    monkeypatch.setattr(jssyntax, "CHECK_SECONDS", 0.000_001)
    shown = problems_of({})
    assert shown == [
        "p/index.ts:1: typescript: warning: was not checked for syntax: the check took "
        "longer than 1e-06 s"
    ]


def test_dependencies_and_other_languages_are_not_checked():
    assert problems_of({"node_modules/x/index.js": "((("}) == []
    python = tool_files("p", "python") | {"broken.js": b"((("}
    assert validate_files(python, "p/TOOL.md", context=NO_CONSOLE).problems == []


def test_files_over_the_size_limit_are_not_sent_to_node(monkeypatch):
    sent: list[int] = []
    check = jssyntax._check

    def spy(node, sources):
        sent.extend(len(source) for _, source, *_ in sources)
        return check(node, sources)

    monkeypatch.setattr(jssyntax, "_check", spy)
    monkeypatch.setattr(jssyntax.bundle, "MAX_FILE_BYTES", 1000)
    problems_of({"big.js": "x;\n" * 1000})
    assert sent and max(sent) < 1000

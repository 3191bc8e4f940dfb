"""No import loops between the project's modules (docs/development.md): every import counts,
top-level or inside a function, because an import placed in a function only hides a loop
until the day someone moves it. And the TOOL.md parser, the folder checks and the test
cases (cases/) stay free of Django state, and no module of manifest/, cases/ or lib/
imports Django at all: what they need to know comes as an
argument (tools_app/http_tools/context.py and tools_app/integrations/environment.py build
it), never from settings or the database."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("tools_app", "console")

# Modules the parser must reach neither directly nor through other project modules.
PURE = ("tools_app.manifest.toolmd", "tools_app.manifest.folder", "tools_app.http_tools.checks")
PURE += tuple(f"tools_app.cases.{m}" for m in ("document", "evaluate", "propose", "write"))
# What signs and verifies (docs/signing.md) runs the same in any process, from its arguments.
PURE += tuple(f"tools_app.signing.{m}" for m in ("canonical", "envelope", "statement", "trust"))
FORBIDDEN = ("django.conf", "tools_app.models", "tools_app.integrations")

# Packages whose modules know nothing of Django, and what none of them may import: Django
# itself, the settings (console/), the models and the layers built on them.
DJANGO_FREE = ("tools_app.manifest", "tools_app.cases", "tools_app.lib")
DJANGO_STATE = (
    "django",
    "console",
    "tools_app.models",
    "tools_app.integrations",
    "tools_app.egress",
)


def module_files() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    """`if TYPE_CHECKING:` never runs, so what it imports is no edge of the graph."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, type_checking: bool = False):
    """Every node of the tree, function bodies included, minus `if TYPE_CHECKING:` bodies
    (unless `type_checking`)."""
    for child in ast.iter_child_nodes(node):
        if not type_checking and isinstance(child, ast.If) and _is_type_checking(child.test):
            yield from (n for stmt in child.orelse for n in [stmt, *_walk(stmt)])
            continue
        yield child
        yield from _walk(child, type_checking)


def imported_names(
    module: str, path: Path, modules: set[str], type_checking: bool = False
) -> set[str]:
    """Dotted names this module imports. `from a import b` imports the module `a.b` when there
    is one, else the name `b` of `a` (so `a` itself); a relative import is resolved against
    the package. With `type_checking`, what `if TYPE_CHECKING:` imports counts too."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in _walk(tree, type_checking):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            submodules = {f"{source}.{alias.name}" for alias in node.names}
            names.update(submodules & modules)
            if submodules - modules:
                names.add(source)
    return names


def _packages_of(name: str) -> list[str]:
    """Importing `a.b.c` runs `a/__init__.py` and `a/b/__init__.py` first: what those import
    counts too, so a package's __init__ cannot hide a loop (the importer's own packages are
    running already, so importing a sibling adds no edge)."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(edges between project modules, every outside module each one imports)."""
    files = module_files()
    edges: dict[str, set[str]] = {}
    outside: dict[str, set[str]] = {}
    for module, path in files.items():
        names = imported_names(module, path, set(files))
        own = set(_packages_of(module))  # already running when this module runs
        names |= {parent for name in names for parent in _packages_of(name)} - own
        edges[module] = {n for n in names if n in files and n != module}
        outside[module] = {n for n in names if n.split(".")[0] not in PACKAGES}
    return edges, outside


def loops(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan): the modules
    that import each other, directly or through the others."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return components


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One loop per component, as a path that comes back to where it started."""
    return [_cycle_in(component, edges) for component in loops(edges)]


def _cycle_in(component: set[str], edges: dict[str, set[str]]) -> list[str]:
    """The shortest loop through the component's first module (breadth-first)."""
    start = min(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in sorted(edges[node] & component):
            if target == start:
                return [*paths[node], start]
            if target not in paths:
                paths[target] = [*paths[node], target]
                queue.append(target)
    raise AssertionError(f"no loop in {component}")  # pragma: no cover


def reachable(start: str, edges: dict[str, set[str]]) -> dict[str, list[str]]:
    """Every project module `start` imports, directly or not, with the path that leads there."""
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in sorted(edges[node]):
            if target not in paths:
                paths[target] = [*paths[node], target]
                queue.append(target)
    return paths


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_it_has_no_import_loop():
    edges, _ = import_graph()
    found = [
        f"{len(component)} modules ({', '.join(sorted(component))}), e.g. "
        + " -> ".join(_cycle_in(component, edges))
        for component in loops(edges)
    ]
    assert not found, "import loops:\n" + "\n".join(found)


@pytest.mark.parametrize("module", PURE)
def test_it_keeps_the_toolmd_parser_free_of_django_state(module):
    edges, outside = import_graph()
    paths = reachable(module, edges)  # breadth-first: the first hit is the shortest path
    bad = []
    for forbidden in FORBIDDEN:
        for reached, path in paths.items():
            if _within(reached, forbidden):
                bad.append(" -> ".join(path))
                break
            if any(_within(name, forbidden) for name in outside[reached]):
                bad.append(" -> ".join([*path, forbidden]))
                break
    assert not bad, f"{module} reaches Django state:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    "module", [m for m in module_files() if any(_within(m, p) for p in DJANGO_FREE)]
)
def test_it_keeps_manifest_cases_and_lib_free_of_django(module):
    # The module's own imports, in functions and under `if TYPE_CHECKING:` too (a model in
    # a signature is knowledge of the database all the same).
    files = module_files()
    names = imported_names(module, files[module], set(files), type_checking=True)
    bad = sorted(n for n in names if any(_within(n, package) for package in DJANGO_STATE))
    assert not bad, f"{module} imports Django, settings or the database: {', '.join(bad)}"


def test_it_sees_imports_inside_functions_and_relative_ones(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from pkg import c\n"
        "def f():\n    from . import b\n"
    )
    (package / "b.py").write_text("class K:\n    def m(self):\n        from .a import f\n")
    modules = {"pkg", "pkg.a", "pkg.b", "pkg.c"}
    assert imported_names("pkg.a", package / "a.py", modules) == {"typing", "pkg.b"}
    strict = imported_names("pkg.a", package / "a.py", modules, type_checking=True)
    assert strict == {"typing", "pkg.b", "pkg.c"}
    assert imported_names("pkg.b", package / "b.py", modules) == {"pkg.a"}
    edges = {"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}, "pkg.c": set()}
    assert cycles(edges) == [["pkg.a", "pkg.b", "pkg.a"]]
    assert cycles({"pkg.a": {"pkg.b"}, "pkg.b": set()}) == []


def test_it_counts_what_a_package_init_imports(tmp_path, monkeypatch):
    # pkg.a imports pkg.sub.b, which runs pkg/sub/__init__.py first; that imports pkg.a.
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub.b import f\n")
    (package / "sub" / "__init__.py").write_text("from pkg import a\n")
    (package / "sub" / "b.py").write_text("def f():\n    pass\n")
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    monkeypatch.setattr(f"{__name__}.PACKAGES", ("pkg",))
    edges, _ = import_graph()
    assert "pkg.sub" in edges["pkg.a"]
    assert {"pkg.a", "pkg.sub"} in loops(edges)


# The packages of the tree (docs/development.md, "Layout"; models/ re-exports its models
# as Django expects, runner/ its entry points, api/ builds the NinjaAPI): their __init__
# holds a docstring and nothing else, so importing one of their modules imports nothing
# more and every caller names the module that defines what it uses.
CONCEPT_PACKAGES = (
    "lib",
    "manifest",
    "cases",
    "catalog",
    "http_tools",
    "http_tools/openapi",
    "egress",
)
CONCEPT_PACKAGES += ("runs", "ops", "integrations", "views", "forms", "signing")


@pytest.mark.parametrize("package", CONCEPT_PACKAGES)
def test_it_keeps_package_inits_to_a_docstring(package):
    body = ast.parse((REPO / "tools_app" / package / "__init__.py").read_text()).body
    assert all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body)

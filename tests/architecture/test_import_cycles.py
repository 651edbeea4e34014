"""No file imports itself back through others (issue 39.5).

An import cycle makes the order of imports matter, hides which module a name really belongs to and
turns a refactoring of one file into a hunt across several. The graph is read with `ast` from the
source, so an import inside a function (the usual way a cycle is hidden) counts as much as one at the
top, and a relative import counts as the module it resolves to. An edge goes from a file to the file
it names: `from a.b import c` names `a/b/c.py` when that module exists, else `a/b/__init__.py`. A
package's `__init__` running first is Python's doing, not an edge.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import networkx as nx

REPO = Path(__file__).resolve().parents[2]

# Where each folder's modules live in the installed package (setup.py maps the top-level folders in).
# The scripts are run as files, so they import each other by their bare names.
ROOTS: dict[str, str] = {"localfa": "localfa", "serving": "localfa.serving", "grammars": "localfa.grammars", "scripts": ""}


def module_names(repo: Path, roots: Mapping[str, str]) -> dict[str, Path]:
    """Every module's dotted name under the given folders, with the file that defines it."""
    names: dict[str, Path] = {}
    for folder, prefix in roots.items():
        for path in sorted((repo / folder).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(repo / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            names[".".join(p for p in [prefix, *parts] if p)] = path
    return names


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _base(node: ast.ImportFrom, module: str, path: Path) -> str:
    """The absolute module a `from ... import` statement reads from (relative dots resolved)."""
    if not node.level:
        return node.module or ""
    package = _package_of(module, path).split(".")
    anchor = package[: len(package) - (node.level - 1)]
    return ".".join([*anchor, node.module] if node.module else anchor)


def _resolve(name: str, modules: Mapping[str, Path]) -> str | None:
    """The longest known module that a dotted name starts with (None for outside modules)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _targets(node: ast.Import | ast.ImportFrom, module: str, path: Path, modules: Mapping[str, Path]) -> set[str | None]:
    if isinstance(node, ast.Import):
        return {_resolve(alias.name, modules) for alias in node.names}
    base = _base(node, module, path)
    # `from pkg import x` names the module pkg.x when there is one, else pkg itself.
    return {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else _resolve(base, modules) for a in node.names}


def import_graph(modules: Mapping[str, Path]) -> nx.DiGraph:
    """Module -> module for every import statement anywhere in each file (functions included)."""
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph.add_edges_from((module, t) for t in _targets(node, module, path, modules) if t and t != module)
    return graph


def import_cycles(modules: Mapping[str, Path]) -> list[list[str]]:
    """One shortest cycle per strongly connected group of modules, each starting at its smallest name."""
    graph = import_graph(modules)
    cycles = []
    for group in nx.strongly_connected_components(graph):
        if len(group) < 2:
            continue
        start = min(group)
        cycle = min((nx.shortest_path(graph, nxt, start) for nxt in graph.successors(start) if nxt in group), key=len)
        cycles.append([start, *cycle])
    return sorted(cycles)


def test_no_file_imports_itself_back():
    cycles = import_cycles(module_names(REPO, ROOTS))
    assert cycles == [], "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def _write(root: Path, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def test_a_cycle_through_a_function_level_relative_import_is_found(tmp_path: Path):
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/sub/__init__.py": "",
            "pkg/sub/a.py": "from ..b import thing\n",
            "pkg/b.py": "def f():\n    from pkg.sub import c\n",
            "pkg/sub/c.py": "from . import a\n",
            "pkg/leaf.py": "import pkg.b\n",
        },
    )
    assert import_cycles(module_names(tmp_path, {"pkg": "pkg"})) == [["pkg.b", "pkg.sub.c", "pkg.sub.a", "pkg.b"]]


def test_a_name_imported_from_a_package_points_at_its_init(tmp_path: Path):
    _write(tmp_path, {"pkg/__init__.py": "from pkg.a import x\n", "pkg/a.py": "from pkg import y\nx = 1\n"})
    assert import_cycles(module_names(tmp_path, {"pkg": "pkg"})) == [["pkg", "pkg.a", "pkg"]]


def test_scripts_import_each_other_by_bare_name(tmp_path: Path):
    _write(tmp_path, {"scripts/one.py": "from two import f\n", "scripts/two.py": "def f():\n    import one\n"})
    assert import_cycles(module_names(tmp_path, {"scripts": ""})) == [["one", "two", "one"]]

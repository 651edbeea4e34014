"""Where things plug in: import boundaries and names that must live in one place (issue 15).

These scan the source with `ast`, so a lazy import inside a function counts as much as one at the
top of a module, and a method or backend name written as a string anywhere else is caught.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from localfa.engine.factory import ENGINES
from localfa.methods.registry import METHODS

PKG = Path(__file__).resolve().parents[2] / "localfa"


def _modules(under: Path) -> list[Path]:
    return sorted(p for p in under.rglob("*.py") if "__pycache__" not in p.parts)


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def _offenders(under: Path, forbidden: str) -> list[str]:
    return [
        f"{p.relative_to(PKG)} imports {name}"
        for p in _modules(under)
        for name in sorted(_imports(p))
        if name == forbidden or name.startswith(forbidden + ".")
    ]


def test_traces_never_import_the_engine():
    assert _offenders(PKG / "traces", "localfa.engine") == []


def test_engine_never_imports_traces():
    assert _offenders(PKG / "engine", "localfa.traces") == []


def test_cluster_never_imports_the_sweep():
    """One sweep driver, in bench/ with its executors; cluster/ is only Ray plumbing below it (issue 25.11)."""
    assert _offenders(PKG / "cluster", "localfa.bench") == []


def test_limits_is_a_leaf():
    assert [n for n in sorted(_imports(PKG / "limits.py")) if n.startswith("localfa")] == []


def test_typer_only_in_the_cli_package():
    outside = [p for p in _modules(PKG) if "cli" not in p.relative_to(PKG).parts[:1]]
    assert [str(p.relative_to(PKG)) for p in outside if any(n.split(".")[0] == "typer" for n in _imports(p))] == []


def _string_constants(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings}


def _home(target: str) -> Path:
    """The file (or, for a package's module, the package folder) that owns a registered name."""
    module = target.partition(":")[0]
    path = PKG.parent / (module.replace(".", "/") + ".py")
    return path.parent if path.parent != PKG / "methods" and path.parent != PKG / "engine" else path


@pytest.mark.parametrize(
    "registry,registry_file",
    [(METHODS, PKG / "methods" / "registry.py"), (ENGINES, PKG / "engine" / "factory.py")],
    ids=["methods", "backends"],
)
def test_registered_names_appear_only_in_their_own_module_and_registry(registry, registry_file):
    found = []
    for path in [p for root in (PKG, PKG.parent / "grammars", PKG.parent / "serving") for p in _modules(root)]:
        if path == registry_file:
            continue
        literals = _string_constants(path)
        for name, target in registry.items():
            home = _home(target)
            if path == home or home in path.parents:
                continue
            if name in literals:
                found.append(f"{path.relative_to(PKG.parent)}: {name!r}")
    assert found == []


def test_the_scan_sees_a_planted_literal(tmp_path):
    planted = tmp_path / "x.py"
    planted.write_text('"""doc mentions safari"""\nNAME = "safari"\n')
    assert "safari" in _string_constants(planted)
    assert "doc mentions safari" not in _string_constants(planted)


# A folder renamed into place by the first of several concurrent converters (the loser's rename
# fails and it uses the winner's): a race on a directory, not a file's content replaced.
RENAMES_ALLOWED = {"durable.py", "engine/model.py"}


def _renames(path: Path) -> list[int]:
    """Lines of `path` that rename or replace a file: os.replace/os.rename, or `x.replace(dst)` /
    `x.rename(dst)` with one argument (str.replace takes two; dataclasses.replace takes keywords)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name, owner = node.func.attr, node.func.value
        if isinstance(owner, ast.Name) and owner.id == "os" and name in ("replace", "rename"):
            lines.append(node.lineno)
        elif name in ("replace", "rename") and len(node.args) == 1 and not node.keywords:
            lines.append(node.lineno)
    return lines


def test_files_are_replaced_only_through_localfa_durable():
    """One write-fsync-replace-fsync-the-folder helper (`localfa.durable.replacing`), no hand-written copy."""
    found = [
        f"{p.relative_to(PKG)}:{line}" for p in _modules(PKG) if str(p.relative_to(PKG)) not in RENAMES_ALLOWED for line in _renames(p)
    ]
    assert found == []


def test_the_rename_scan_sees_a_hand_written_replace(tmp_path):
    planted = tmp_path / "x.py"
    planted.write_text("import os\nos.replace(a, b)\ntmp.replace(path)\n'a'.replace('b', 'c')\nreplace(r, k=1)\n")
    assert _renames(planted) == [2, 3]


def test_methods_never_draw_html():
    """Every renderer lives in `localfa.view`; a method names its own with `view_path` (issue 39.5)."""
    assert _offenders(PKG / "methods", "localfa.view") == []
    from localfa.methods.registry import method_class

    elsewhere = {name: method_class(name).view_path for name in METHODS}
    assert {n: p for n, p in elsewhere.items() if p is not None and not p.startswith("localfa.view.")} == {}

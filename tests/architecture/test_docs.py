"""The documentation site's generated parts (issue 39.2): each method's options table is drawn
from its `Options` dataclass and the serving profiles, and every method's page asks for one."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from pathlib import Path

from localfa.methods.registry import METHODS, method_class

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _hook(name: str):
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", DOCS / "hooks" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_method_with_options_has_its_table_on_a_page():
    asked = {m for page in (DOCS / "methods").glob("*.md") for m in re.findall(r"<!-- method-options: ([\w-]+) -->", page.read_text())}
    assert asked <= set(METHODS)
    shown = {method_class(m).Options for m in asked}
    with_options = {m for m in METHODS if dataclasses.is_dataclass(method_class(m).Options)}
    assert [m for m in sorted(with_options) if method_class(m).Options not in shown] == []


def test_the_options_table_holds_every_option_and_the_profiles_values():
    table = _hook("method_options").options_table("falat")
    for f in dataclasses.fields(method_class("falat").Options):
        assert f"`{f.name}" in table
    assert "`cpu-embedded` profile" in table  # the embedded model's profile sets FALAT's bounds


def test_the_markers_are_replaced_when_the_site_is_built():
    hook = _hook("method_options")
    out = hook.on_page_markdown("a\n\n<!-- method-options: drift -->\n", None, None, None)
    assert "<!--" not in out and "| `tracer` |" in out


def _command_lines() -> list[tuple[str, str]]:
    """(file, line) for every `localfa ...` command in a shell block of the README and the docs."""
    pages = [DOCS.parent / "README.md", *sorted(DOCS.rglob("*.md"))]
    out = []
    for page in pages:
        if page.name == "cli.md":
            continue
        for block in re.findall(r"```(?:bash|sh)?\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
            joined = block.replace("\\\n", " ")
            out += [(page.name, line.strip()) for line in joined.splitlines() if re.match(r"\s*(\.venv/bin/)?localfa \w", line)]
    return out


def unknown_options(lines: list[tuple[str, str]], known: dict[str, set[str]]) -> list[str]:
    """Each shown command line's commands and options that no parser has."""
    wrong = []
    for page, line in lines:
        words = line.split("#")[0].split()
        command = words[1]
        if command not in known:
            wrong.append(f"{page}: {line} (no command {command})")
            continue
        wrong += [f"{page}: {line} ({w})" for w in words[2:] if w.startswith("-") and w != "-" and w.split("=")[0] not in known[command]]
    return wrong


def test_every_command_the_docs_show_uses_options_that_exist():
    from localfa.cli.reference import command_tree

    group = command_tree()
    known = {name: {o for p in cmd.params for o in [*p.opts, *p.secondary_opts]} for name, cmd in group.commands.items()}
    lines = _command_lines()
    assert len(lines) > 10
    assert unknown_options(lines, known) == []
    shipped = [w.rstrip("/") for _, line in lines for w in line.split("#")[0].split() if w.startswith("examples/")]
    assert shipped and [w for w in shipped if not (DOCS.parent / w).exists()] == []
    planted = [("x.md", "localfa diagnose t.json --no-such-flag 3"), ("x.md", "localfa frobnicate t.json")]
    assert len(unknown_options(planted, known)) == 2


def test_the_harness_page_shows_what_bench_says_on_the_example_job(tmp_path):
    """The --failed-only lines on docs/harness.md are what `bench` prints for examples/coding/harbor_job."""
    import subprocess
    import sys

    page = (DOCS / "harness.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(localfa bench examples/coding/harbor_job.*?)```", page, re.S)
    assert block, "the page runs the example job"
    shown = " ".join(line.lstrip("# ").strip() for line in block.group(1).splitlines() if line.startswith("#"))
    cmd = [sys.executable, "-m", "localfa", "bench", "examples/coding/harbor_job", "--failed-only", "--methods", "all-at-once"]
    cmd += ["--engine", "scripted", "--out", str(tmp_path / "run"), "--no-progress"]
    proc = subprocess.run(cmd, cwd=DOCS.parent, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = next(line for line in proc.stderr.splitlines() if line.startswith("--failed-only:"))
    assert said == shown

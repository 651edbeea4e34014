"""The README stays short and true (issue 39.1): what a later commit would make false fails here.

Its quick start runs as written (on the scripted engine here; tests/test_quickstart_real.py runs
it verbatim on the embedded model), its tables name exactly the registered methods and trace
formats, and every file or page it links to exists.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from localfa.methods.registry import METHODS
from localfa.traces.importers import FORMATS

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    """The README's `## title` section, up to the next `## ` heading."""
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end > 0 else None]


def code_blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def quick_start_lines() -> list[str]:
    return [line for line in code_blocks(section("Quick start"), "bash")[0].splitlines() if line.strip()]


def table_first_column(text: str) -> set[str]:
    """The backticked names in the first column of a Markdown table."""
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("|---")]
    return {name for row in rows[1:] for name in re.findall(r"`([^`]+)`", row.split(" | ")[0])}


def test_the_readme_is_read_in_five_minutes():
    assert len(README.splitlines()) <= 200


def test_the_two_commands_are_the_ones_that_work():
    block = code_blocks(section("The two commands"), "bash")[0]
    commands = [line for line in block.splitlines() if line and not line.startswith("#")]
    assert commands == [
        "bash scripts/setup_cpu.sh && .venv/bin/localfa diagnose examples/failed_run.json --max-turns 8",
        "bash scripts/setup_cpu.sh && .venv/bin/python -m pytest -q",
    ]
    assert (REPO / "examples" / "failed_run.json").is_file() and (REPO / "scripts" / "setup_cpu.sh").is_file()


def test_the_methods_table_names_every_registered_method():
    assert table_first_column(section("Methods")) == set(METHODS)


def test_the_formats_table_names_every_trace_format():
    assert table_first_column(section("Trace formats")) == set(FORMATS)


def test_every_link_and_picture_points_at_a_file_that_exists():
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [t for t in targets if "://" not in t]
    assert local, "the README links into the docs"
    assert [t for t in local if not (REPO / t).exists()] == []


def test_every_path_the_quick_start_names_ships_with_the_repository():
    paths = [w for line in quick_start_lines() for w in shlex.split(line) if w.startswith("examples/")]
    assert paths and [p for p in paths if not (REPO / p).exists()] == []
    assert (REPO / "examples" / "whowhen" / "LICENSE").is_file()


def test_the_python_example_names_the_api_and_a_shipped_file():
    code = code_blocks(README, "python")[0]
    compile(code, "README.md", "exec")
    import localfa

    for name in re.findall(r"localfa\.(\w+)\(", code):
        assert callable(getattr(localfa, name))
    assert all((REPO / p).exists() for p in re.findall(r'"(examples/[^"]+)"', code))


def _as_scripted(line: str) -> list[str]:
    """A quick-start line as this test runs it: the package's CLI, on the scripted engine."""
    words = shlex.split(line)
    assert words[0] == ".venv/bin/localfa", line
    extra = ["--engine", "scripted"] if words[1] in ("diagnose", "bench") else []
    return [sys.executable, "-m", "localfa", *words[1:], *extra]


def test_the_quick_start_runs_line_by_line_in_a_fresh_folder(tmp_path):
    (tmp_path / "examples").symlink_to(REPO / "examples")
    for line in quick_start_lines():
        proc = subprocess.run(_as_scripted(line), cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{line}\n{proc.stderr[-2000:]}"
    assert (tmp_path / "diagnosis.html").is_file()
    assert (tmp_path / "runs" / "quick" / "report.html").is_file() and (tmp_path / "runs" / "quick" / "view.html").is_file()


@pytest.mark.parametrize("title", ["The two commands", "Quick start"])
def test_the_getting_started_page_repeats_the_readme_word_for_word(title):
    page = (REPO / "docs" / "getting-started.md").read_text(encoding="utf-8")
    there = page[page.index(f"## {title}") :]
    assert code_blocks(there, "bash")[0] == code_blocks(section(title), "bash")[0]

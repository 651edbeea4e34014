"""Benchmark figures as data (issue 39.3): a script's printed figures become JSON with their
provenance, and the benchmarks page is drawn from such files with every field escaped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from localfa.bench.benchjson import SCHEMA, figures_of, render_page, run_recorded

REPO = Path(__file__).resolve().parents[2]


def test_a_printed_line_gives_its_figures_as_numbers():
    line = "method=all-at-once p=0.5 step_accuracy=0.717 ci95=[0.64, 0.78] calls_per_trace=1.0 errors=0 note: x=y,"
    assert figures_of(line) == {
        "method": "all-at-once",
        "p": 0.5,
        "step_accuracy": 0.717,
        "ci95": "[0.64, 0.78]",
        "calls_per_trace": 1.0,
        "errors": 0,
        "x": "y",
    }
    assert figures_of("no figure here") == {}
    assert figures_of("by_stage={0: 0.844, 1: 0.106} n=3") == {"by_stage": "{0: 0.844, 1: 0.106}", "n": 3}


def _fake_main(lines: list[str], status: int = 0):
    def main() -> int:
        for line in lines:
            print(line)
        return status

    return main


def test_a_clean_run_writes_its_rows_with_machine_date_commit_and_load(tmp_path, monkeypatch):
    out = tmp_path / "b.json"
    monkeypatch.setattr(sys, "argv", ["bench_x.py", "--json", str(out)])
    assert run_recorded(_fake_main(["warming up", "speedup=3.5 share=0.8", "speedup=3.9 share=0.7"]), "bench_x") == 0
    record = json.loads(out.read_text())
    assert record["schema"] == SCHEMA and record["benchmark"] == "bench_x"
    assert record["rows"] == [{"speedup": 3.5, "share": 0.8}, {"speedup": 3.9, "share": 0.7}]
    assert record["machine"]["cores"] and record["date"].endswith("Z") and "start" in record["load"]
    assert "commit" in record and record["command"][-1] == str(out)


def test_a_failed_run_writes_nothing(tmp_path, monkeypatch):
    out = tmp_path / "b.json"
    monkeypatch.setattr(sys, "argv", ["bench_x.py", "--json", str(out)])
    assert run_recorded(_fake_main(["speedup=1.0"], status=1), "bench_x") == 1
    assert not out.exists()


def test_without_the_option_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench_x.py"])
    monkeypatch.chdir(tmp_path)
    assert run_recorded(_fake_main(["speedup=1.0"]), "bench_x") == 0
    assert list(tmp_path.iterdir()) == []


def test_the_page_escapes_every_field_of_a_hostile_file(tmp_path):
    evil = "<script>alert(1)</script>"
    record = {
        "schema": SCHEMA,
        "benchmark": evil,
        "command": [evil],
        "date": evil,
        "commit": evil,
        "machine": {"cpu": evil},
        "load": {"start": [evil]},
        "rows": [{evil: evil, "ok": 1}],
    }
    (tmp_path / "evil.json").write_text(json.dumps(record))
    (tmp_path / "broken.json").write_text("{not json")
    page = render_page(tmp_path.glob("*.json"))
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "unreadable" in page and "<td>1</td>" in page


@pytest.mark.parametrize("script", sorted(p.name for p in (REPO / "scripts").glob("bench_*.py")) + ["soak.py"])
def test_every_benchmark_script_takes_json(script):
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / script), "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--json FILE" in proc.stdout


def test_the_committed_benchmark_files_are_data_the_page_can_draw():
    files = sorted((REPO / "docs" / "benchmarks").glob("*.json"))
    for path in files:
        record = json.loads(path.read_text(encoding="utf-8"))
        assert record["schema"] == SCHEMA and record["rows"], path
        assert {"date", "commit", "machine", "load"} <= set(record), path
    assert "not a" not in render_page(files) and "unreadable" not in render_page(files)


@pytest.mark.skipif(not (REPO / ".venv" / "bin" / "python").exists(), reason="no project .venv (scripts/setup_cpu.sh makes it)")
@pytest.mark.parametrize("script", ["bench_falat.py", "bench_ensembles.py", "bench_ceiling.py"])
def test_a_script_run_by_a_python_without_localfa_runs_again_in_the_project_venv(script):
    """`python scripts/X.py`, as the issues write it, from a Python that cannot import localfa
    (here: no site-packages at all) still runs, under .venv/bin/python."""
    proc = subprocess.run([sys.executable, "-S", str(REPO / "scripts" / script), "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--json FILE" in proc.stdout

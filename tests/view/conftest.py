"""Diagnoses to look at, made by the real CLI on the scripted engine (fast, no model)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "failed_run.json"
LABELLED = REPO / "tests" / "fixtures" / "traces" / "whowhen_handcrafted.json"
# In examples/failed_run.json: step 4 holds the first two; the third is in no step.
QUOTES = ["Searched 'Sydney population 2021 census'.", "Greater Sydney,\n 2021 Census", "Canberra has 500,000 people"]


def run_groups(results: Path) -> list:
    """The page's groups for a results file, reading only the run's own trace files (as `localfa view`)."""
    from localfa.view.records import TraceFiles, group_records, read_results

    return group_records(read_results(results), readable=TraceFiles.of_run(results))


def localfa(*args: str, cwd: Path = REPO, timeout: int = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "localfa", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="session")
def scripted_results(tmp_path_factory) -> Path:
    """SAFARI (scripted engine, with transcript) on the example and a labelled Who&When trace;
    the example's record then gets evidence quotes, two verbatim and one not."""
    out = tmp_path_factory.mktemp("scripted") / "diag.jsonl"
    localfa(
        "diagnose", str(EXAMPLE), str(LABELLED), "--engine", "scripted", "--max-turns", "4", "--transcript", "--quiet", "--out", str(out)
    )
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["trace"] for r in records] == ["failed_run", "whowhen_handcrafted"]
    records[0]["evidence"] = QUOTES
    out.write_text("".join(json.dumps(r) + "\n" for r in records))
    return out

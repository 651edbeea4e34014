"""The README's quick start, pasted line by line, on the REAL embedded model (vLLM CPU build).

tests/architecture/test_readme.py runs the same lines on the scripted engine; this runs them
exactly as written, from a folder that holds only what a fresh clone has after README command 1
(the examples and the virtualenv), under the network audit (tests/netaudit.py): what the README
tells a user to run first, `diagnose` and `bench` on vLLM, `report` and `view`, makes no outbound
connection.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.architecture.test_readme import quick_start_lines
from tests.netaudit import audited_env, audited_pids, outbound, read_events

pytestmark = pytest.mark.real

REPO = Path(__file__).resolve().parents[1]


def test_the_readme_quick_start_runs_as_written(tmp_path):
    (tmp_path / "examples").symlink_to(REPO / "examples")
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    env, log = audited_env(tmp_path / "audit", record_processes=True)
    for line in quick_start_lines():
        proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True, timeout=1800, env=env)
        assert proc.returncode == 0, f"{line}\n{proc.stderr[-3000:]}"
    assert len(audited_pids(tmp_path / "audit")) >= len(quick_start_lines())  # the hook ran in every command
    assert outbound(read_events(log)) == [], f"non-loopback network use: {outbound(read_events(log))}"
    assert (tmp_path / "diagnosis.html").is_file()
    assert (tmp_path / "runs" / "quick" / "report.html").is_file() and (tmp_path / "runs" / "quick" / "view.html").is_file()

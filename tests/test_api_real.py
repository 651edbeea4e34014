"""The Python API example (docs/api.md), run as written on the REAL embedded model (vLLM CPU build),
as on an air-gapped host: only loopback up and no default route (where this host allows a network
namespace), under the network audit (tests/netaudit.py)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from localfa.traces.load import load_trace
from tests.netaudit import audited_pids, outbound, run_command_audited

pytestmark = pytest.mark.real

REPO = Path(__file__).resolve().parents[1]


def readme_api_example() -> str:
    """The first Python block of the API page (docs/api.md), where the README points."""
    text = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


def test_the_readme_python_api_example_runs_on_the_embedded_model(tmp_path):
    code = readme_api_example()
    assert "localfa.diagnose(" in code and "localfa.bench(" in code and "localfa.make_engine(" in code
    (tmp_path / "examples").symlink_to(REPO / "examples")
    script = tmp_path / "example.py"
    script.write_text("if __name__ == '__main__':\n" + "".join(f"    {line}\n" for line in code.splitlines()))
    audit = tmp_path / "audit"
    proc, events = run_command_audited([sys.executable, str(script)], audit, 900, record_processes=True, loopback=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert audited_pids(audit), "the audit hook was loaded by no process: it did not run"
    assert outbound(events) == [], f"non-loopback network use: {outbound(events)}"
    lines = proc.stdout.strip().splitlines()
    step, agent = lines[0].split()[:2]  # print(d.step, d.agent, d.reasoning)
    trace = load_trace(REPO / "examples" / "failed_run.json")
    assert 0 <= int(step) < len(trace.steps)
    assert agent in {s.agent for s in trace.steps}  # all-at-once names the agent itself, among the speakers
    steps, written = lines[-1].rsplit(" ", 1)  # print([m.step for m in many], run.written)
    assert len(ast.literal_eval(steps)) == 2 and int(written) == 4  # 1 trace x 2 methods x 2 seeds
    assert len((tmp_path / "runs" / "api-smoke" / "results.jsonl").read_text().splitlines()) == 4

"""prism on the real embedded model (issue 50): no label is read (shuffled labels give the same
answer, evidence and numbers), and `localfa diagnose --method prism` answers from the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from localfa.methods.base import MethodContext
from localfa.methods.registry import get_method
from localfa.methods.runner import method_job, run_jobs
from localfa.traces.load import load_trace
from localfa.traces.model import Labels

pytestmark = pytest.mark.real
SPEC = "prism:step_tokens=48:full_tokens=128"  # short prompts: two passes in seconds on two cores


def _diagnose(engine, trace):
    ctx = MethodContext(trace=trace, seed=0)
    ((_, diag),) = list(run_jobs(engine, [method_job(engine, get_method(SPEC), ctx)]))
    assert diag.error is None, diag.error
    return diag


def test_shuffled_labels_give_the_same_answer(transformers_engine, whowhen):
    trace = load_trace(whowhen / "algorithm-generated" / "12.json")
    labels = trace.labels
    assert labels is not None and labels.mistake_step is not None
    others = [i for i in trace.action_steps() if i != labels.mistake_step]
    agents = [a for a in trace.agent_names() if a != labels.mistake_agent]
    shuffled = trace.model_copy(update={"labels": Labels(mistake_step=others[-1], mistake_agent=agents[0])})
    a, b = _diagnose(transformers_engine, trace), _diagnose(transformers_engine, shuffled)
    strip = lambda d: {k: v for k, v in d.details.items() if k != "label"}  # noqa: E731 - the record's copy of the label
    assert (a.step, a.agent, a.confidence, a.evidence, strip(a)) == (b.step, b.agent, b.confidence, b.evidence, strip(b))
    assert a.details["variant"].startswith("attention") and a.usage["completion_tokens"] == 0 and a.usage["calls"] == 2


def test_the_cli_answers_on_the_embedded_model(embedded_model_dir):
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "localfa", "diagnose", "examples/failed_run.json", "--method", "prism", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    wall = time.perf_counter() - started
    assert out.returncode == 0, out.stderr[-2000:]
    record = json.loads(out.stdout.strip().splitlines()[-1])
    assert record["method"] == "prism" and record["step"] is not None and record["agent"]
    assert record["evidence"] and 0 <= record["confidence"] <= 1
    assert record["details"]["variant"].startswith("attention")  # no --engine: a scoring-only run defaults to transformers
    print(f"prism_cli_wall_s={wall:.1f} method_wall_s={record['wall_s']:.1f}")

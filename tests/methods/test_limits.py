"""Host-protecting limits: one place (localfa.limits), safe defaults, read from the environment,
and hitting one is reported in the diagnosis (details["limits_hit"]), never a crash."""

from __future__ import annotations

import pytest

from localfa.engine.scripted import ScriptedEngine
from localfa.limits import DEFAULT_MAX_STEP_CHARS, DEFAULT_MAX_STEPS, Limits
from localfa.methods.base import MethodContext
from localfa.methods.fencing import fenced_blocks
from localfa.methods.registry import get_method
from localfa.methods.runner import method_job, run_jobs
from localfa.traces.model import Step, Trace


def trace(contents: list[str]) -> Trace:
    steps = [Step(index=i, agent=("A", "B")[i % 2], role="assistant", content=c) for i, c in enumerate(contents)]
    return Trace(id="t", source="t.json", format="messages", task="Do it.", steps=steps)


def run(name: str, t: Trace, engine: ScriptedEngine):
    ctx = MethodContext(trace=t, seed=0)
    ((_, diag),) = list(run_jobs(engine, [method_job(engine, get_method(name), ctx)]))
    return diag


def test_defaults_and_environment(monkeypatch):
    for var in ("LOCALFA_MAX_STEP_CHARS", "LOCALFA_MAX_STEPS", "LOCALFA_MAX_TRACE_BYTES"):
        monkeypatch.delenv(var, raising=False)
    assert Limits.from_env() == Limits(DEFAULT_MAX_STEP_CHARS, DEFAULT_MAX_STEPS)
    assert Limits.from_env().max_trace_bytes == 256 * 1024 * 1024
    monkeypatch.setenv("LOCALFA_MAX_STEP_CHARS", "1_000")
    monkeypatch.setenv("LOCALFA_MAX_STEPS", "12")
    monkeypatch.setenv("LOCALFA_MAX_TRACE_BYTES", "2M")
    assert (Limits.from_env().max_step_chars, Limits.from_env().max_steps) == (1000, 12)
    assert Limits.from_env().max_trace_bytes == 2 * 1024 * 1024
    for var, bad in (("LOCALFA_MAX_STEP_CHARS", "lots"), ("LOCALFA_MAX_STEP_CHARS", "10"), ("LOCALFA_MAX_STEPS", "0")):
        monkeypatch.setenv(var, bad)
        with pytest.raises(ValueError, match=var):
            Limits.from_env()
        monkeypatch.setenv(var, "100")


def test_a_long_step_is_cut_with_a_marker_and_reported(monkeypatch):
    monkeypatch.setenv("LOCALFA_MAX_STEP_CHARS", "500")
    t = trace(["short", "x" * 5000 + "TAIL", "also short", "y" * 900])
    engine = ScriptedEngine(lambda req: {"agent": "B", "step": 1, "reason": ""})
    diag = run("all-at-once", t, engine)
    assert diag.error is None and diag.step == 1
    blocks = dict(fenced_blocks(engine.requests[0].messages[1]["content"]))
    assert len(blocks["STEP 1"]) <= 500 and "chars cut" in blocks["STEP 1"] and blocks["STEP 1"].endswith("TAIL")
    assert blocks["STEP 0"] == "short" and len(blocks["STEP 3"]) <= 500
    assert diag.details["limits_hit"] == {"max_step_chars": {"limit": 500, "steps_cut": 2, "first": [1, 3]}}


def test_nothing_hit_means_an_empty_report(monkeypatch):
    monkeypatch.delenv("LOCALFA_MAX_STEP_CHARS", raising=False)
    monkeypatch.delenv("LOCALFA_MAX_STEPS", raising=False)
    diag = run("all-at-once", trace(["a", "b"]), ScriptedEngine(lambda req: {"agent": "A", "step": 0, "reason": ""}))
    assert diag.details["limits_hit"] == {}


def test_the_step_cap_bounds_what_a_method_expands(monkeypatch):
    monkeypatch.setenv("LOCALFA_MAX_STEPS", "5")
    t = trace([f"step {i}" for i in range(40)])
    sbs = ScriptedEngine(lambda req: "no")
    diag = run("step-by-step", t, sbs)
    assert len(sbs.requests) == 5 and diag.step == 4  # asked about 5 steps, not 40
    assert diag.details["limits_hit"] == {"max_steps": {"limit": 5, "trace_steps": 40}}
    aao = ScriptedEngine(lambda req: {"agent": "A", "step": 4, "reason": ""})
    diag = run("all-at-once", t, aao)
    assert aao.requests[0].grammar.spec["properties"]["step"]["maximum"] == 4
    assert "[5]" not in aao.requests[0].messages[1]["content"]
    assert diag.error is None and diag.details["limits_hit"]["max_steps"]["trace_steps"] == 40
    bs = ScriptedEngine(lambda req: "upper" if req.grammar.kind == "choice" else {"step": 0, "reason": ""})
    diag = run("binary-search", t, bs)
    assert diag.error is None and diag.details["path"][0]["segment"] == [0, 4]

"""The oracle engine: policies answer inside their grammars, p = 1 finds broken machinery, p = 0
is wrong, answers are reproducible, and what it cannot answer is one trace's error record."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from localfa.api import diagnose_iter
from localfa.engine.cache import CachingEngine, ResponseCache
from localfa.engine.errors import EngineError
from localfa.engine.factory import make_engine
from localfa.engine.grammar import Grammar
from localfa.engine.types import Sampling
from localfa.methods import baselines
from localfa.methods.base import BaseMethod, MethodContext, Program
from localfa.methods.registry import METHODS, get_method
from localfa.oracle.engine import OracleEngine, parse_params
from localfa.oracle.registry import registered_policies
from localfa.testing.faults import FaultPlan, FaultyEngine
from localfa.traces.load import iter_trace_files, load_trace
from localfa.traces.model import Labels
from tests.methods.synthetic import synthetic_trace

REPO = Path(__file__).resolve().parents[2]
SIMPLE = ["all-at-once", "step-by-step", "binary-search"]


def _run(method: str | BaseMethod, traces, p: float = 1.0, seed: int = 0, engine=None):
    eng = engine or OracleEngine(p)
    chosen = get_method(method) if isinstance(method, str) else method
    out = dict(diagnose_iter(eng, chosen, traces, seed=seed, concurrency=16))
    return [out[i] for i in range(len(traces))]


def _synthetic():
    return [
        synthetic_trace(12, "syn/12", "step {i}: the agent reports {i} even addresses"),
        # five words a step at least: a fault the oracle can recognise by its words (a 3-word step
        # has no 5-word shingle, so an honest investigator could only guess it)
        synthetic_trace(3, "syn/3", "step {i}: done, the agent closed item {i}"),
        synthetic_trace(20, "syn/20", "step {i}: counted", long=30, labels=Labels(mistake_agent="Planner", mistake_step=18)),
    ]


def _dev(root: Path, per_subset: int = 3):
    out = []
    for sub in ("algorithm-generated", "hand-crafted"):
        out += [
            load_trace(f) for f in sorted(iter_trace_files([root / sub]), key=lambda f: int(f.stem) if f.stem.isdigit() else 0)[:per_subset]
        ]
    return out


# ---- the engine -----------------------------------------------------------------------------------


def test_engine_spec_parameters_and_errors():
    base = {"p": 1.0, "window": 32768, "noise": "iid", "spread": 4.0, "length": 0.0, "recognise": 0.5}
    assert parse_params("oracle") == base
    assert parse_params("oracle:p=0.8:window=4096:recognise=0.25") == {**base, "p": 0.8, "window": 4096, "recognise": 0.25}
    for bad in ("oracle:p=1.5", "oracle:q=1", "oracle:p=x", "oracle:window=10", "oracle:recognise=0"):
        with pytest.raises(EngineError):
            parse_params(bad)
    eng = make_engine("oracle:p=0.7", say=lambda _: None)
    assert eng.describe()["p"] == 0.7 and "p=0.7" in eng.model_info["identity"]
    with pytest.raises(EngineError, match="takes no parameters"):
        make_engine("scripted:p=0.7", say=lambda _: None)


@pytest.mark.parametrize("p", [1.0, 0.5])
def test_every_policy_answers_inside_its_grammars(p, whowhen):
    """Each registered policy, honest and wrong, on dev and synthetic traces: no invalid output."""
    traces = _dev(whowhen) + _synthetic()
    policies = registered_policies()
    assert set(SIMPLE) <= set(policies.by_method)
    for name in sorted(set(policies.by_method) & set(METHODS)):  # methods; a pass's policy is tested with the pass
        for d in _run(name, traces, p=p):
            assert d.error is None, f"{name} at p={p} on {d.trace}: {d.error}"


def test_p0_answers_are_really_wrong_for_the_simple_baselines(whowhen):
    traces = _dev(whowhen) + _synthetic()
    for name in SIMPLE:
        for t, d in zip(traces, _run(name, traces, p=0.0)):
            assert d.error is None and d.step != t.labels.mistake_step, (name, t.id, d.step)


def test_p1_baselines_find_every_labelled_step(whowhen):
    traces = _dev(whowhen, per_subset=5) + _synthetic()
    for name in SIMPLE:
        for t, d in zip(traces, _run(name, traces)):
            assert d.step == t.labels.mistake_step, (name, t.id, d.step, d.details)


@pytest.mark.parametrize("tracer", ["per-claim", "ledger", "joint"])
def test_p1_drift_finds_a_repeated_fault_where_a_careful_reader_does(whowhen, tracer):
    """hand-crafted/16's labelled step 15 says only "Next speaker WebSurfer", as steps 7 and 11 did:
    nothing it says is its own, so a careful reader recognises the first step that says it (issue
    49) and the ceiling shows the miss. DRIFT's tracer marks that step as the first error, where
    all-at-once answers it too (not a fallback)."""
    trace = load_trace(whowhen / "hand-crafted" / "16.json")
    (aao,) = _run("all-at-once", [trace])
    (d,) = _run(f"drift:tracer={tracer}", [trace])
    assert aao.step == 7
    assert d.error is None and d.step == aao.step, (d.step, d.details.get("ledger", [])[:2])
    assert d.details["step_is_fallback"] is False


def test_same_seed_same_answers_and_seeds_move_the_errors(whowhen):
    traces = _dev(whowhen) + _synthetic()
    for name in SIMPLE:
        a = [(d.step, d.reasoning, d.usage["calls"]) for d in _run(name, traces, p=0.5, seed=3)]
        b = [(d.step, d.reasoning, d.usage["calls"]) for d in _run(name, traces, p=0.5, seed=3)]
        c = [(d.step, d.reasoning, d.usage["calls"]) for d in _run(name, traces, p=0.5, seed=4)]
        assert a == b
        assert a != c, name


# ---- a broken rule is caught at p = 1 ------------------------------------------------------------


def _drop_last_step(monkeypatch):
    """Break the baselines' window: every view loses its last step."""
    real = baselines.TraceView.steps

    def steps(self, lo, hi, cap):
        return real(self, lo, hi, cap)[:-1] if hi > lo else real(self, lo, hi, cap)

    monkeypatch.setattr(baselines.TraceView, "steps", steps)


def test_a_window_that_drops_its_last_step_is_caught_at_p1(monkeypatch):
    trace = _synthetic()[0]  # 12 steps, fault at 4: binary search ends on the window [3, 4]
    assert _run("binary-search", [trace])[0].step == 4
    _drop_last_step(monkeypatch)
    broken = _run("binary-search", [trace])[0]
    assert broken.error is None and broken.step == 3


def _bench_ceiling():
    spec = importlib.util.spec_from_file_location("bench_ceiling", REPO / "scripts" / "bench_ceiling.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_ceiling_prints_the_ceiling_and_sees_the_broken_window(whowhen, tmp_path, capsys, monkeypatch):
    script = _bench_ceiling()
    argv = ["--p", "1.0", "--seeds", "0", "--methods", "binary-search,all-at-once", "--limit", "6", "--data", str(whowhen)]
    script.main([*argv, "--out", str(tmp_path / "ok")])
    printed = capsys.readouterr().out
    assert re.search(r"method=binary-search p=1 .*ceiling_step_accuracy=1\.000 ", printed)
    assert re.search(r"method=all-at-once p=1 .*ceiling_step_accuracy=1\.000 ", printed)
    assert (tmp_path / "ok" / "report.html").read_text().count('class="curve"') == 4  # step and agent, two methods
    _drop_last_step(monkeypatch)
    script.main([*argv, "--out", str(tmp_path / "broken"), "--misses", str(tmp_path / "misses.md")])
    printed = capsys.readouterr().out
    ceiling = float(re.search(r"method=binary-search p=1 .*ceiling_step_accuracy=([\d.]+) ", printed).group(1))
    assert ceiling < 1.0
    assert "miss method=binary-search" in printed and "dropped_at: " in printed
    misses = (tmp_path / "misses.md").read_text()
    assert "## binary-search" in misses and ("final pick among steps" in misses or "without step" in misses)


def test_p_runs_report_accuracy_against_p(whowhen, tmp_path, capsys):
    script = _bench_ceiling()
    script.main(
        ["--p", "1.0,0.5", "--seeds", "0,1", "--methods", "all-at-once", "--limit", "3", "--data", str(whowhen), "--out", str(tmp_path)]
    )
    out = capsys.readouterr().out
    assert "method=all-at-once p=0.5 " in out and "ci95=" in out
    from localfa.bench.report_dir import write_any_report

    md, html_path = write_any_report(tmp_path)  # `localfa report OUT` on the parent of the p-runs
    assert "| all-at-once | 0.5 |" in md and "| all-at-once | 1 |" in md
    assert "Step accuracy against p" in html_path.read_text()


# ---- what the oracle cannot answer ---------------------------------------------------------------


class _Unregistered(BaseMethod):
    name = "unregistered-probe"

    def run(self, ctx: MethodContext) -> Program:
        req = ctx.request("probe/ask", [{"role": "user", "content": "?"}], Grammar.choice(["a", "b"]), Sampling(max_tokens=2))
        (resp,) = yield [req]
        return ctx.diagnosis(self.name, step=0, reasoning=resp.value)


def test_a_request_kind_with_no_policy_is_that_traces_error_record():
    traces = _synthetic()
    results = _run(_Unregistered(), traces)
    assert all(d.error and "no oracle policy answers request key 'probe/ask'" in d.error for d in results)
    assert all(d.error_kind == "final" for d in results)


def test_an_unlabelled_trace_is_an_error_record_naming_it():
    trace = synthetic_trace(5, "syn/unlabelled", "step {i}")
    trace.labels = None
    (d,) = _run("all-at-once", [trace])
    assert d.error and "syn/unlabelled has no labels" in d.error


def test_wrappers_forward_the_trace(tmp_path):
    traces = _synthetic()
    cached = CachingEngine(OracleEngine(0.5), ResponseCache(tmp_path / "r.sqlite"), "oracle-test")
    first = [d.step for d in _run("binary-search", traces, engine=cached)]
    again = [d.step for d in _run("binary-search", traces, engine=cached)]
    assert first == again and cached.hits > 0
    faulty = FaultyEngine(OracleEngine(1.0), FaultPlan(0.0))
    assert [d.step for d in _run("all-at-once", traces, engine=faulty)] == [t.labels.mistake_step for t in traces]


# ---- the commands ------------------------------------------------------------------------------


def test_bench_and_diagnose_take_the_oracle_with_its_p(whowhen, tmp_path):
    import json
    import subprocess
    import sys

    localfa = [sys.executable, "-m", "localfa"]
    data = tmp_path / "data"
    (data / "algorithm-generated").mkdir(parents=True)
    for n in (1, 2, 3):
        (data / "algorithm-generated" / f"{n}.json").write_text((whowhen / "algorithm-generated" / f"{n}.json").read_text())
    run = tmp_path / "run"
    cmd = [
        *localfa,
        "bench",
        str(data),
        "--methods",
        "all-at-once,binary-search",
        "--engine",
        "oracle:p=0.7",
        "--seeds",
        "0,1",
        "--out",
        str(run),
    ]
    p = subprocess.run([*cmd, "--no-progress"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert json.loads((run / "manifest.json").read_text())["engine"]["p"] == 0.7
    again = subprocess.run([*cmd, "--no-progress"], capture_output=True, text=True, timeout=300)  # resumes: same oracle
    assert again.returncode == 0 and "0 new records" in again.stderr, again.stderr
    d = subprocess.run(
        [
            *localfa,
            "diagnose",
            str(data / "algorithm-generated" / "2.json"),
            "--engine",
            "oracle",
            "--method",
            "all-at-once",
            "--quiet",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert d.returncode == 0, d.stderr
    record = json.loads(d.stdout)
    assert record["step"] == record["label"]["mistake_step"]


# Methods that only score prompts (no answer is asked): the oracle gives them its score stand-in
# (`localfa.engine.scoring.stand_in_answer`), a measurement with no honest "answer" to check, so
# they must run without error but need not find the labelled step (prism cannot name the last
# step by design: its candidates precede a symptom).
SCORED_ONLY = {"prism"}


def test_every_registered_method_has_a_policy_and_its_ceiling_on_synthetic_runs():
    """Every method in the registry runs on the oracle (ensembles through their members' keys);
    each that calls a model finds the labelled step at p = 1."""

    traces = _synthetic()
    for name in sorted(METHODS):
        for t, d in zip(traces, _run(name, traces)):
            assert d.error is None, f"{name} on {t.id}: {d.error}"
            if d.usage["calls"] and name not in SCORED_ONLY:
                assert d.step == t.labels.mistake_step, (name, t.id, d.step)


def test_a_policy_answer_outside_the_grammar_or_a_policy_bug_is_an_error_record_naming_it():
    from localfa.oracle.policy import Policy, Rule
    from localfa.oracle.registry import Policies

    def outside(ask):
        return "c"  # the grammar admits "a" or "b"

    def broken(ask):
        raise KeyError("no such field")

    traces = _synthetic()[:1]
    for rule, expected in (
        (Rule("ask", r"probe/ask", outside, outside), "does not satisfy grammar"),
        (Rule("ask", r"probe/ask", broken, broken), "rule 'ask'"),
    ):
        engine = OracleEngine(1.0, policies=Policies({"probe": ("tests:PROBE", Policy([rule]))}, ()))
        (d,) = _run(_Unregistered(), traces, engine=engine)
        assert d.error and expected in d.error, d.error

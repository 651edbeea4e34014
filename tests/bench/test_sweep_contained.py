"""Issue 25 on one host: poison units are contained, one record wins everywhere, trace ids never
move, lone surrogates are repaired at load, memory stays small, and the run's lock comes before
any engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from localfa.bench.driver import run_units_sweep
from localfa.bench.executors import LocalExecutor
from localfa.bench.report import load_run
from localfa.bench.shard import Shard
from localfa.bench.store import Kept, ResultStore, StoreError, read_records, read_run_records
from localfa.bench.sweep import SweepError, load_traces, parse_methods, run_sweep
from localfa.bench.units import Unit, run_units
from localfa.diagnosis import Diagnosis
from localfa.engine.errors import CacheError, EngineUnavailableError
from localfa.engine.scripted import ScriptedEngine, scripted_default
from localfa.methods.runner import Job, run_jobs
from localfa.results import ResultRecord
from localfa.traces.load import load_trace, repair_note
from localfa.view.records import read_results
from tests.bench.test_sweep import write_whowhen
from tests.bench.test_sweep_trust import messages_trace

POISON = "Task 2?"  # the question of each subset's trace 2 (write_whowhen)


class _PoisonSession:
    """A session that cannot take a request mentioning POISON: raises in `submit`, as a tokenizer
    or chat-template error does in the vLLM session."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def submit(self, requests: list[Any]) -> list[int]:
        if any(POISON in m["content"] for r in requests for m in r.messages):
            raise ValueError("chat template: cannot render this message")
        return self.inner.submit(requests)

    def wait(self) -> list[tuple[int, Any]]:
        return self.inner.wait()

    def pending(self) -> int:
        return self.inner.pending()


class PoisonEngine(ScriptedEngine):
    def __init__(self) -> None:
        super().__init__(scripted_default()._fn)

    def session(self) -> Any:
        return _PoisonSession(super().session())


# ---- 2: poison units ---------------------------------------------------------------------------


def test_a_session_that_refuses_a_request_fails_only_that_unit(tmp_path):
    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=3)])
    res = run_sweep(tmp_path / "run", traces, parse_methods("all-at-once,binary-search"), [0, 1], PoisonEngine(), progress=False)
    recs = res.records
    assert res.written == len(recs) == 6 * 2 * 2
    bad = {r.trace for r in recs if r.error}
    assert bad == {"whowhen/algorithm-generated/2", "whowhen/hand-crafted/2"}
    assert all(r.error.startswith("ValueError: chat template") and r.error_kind == "final" for r in recs if r.error)


def _program(value: Any) -> Any:
    if False:  # pragma: no cover - a generator that asks nothing
        yield []
    return value


def test_a_program_returning_no_diagnosis_is_its_error_record():
    ok = Diagnosis(trace="b", method="m", seed=0, step=1)

    def on_error(detail: str) -> Diagnosis:
        return Diagnosis(trace="a", method="m", seed=0, stop_reason="error", error=detail)

    jobs = [Job("a", _program(None), on_error), Job("b", _program(ok), on_error)]
    got = dict(run_jobs(scripted_default(), jobs))
    assert got["b"].step == 1 and got["b"].error is None
    assert got["a"].error.startswith("TypeError: a: the program returned NoneType, not a Diagnosis")


def test_run_units_takes_none_as_nothing_yet_and_keeps_going(tmp_path):
    """A feed that says "nothing yet" (a worker's empty inbox) does not end the run."""
    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=1)])
    units = [Unit(t, parse_methods("all-at-once")[0], "none", 0) for t in traces]
    items = [None, (0, units[0]), None, None, (1, units[1])]
    got = list(run_units(scripted_default(), iter(items), 4))
    assert sorted(i for i, _ in got) == [0, 1] and not [r for _, r in got if r.error]


class _BrokenCache:
    """A cache whose reads fail for one request (a damaged cache file)."""

    path = Path("/nonexistent/responses.sqlite")

    def get(self, key: str) -> Any:
        raise CacheError("response cache: cannot read: disk I/O error")

    def put_many(self, items: Any) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_cache_error_is_that_requests_engine_error(tmp_path):
    from localfa.engine.cache import CachingEngine

    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=1)])
    engine = CachingEngine(scripted_default(), _BrokenCache(), "id")  # type: ignore[arg-type]
    res = run_sweep(tmp_path / "run", traces, parse_methods("all-at-once,random"), [0], engine, progress=False)
    recs = {r.key[:2]: r for r in res.records}
    assert len(recs) == 4
    for (_trace, method), r in recs.items():
        if method == "random":  # asks nothing: no cache involved
            assert r.error is None
        else:
            assert r.error.startswith("CacheError: response cache: cannot read") and r.error_kind == "transient"


# ---- 3: one record wins everywhere ---------------------------------------------------------------


def flaky(marker: str | None) -> ScriptedEngine:
    base = scripted_default()

    def answer(req: Any) -> Any:
        if marker and any(marker in m["content"] for m in req.messages):
            raise EngineUnavailableError("http://127.0.0.1:9/v1: connection refused")
        return base._fn(req)  # type: ignore[misc]

    return ScriptedEngine(answer)


def test_a_sharded_run_resumed_unsharded_reports_and_shows_the_retry(tmp_path):
    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=2)])
    methods = parse_methods("all-at-once")
    run = tmp_path / "run"
    for i in (1, 2):  # every shard fails the traces asking "Task 1?" (a server was down)
        run_units_sweep(run, traces, methods, [0], LocalExecutor(flaky("Task 1?")), shard=Shard(i, 2), progress=False)
    assert sum(1 for r in read_run_records(run) if r.error) == 2
    assert len(read_results(run)) == 4  # `view RUN_DIR` reads a run that has only shard files
    again = run_sweep(run, traces, methods, [0], flaky(None), progress=False)  # unsharded resume
    assert (again.retried, again.written) == (2, 2)
    records, _ = load_run(run)
    assert len(records) == 4 and not [r for r in records if r.error]  # no stale shard error in the report
    shown = read_results(run)
    assert len(shown) == 4 and not [r for r in shown if r["error"]]  # each retried unit once, its success
    assert len((run / "results.jsonl").read_text().splitlines()) == 2


def test_a_success_beats_an_error_whatever_file_or_order(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    key = {"trace": "t", "method": "m", "budget": "none", "seed": 0}
    ok = ResultRecord(**key, step=1, finished_at="2026-01-01T00:00:00+0000")
    late_error = ResultRecord(**key, error="EngineError: HTTP 503", finished_at="2026-01-02T00:00:00+0000")
    (run / "results.jsonl").write_text(ok.to_line())
    (run / "results.shard-1-of-2.jsonl").write_text(late_error.to_line())
    assert [r.step for r in read_run_records(run)] == [1]
    with ResultStore(run) as st:  # resume decides the same way
        assert st.get(("t", "m", "none", 0)).error is None
    # among equals the later finished_at wins, whatever the line order
    early = ResultRecord(**key, step=2, finished_at="2026-01-03T01:00:00+0100")  # = 00:00 UTC
    late = ResultRecord(**key, step=3, finished_at="2026-01-03T00:30:00+0000")
    (run / "x.jsonl").write_text(late.to_line() + early.to_line())
    assert [r.step for r in read_records(run / "x.jsonl")] == [3]


# ---- 4: trace ids never move -------------------------------------------------------------------


def test_adding_a_file_with_the_same_name_renames_nothing(tmp_path):
    ds = tmp_path / "ds"
    messages_trace(ds / "a" / "run1.json", "alpha")
    run = tmp_path / "run"
    first = run_sweep(run, load_traces([ds]), parse_methods("random"), [0], scripted_default(), progress=False)
    assert [r.trace for r in first.records] == ["a/run1"]
    messages_trace(ds / "b" / "run1.json", "beta")
    again = run_sweep(run, load_traces([ds]), parse_methods("random"), [0], scripted_default(), progress=False)
    assert (again.skipped, again.written) == (1, 1)  # a/run1 kept its id (and its record)
    records, _ = load_run(run)
    assert sorted(r.trace for r in records) == ["a/run1", "b/run1"]


def test_a_run_refuses_a_dataset_whose_ids_changed(tmp_path):
    ds = tmp_path / "ds"
    f = messages_trace(ds / "a" / "run1.json", "alpha")
    run = tmp_path / "run"
    run_sweep(run, load_traces([ds]), parse_methods("random"), [0], scripted_default(), progress=False)
    with pytest.raises(SweepError) as err:  # the same file, given from another root: id run1, not a/run1
        run_sweep(run, load_traces([ds / "a"]), parse_methods("random"), [0], scripted_default(), progress=False)
    msg = str(err.value)
    assert "trace ids changed" in msg and f"{f.resolve()} was 'a/run1', now 'run1'" in msg
    assert len(read_records(run / "results.jsonl")) == 1


def test_who_and_when_ids_stay_stable(whowhen, tmp_path):
    traces = load_traces([whowhen / "hand-crafted"])
    assert "whowhen/hand-crafted/12" in {t.id for t in traces}
    assert {t.id for t in load_traces([whowhen])} >= {t.id for t in traces}


# ---- 9: lone surrogates --------------------------------------------------------------------------


def test_a_lone_surrogate_is_repaired_at_load_and_the_sweep_runs(tmp_path):
    path = tmp_path / "cut.json"
    # what a stack that cut an emoji in half writes: valid JSON, no valid text
    path.write_text('[{"role": "user", "content": "task"}, {"role": "assistant", "name": "Coder", "content": "done \\ud83d"}]')
    trace = load_trace(path)
    assert trace.steps[1].content == "done \ufffd"
    assert repair_note(trace) == f"{path}: step 1: a lone UTF-16 surrogate (half of an emoji cut by the writer) was replaced by U+FFFD"
    warned: list[str] = []
    traces = load_traces([path], warn=warned.append)
    assert warned == [f"warning: {repair_note(trace)}"]
    res = run_sweep(tmp_path / "run", traces, parse_methods("all-at-once"), [0], scripted_default(), progress=False)
    assert res.written == 1 and res.records[0].error is None
    assert "\\ud83d" not in (tmp_path / "run" / "results.jsonl").read_text()
    pair = tmp_path / "pair.json"  # a whole emoji written as an escaped pair is not touched
    pair.write_text('[{"role": "user", "content": "task \\ud83d\\ude00"}, {"role": "assistant", "name": "A", "content": "x"}]')
    assert load_trace(pair).steps[0].content == "task \U0001f600" and repair_note(load_trace(pair)) is None


# ---- 10: memory and the lock -------------------------------------------------------------------


def test_the_driver_keeps_no_records_in_memory(tmp_path):
    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=2)])
    res = run_sweep(tmp_path / "run", traces, parse_methods("all-at-once,random"), [0, 1], scripted_default(), progress=False)
    assert not [v for v in vars(res).values() if isinstance(v, list) and v and isinstance(v[0], ResultRecord)]
    assert len(res.written_keys) == res.written == 16 and len(res.records) == 16  # read back from disk on demand
    with ResultStore(tmp_path / "run") as st:
        kept = [k for _, k in st.items()]
    assert len(kept) == 16 and all(isinstance(k, Kept) for k in kept)


def test_no_engine_starts_for_a_run_another_sweep_holds(tmp_path):
    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=1)])
    built: list[int] = []
    holder = ResultStore(tmp_path / "run").open()
    try:
        with pytest.raises(StoreError, match="another sweep"):
            run_units_sweep(
                tmp_path / "run", traces, parse_methods("random"), [0], LocalExecutor(build=lambda: built.append(1)), progress=False
            )
    finally:
        holder.close()
    assert built == []  # the engine (minutes to load) was never built
    done = run_units_sweep(tmp_path / "run", traces, parse_methods("random"), [0], LocalExecutor(build=scripted_default), progress=False)
    assert done.written == 2

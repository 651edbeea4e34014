"""Every registered mutant is killed on the rule it expects, and the `--mutants` machinery reports
kills and survivors truthfully.

The kill of each registered mutant is asserted on a small fixed subset of dev traces (its own
`Mutant.traces`, else `DEFAULT_TRACES`), so the test fits CI time on two cores; the whole dev
split is the benchmark's (`scripts/bench_ceiling.py --mutants`).
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import re
import zlib
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache
from pathlib import Path

import pytest

from localfa.bench.mutant_sweep import measure, run_mutants, table_lines
from localfa.bench.sweep import load_traces
from localfa.methods import baselines
from localfa.oracle.mutants import Figures, Mutant, killed_by, patched, registered_mutants, unloadable_mutants
from localfa.traces.model import Trace

REPO = Path(__file__).resolve().parents[2]
DEFAULT_TRACES = (
    "algorithm-generated/1",
    "algorithm-generated/2",
    "algorithm-generated/3",
    "algorithm-generated/4",
    "hand-crafted/1",
    "hand-crafted/2",
    "hand-crafted/3",
)
REGISTERED = [(method, mutant) for method, found in registered_mutants().items() for mutant in found]


@lru_cache(maxsize=1)
def _dev(root: str) -> dict[str, Trace]:
    return {t.id.split("/", 1)[1]: t for t in load_traces([root])}


def _subset(whowhen: Path, ids: tuple[str, ...]) -> list[Trace]:
    dev = _dev(str(whowhen))
    missing = [i for i in ids if i not in dev]
    assert not missing, f"no dev traces {missing} (ids look like {DEFAULT_TRACES[0]!r})"
    return [dev[i] for i in ids if dev[i].label_answerable()]  # a label on an executor's output no method may answer


# One sweep to measure: (method, mutant name or None for intact, trace ids, noisy, long).
Job = tuple[str, "str | None", tuple[str, ...], bool, bool]


def _job(method: str, mutant: Mutant | None, of: Mutant) -> Job:
    """The sweep that measures `mutant` (None: the intact method) on the traces and rules `of` needs."""
    return (method, None if mutant is None else mutant.name, of.traces or DEFAULT_TRACES, of.expect == "p07", of.long)


def _measure(args: tuple[str, str, Job]) -> Figures | str:
    """One variant's figures, in a worker process (its mutant looked up by name and patched there);
    a failure comes back as text for its own test to raise."""
    root, out, (method, name, ids, noisy, long) = args
    try:
        mutant = None if name is None else next(m for m in registered_mutants()[method] if m.name == name)
        traces = _subset(Path(root), ids)
        where = Path(out) / f"{method}-{name or 'intact'}-{zlib.crc32(repr((ids, noisy, long)).encode()):08x}"
        return measure(where, traces, method, mutant, noisy=noisy, long=long).figures
    except Exception as exc:  # noqa: BLE001 - reported by the test that needs it
        return f"{type(exc).__name__}: {exc}"


@pytest.fixture(scope="module")
def measured(request, whowhen, tmp_path_factory) -> dict[Job, Figures | str]:
    """Every selected mutant and the intact runs they are judged against, measured once, two at a
    time in spawned processes (the oracle is single-threaded Python; CI has two cores). Pytest runs
    tests one after another, so nothing else competes with the two workers."""
    selected = {item.callspec.params["mutant"].name for item in request.session.items if item.originalname == _KILL_TEST}
    jobs: dict[Job, None] = {}
    for method, mutant in REGISTERED:
        if mutant.name in selected:
            jobs[_job(method, None, mutant)] = None
            jobs[_job(method, mutant, mutant)] = None
    out = tmp_path_factory.mktemp("mutants")
    with ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn")) as pool:
        figures = pool.map(_measure, [(str(whowhen), str(out), job) for job in jobs], chunksize=1)
        return dict(zip(jobs, figures))


def _figures(measured: dict[Job, Figures | str], job: Job) -> Figures:
    got = measured[job]
    if isinstance(got, str):
        raise AssertionError(f"measuring {job} failed: {got}")
    return got


_KILL_TEST = "test_each_registered_mutant_is_killed_on_its_expected_rule"


@pytest.mark.parametrize("method,mutant", REGISTERED, ids=[f"{m}-{x.name}" for m, x in REGISTERED])
def test_each_registered_mutant_is_killed_on_its_expected_rule(method: str, mutant: Mutant, measured):
    ids = mutant.traces or DEFAULT_TRACES
    intact = _figures(measured, _job(method, None, mutant))
    assert intact.ceiling == pytest.approx(1.0), f"{method} intact misses at p = 1 on {ids}"
    if mutant.long:
        assert intact.long_ceiling == pytest.approx(1.0), f"{method} intact misses at p = 1 on long runs grown from {ids}"
    broken = _figures(measured, _job(method, mutant, mutant))
    rules = killed_by(intact, broken)
    assert mutant.expect in rules, (
        f"{method} mutant {mutant.name} ({mutant.stage}) not killed by {mutant.expect}: {broken} vs intact {intact}"
    )


def test_every_method_with_mutants_loads():
    """One test, never skipped: a parameter per unloadable method was an empty set, so a skip, when all loaded."""
    assert unloadable_mutants() == {}, "their class or their oracle mutants do not load"
    assert {"drift", "falat", "safari"} <= {method for method, _ in REGISTERED}


# ---- the machinery, on a baseline with a mutant of the test's own ----------------------------------


def _drop_last_step_of_each_view():
    real = baselines.TraceView.steps

    def steps(self, lo, hi, cap):
        return real(self, lo, hi, cap)[:-1] if hi > lo else real(self, lo, hi, cap)

    return patched((baselines.TraceView, "steps", steps))


TEST_MUTANTS = {
    "binary-search": (
        Mutant("drop-last-step", "each view loses its last step", "p1", _drop_last_step_of_each_view()),
        Mutant("no-op", "changes nothing (must survive)", "p1"),
    )
}


def test_run_mutants_kills_a_break_and_lets_a_no_op_survive(whowhen, tmp_path):
    traces = _subset(whowhen, DEFAULT_TRACES)
    rows = run_mutants(tmp_path, traces, TEST_MUTANTS)
    by_name = {r.name: r for r in rows}
    assert by_name["intact"].figures.ceiling == 1.0 and by_name["intact"].figures.noisy_accuracy is not None
    assert "p1" in by_name["drop-last-step"].killed and by_name["no-op"].killed == []
    assert by_name["no-op"].figures == by_name["intact"].figures  # same traces, seeds and code: same figures
    assert (tmp_path / "binary-search" / "drop-last-step" / "p=1" / "results.jsonl").exists()
    assert (tmp_path / "binary-search" / "intact" / "p=0.7-real" / "results.jsonl").exists()
    text = "\n".join(table_lines(rows))
    assert "method=binary-search mutants_killed=1/2 ceiling_step_accuracy=1.000" in text
    assert re.search(r"no-op .* NOT KILLED", text)


def test_bench_ceiling_mutants_prints_the_table(whowhen, tmp_path, capsys, monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_ceiling", REPO / "scripts" / "bench_ceiling.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.setattr("localfa.oracle.mutants.registered_mutants", lambda: TEST_MUTANTS)
    args = ["--mutants", "--methods", "binary-search", "--limit", "3", "--data", str(whowhen), "--out", str(tmp_path)]
    assert script.main(args) == 0
    printed = capsys.readouterr().out
    assert "method=binary-search mutants_killed=1/2 ceiling_step_accuracy=1.000" in printed
    assert re.search(r"binary-search\s+drop-last-step\s+p1\s+0\.\d+ ", printed)
    assert script.main(["--mutants", "--methods", "no-such-method", "--data", str(whowhen)]) == 2

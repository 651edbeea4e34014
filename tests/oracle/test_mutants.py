"""Every registered mutant is killed on the rule it expects, and the `--mutants` machinery reports
kills and survivors truthfully.

The kill of each registered mutant is asserted on a small fixed subset of dev traces (its own
`Mutant.traces`, else `DEFAULT_TRACES`), so the test fits CI time on two cores; the whole dev
split is the benchmark's (`scripts/bench_ceiling.py --mutants`).
"""

from __future__ import annotations

import importlib.util
import re
import zlib
from functools import lru_cache
from pathlib import Path

import pytest

from localfa.bench.mutant_sweep import Job, Measured, measure_jobs, run_mutants, table_lines
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


# One variant to measure: (method, mutant name or None for intact, trace ids, noisy, long).
Key = tuple[str, "str | None", tuple[str, ...], bool, bool]


def _key(method: str, mutant: Mutant | None, of: Mutant) -> Key:
    """The sweep that measures `mutant` (None: the intact method) on the traces and rules `of` needs."""
    return (method, None if mutant is None else mutant.name, of.traces or DEFAULT_TRACES, of.expect == "p07", of.long)


def _job(whowhen: Path, key: Key) -> Job:
    method, name, ids, noisy, long = key
    subdir = f"{zlib.crc32(repr((ids, noisy, long)).encode()):08x}"
    return Job(method, name, tuple(_subset(whowhen, ids)), noisy=noisy, long=long, subdir=subdir)


@pytest.fixture(scope="module")
def measured(request, whowhen, tmp_path_factory) -> dict[Key, Measured]:
    """Every selected mutant and the intact runs they are judged against, measured once, two at a
    time in spawned processes (the oracle is single-threaded Python; CI has two cores). This module
    is one pytest-xdist group (tests/conftest.py `group_for_workers`), so the fixture is built once,
    in one worker, while the other worker runs other modules' tests (and under `.ci/run` mypy may
    still be running)."""
    selected = {item.callspec.params["mutant"].name for item in request.session.items if item.originalname == _KILL_TEST}
    keys: dict[Key, None] = {}
    for method, mutant in REGISTERED:
        if mutant.name in selected:
            keys[_key(method, None, mutant)] = None
            keys[_key(method, mutant, mutant)] = None
    jobs = [_job(whowhen, key) for key in keys]
    return dict(zip(keys, measure_jobs(tmp_path_factory.mktemp("mutants"), jobs, workers=2)))


def _figures(measured: dict[Key, Measured], key: Key) -> Figures:
    got = measured[key]
    if got.figures is None:
        raise AssertionError(f"measuring {key} failed: {got.failure}")
    return got.figures


_KILL_TEST = "test_each_registered_mutant_is_killed_on_its_expected_rule"


@pytest.mark.parametrize("method,mutant", REGISTERED, ids=[f"{m}-{x.name}" for m, x in REGISTERED])
def test_each_registered_mutant_is_killed_on_its_expected_rule(method: str, mutant: Mutant, measured):
    ids = mutant.traces or DEFAULT_TRACES
    intact = _figures(measured, _key(method, None, mutant))
    assert intact.ceiling == pytest.approx(1.0), f"{method} intact misses at p = 1 on {ids}"
    if mutant.long:
        assert intact.long_ceiling == pytest.approx(1.0), f"{method} intact misses at p = 1 on long runs grown from {ids}"
    broken = _figures(measured, _key(method, mutant, mutant))
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
    args = ["--mutants", "--methods", "binary-search", "--limit", "3", "--data", str(whowhen), "--out", str(tmp_path), "--workers", "1"]
    assert script.main(args) == 0
    printed = capsys.readouterr().out
    assert "method=binary-search mutants_killed=1/2 ceiling_step_accuracy=1.000" in printed
    assert re.search(r"binary-search\s+drop-last-step\s+p1\s+0\.\d+ ", printed)
    assert script.main(["--mutants", "--methods", "no-such-method", "--data", str(whowhen)]) == 2


def test_variants_measured_in_two_processes_are_what_one_process_measures(whowhen, tmp_path):
    """`--workers`: a worker process finds a registered mutant by name and measures what this process does."""
    traces = _subset(whowhen, DEFAULT_TRACES[:3])
    mutants = {"all-at-once": registered_mutants()["all-at-once"][:1]}
    here = run_mutants(tmp_path / "here", traces, mutants, noisy=False)
    there = run_mutants(tmp_path / "there", traces, mutants, noisy=False, workers=2)
    assert [(r.name, r.figures, r.killed) for r in there] == [(r.name, r.figures, r.killed) for r in here]
    assert here[1].killed  # the content-blind mutant is killed, so the figures compared differ
    assert (tmp_path / "there" / "all-at-once" / here[1].name / "p=1" / "results.jsonl").exists()
    unregistered = {"binary-search": TEST_MUTANTS["binary-search"][:1]}
    with pytest.raises(ValueError, match="no registered mutant 'drop-last-step'"):
        run_mutants(tmp_path / "refused", traces, unregistered, noisy=False, workers=2)

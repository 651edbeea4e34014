"""The realistic error model (`oracle:p=P:noise=real`): per-trace difficulty with mean p, wrong
steps biased toward where judges err, reproducible and independent of batching; iid unchanged."""

from __future__ import annotations

import random
import statistics
from pathlib import Path

import pytest

from localfa.api import diagnose_iter
from localfa.engine.errors import EngineError
from localfa.methods.registry import get_method
from localfa.oracle.engine import OracleEngine, parse_params
from localfa.oracle.noise import NoiseModel, PromptView, adopter_step, realistic_wrong_step, wrong_step_weights
from localfa.traces.load import iter_trace_files, load_trace


def test_engine_spec_takes_the_noise_model():
    params = parse_params("oracle:p=0.7:noise=real:spread=2")
    assert params["noise"] == "real" and params["spread"] == 2.0 and params["p"] == 0.7
    assert parse_params("oracle:p=0.7")["noise"] == "iid"
    assert parse_params("oracle:noise=real:spread=inf")["spread"] == float("inf")
    for bad in ("oracle:noise=gauss", "oracle:spread=0", "oracle:spread=x"):
        with pytest.raises(EngineError):
            parse_params(bad)
    real = OracleEngine(0.7, noise="real")
    assert real.describe()["noise"] == "real" and "noise=real" in real.model_info["identity"]
    assert "noise" not in OracleEngine(0.7).model_info["identity"]  # iid keeps its old identity (caches stay valid)


def test_difficulty_is_per_trace_with_mean_p_and_spread_sets_its_width():
    ids = [f"t/{i}" for i in range(3000)]
    wide, narrow = NoiseModel("real", 0.7, 2.0), NoiseModel("real", 0.7, 50.0)
    hw, hn = [wide.honesty(i) for i in ids], [narrow.honesty(i) for i in ids]
    assert abs(statistics.mean(hw) - 0.7) < 0.02 and abs(statistics.mean(hn) - 0.7) < 0.02
    assert statistics.pstdev(hw) > 2 * statistics.pstdev(hn)
    assert wide.honesty("t/1") == wide.honesty("t/1")  # drawn once per trace
    assert NoiseModel("iid", 0.7).honesty("t/1") == 0.7 and NoiseModel("real", 1.0).honesty("t/1") == 1.0


def test_wrong_steps_favour_adjacent_early_agent_and_last_steps():
    """Weights read from what the prompt shows (`PromptView`): the fault where the prompt shows it
    (step 4, by Coder, who acts at 1, 4, 7, ...), the agents beside each shown step."""
    agents = {i: "Coder" if i % 3 == 1 else f"Agent{i % 3}" for i in range(30)}
    view = PromptView(tuple(range(30)), fault=4, agents=agents, labelled_agent="Coder")
    pool = [s for s in range(30) if s != 4]
    w = dict(zip(pool, wrong_step_weights(view, pool)))
    assert adopter_step(view) == 5
    assert w[3] > w[12] and w[5] > w[3]  # adjacent; the adopter more still
    assert w[1] > w[2]  # the labelled agent's first step
    assert w[29] > w[28]  # the last step
    assert w[10] > w[28]  # earlier over later, all else equal (both the labelled agent's)
    rng = random.Random(0)
    drawn = [realistic_wrong_step(view, range(30), rng, avoid=4) for _ in range(2000)]
    assert 4 not in drawn and set(drawn) <= set(pool)
    assert drawn.count(5) > drawn.count(16) * 2  # the adopter over a far step of the labelled agent
    assert realistic_wrong_step(view, [4], rng, avoid=4) == 4  # nothing else to name


def test_a_prompt_that_hides_the_fault_gives_the_error_model_nothing_to_aim_near():
    """Without the fault shown, no step gets the adjacency or adopter weight: the label's position
    cannot reach the error model."""
    agents = {i: "A" if i % 2 else "B" for i in range(20)}
    hidden = PromptView(tuple(range(20)), fault=None, agents=agents, labelled_agent=None)
    w = wrong_step_weights(hidden, list(range(20)))
    assert adopter_step(hidden) is None
    assert all(a >= b for a, b in zip(w[:-2], w[1:-1]))  # only earliness (and the last step) move it


def _dev(whowhen: Path) -> list:
    files = []
    for sub in ("algorithm-generated", "hand-crafted"):
        files += sorted(iter_trace_files([whowhen / sub]), key=lambda f: int(f.stem))[:10]
    return [load_trace(f) for f in files]


def _hits(engine, traces, seed: int, concurrency: int = 16) -> list[int]:
    out = dict(diagnose_iter(engine, get_method("all-at-once"), traces, seed=seed, concurrency=concurrency))
    return [int(out[i].step == t.labels.mistake_step) for i, t in enumerate(traces)]


def test_real_noise_correlates_errors_within_a_trace_and_is_reproducible(whowhen):
    traces = _dev(whowhen)
    seeds = range(12)
    real = OracleEngine(0.7, noise="real", spread=2.0)
    iid = OracleEngine(0.7)
    per_trace_real = [statistics.mean(col) for col in zip(*(_hits(real, traces, s) for s in seeds))]
    per_trace_iid = [statistics.mean(col) for col in zip(*(_hits(iid, traces, s) for s in seeds))]
    assert 0.45 < statistics.mean(per_trace_real) < 0.9
    # Hard traces stay hard across calls: per-trace hit rates spread far wider than under iid.
    assert statistics.pstdev(per_trace_real) > 1.5 * statistics.pstdev(per_trace_iid)
    assert _hits(real, traces, 3) == _hits(OracleEngine(0.7, noise="real", spread=2.0), traces, 3, concurrency=1)


def test_policies_get_the_noise_through_wrong_step(whowhen):
    """A policy's wrong step (`ask.wrong_step(pool, honest)`) follows the model: under iid it stays
    within 3 of where the prompt shows the fault, under real it reaches the early and last steps."""
    traces = [t for t in _dev(whowhen) if len(t.steps) > 20]
    assert traces
    far = {"iid": 0, "real": 0}
    for noise in far:
        engine = OracleEngine(0.0, noise=noise)
        for seed in range(4):
            out = dict(diagnose_iter(engine, get_method("all-at-once"), traces, seed=seed, concurrency=16))
            far[noise] += sum(abs(out[i].step - t.labels.mistake_step) > 3 for i, t in enumerate(traces))
    assert far["iid"] == 0 and far["real"] > 0


def test_length_makes_long_runs_harder_and_leaves_short_ones_at_p():
    model = NoiseModel("real", 0.8, float("inf"), length=0.5)
    assert model.mean_honesty(8) == 0.8 and model.honesty("t", 10) == 0.8
    assert model.mean_honesty(40) == pytest.approx(0.8 * (10 / 40) ** 0.5)
    assert NoiseModel("real", 0.8).mean_honesty(100) == 0.8  # no length effect by default
    assert parse_params("oracle:noise=real:length=0.5")["length"] == 0.5
    with pytest.raises(EngineError):
        parse_params("oracle:length=-1")

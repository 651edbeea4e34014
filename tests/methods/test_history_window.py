"""Step-by-step on a run whose log outgrows the window: the prompt shows the latest steps that
fit (`localfa.methods.history_window`), every prompt fits, the fault is still asked about, and
the bound is recorded."""

from __future__ import annotations

from localfa.api import diagnose_iter
from localfa.engine.factory import make_engine
from localfa.methods.history_window import HistoryWindow
from localfa.traces.longruns import lengthen
from tests.bench.test_longruns import small_run


def test_the_start_stays_while_the_log_fits_then_jumps_to_half_the_room():
    w = HistoryWindow([10] * 100, room=100)
    assert [w.first_shown(i) for i in range(10)] == [0] * 10  # 10 steps of 10 tokens fill the room
    assert w.first_shown(10) == 6  # steps 6..10 take 50 tokens: half the room
    assert [w.first_shown(i) for i in range(11, 16)] == [6] * 5  # each prompt extends the one before
    assert w.first_shown(16) == 12
    assert w.jumps == [10, 16]
    assert w.bound()["jumps"] == 2
    assert HistoryWindow([10] * 5, room=100).bound() is None


def test_every_shown_range_fits_the_room_and_ends_at_the_asked_step():
    tokens = [(i * 7) % 23 + 1 for i in range(500)]
    w = HistoryWindow(tokens, room=120)
    for i in range(500):
        first = w.first_shown(i)
        assert first <= i and sum(tokens[first : i + 1]) <= 120


def test_step_by_step_on_a_run_past_the_window_fits_every_prompt_and_finds_the_fault():
    trace = lengthen(small_run(), 60_000)  # about 60k tokens at 4 characters a token, the fault half-way
    engine = make_engine("oracle:p=1:window=4096", say=lambda _: None)
    ((_, diag),) = list(diagnose_iter(engine, "step-by-step", [trace]))
    assert diag.error is None, diag.error  # was: the engine's ContextLengthError once the log outgrew 4096 tokens
    assert diag.step == trace.labels.mistake_step
    bound = diag.details["bounds_hit"]["history_window"]
    assert bound["jumps"] >= 1 and bound["room_tokens"] < 4096

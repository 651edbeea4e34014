"""Budget strings and the one resolver SAFARI and the baselines share (values computed by hand)."""

from __future__ import annotations

import pytest

from localfa.methods.budget import (
    CHARS_PER_TOKEN,
    Budget,
    BudgetError,
    limit_in_chars,
    measured_chars_per_token,
    parse_budget,
    resolve_budget,
)
from localfa.traces.lineview import LineView
from localfa.traces.model import Labels, Step, Trace


@pytest.mark.parametrize(
    ("text", "unit", "limit", "label"),
    [
        ("1.5k", "tokens", 1500, "1500"),
        ("25kt", "tokens", 25000, "25000"),
        ("25k", "tokens", 25000, "25000"),
        ("2M", "tokens", 2_000_000, "2000000"),
        ("100000c", "chars", 100000, "100000c"),
        ("1.5kc", "chars", 1500, "1500c"),
        ("12chars", "chars", 12, "12c"),
        ("300tokens", "tokens", 300, "300"),
    ],
)
def test_sizes(text, unit, limit, label):
    b = parse_budget(text)
    assert (b.unit, b.limit, b.scale, b.label) == (unit, limit, None, label)


@pytest.mark.parametrize("text", [None, "", "none", " none "])
def test_no_budget(text):
    assert parse_budget(text) == Budget() and parse_budget(text).label == "none"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("scale:0", "must be a positive number"),
        ("scale:-2", "must be a positive number"),
        ("scale:x", "must be a number"),
        ("-5k", "use none, 25k"),
        ("-1", "use none, 25k"),
        ("0", "at least 1 token"),
        ("0.4", "at least 1 token"),
        ("0c", "at least 1 char"),
        ("25kk", "use none, 25k"),
    ],
)
def test_refused(text, message):
    with pytest.raises(ValueError, match=message):
        parse_budget(text)


def _trace(labels: Labels | None) -> Trace:
    steps = [Step(index=i, agent="A", role="assistant", content="w " * 50) for i in range(10)]
    return Trace(id="b", source="b.json", format="messages", subset=None, task="t", agents=[], steps=steps, labels=labels)


def test_scale_is_the_fault_token_position_over_the_factor_with_no_floor():
    count = lambda s: len(s.split())  # noqa: E731
    t = _trace(Labels(mistake_step=6))
    # each record, {"step_id": N, "agent": "A", "role": "assistant", "content": "w w ... w "}, is
    # 7 words of keys and values, "w, 48 more w, then w"} and the newline: 58 words
    assert LineView(t, count_tokens=count).token_position_of_step(6) == 6 * 58
    b = resolve_budget("scale:2", t, count)
    assert (b.unit, b.limit, b.label) == ("tokens", 174, "scale:2")
    assert resolve_budget("scale:1000", t, count).limit == 1  # 348/1000 rounds down to 0: at least 1, no 512 floor
    assert resolve_budget("scale:1.5", t, count).limit == 232


def test_scale_falls_back_to_the_earliest_fault_and_refuses_without_one():
    count = lambda s: len(s.split())  # noqa: E731
    assert resolve_budget("scale:3", _trace(Labels(fault_steps=[8, 3])), count).limit == 3 * 58 // 3
    for labels in (None, Labels()):
        with pytest.raises(BudgetError, match="no labelled fault step"):
            resolve_budget("scale:2", _trace(labels), count)
    assert resolve_budget("25k", _trace(None)).limit == 25000  # only scale needs a label


def test_char_conversion_and_measured_ratio():
    assert CHARS_PER_TOKEN == 4.0
    assert limit_in_chars(parse_budget("1k")) == 4000
    assert limit_in_chars(parse_budget("1k"), 2.5) == 2500
    assert limit_in_chars(parse_budget("900c"), 2.5) == 900
    assert limit_in_chars(parse_budget("none")) is None
    assert measured_chars_per_token("abcd efgh", lambda s: 3) == 3.0
    assert measured_chars_per_token("abcd", None) == CHARS_PER_TOKEN
    assert measured_chars_per_token("   ", lambda s: 1) == CHARS_PER_TOKEN


def test_baselines_resolve_budgets_through_the_same_resolver():
    from localfa.methods.base import MethodContext
    from localfa.methods.baselines import budget_chars as _budget_chars

    count = lambda s: len(s.split())  # noqa: E731
    t = _trace(Labels(mistake_step=6))
    ctx = MethodContext(t, budget="scale:2", count_tokens=count)
    chars, note = _budget_chars(ctx, 100_000)
    ratio = measured_chars_per_token("\n".join(s.content for s in t.steps), count)
    assert chars == int(174 * ratio) and note == f"budget scale:2 -> {int(174 * ratio)} chars"
    with pytest.raises(BudgetError):
        _budget_chars(MethodContext(_trace(None), budget="scale:2", count_tokens=count), 100_000)

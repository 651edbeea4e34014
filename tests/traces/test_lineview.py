"""The line view: deterministic serialisation, read windows, and a search that never hangs."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from localfa.traces import LineView, load_trace
from localfa.traces.lineview import MAX_REPEAT, step_record, wrap_record
from localfa.traces.model import Step, Trace

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "traces"


def _trace(contents: list[str], **step_kw) -> Trace:
    steps = [Step(index=i, agent=f"Agent{i % 3}", role="assistant", content=c, **step_kw) for i, c in enumerate(contents)]
    return Trace(
        id="t",
        source="t",
        format="messages",
        subset=None,
        task="",
        agents=[],
        steps=steps,
        final_output=None,
        ground_truth=None,
        labels=None,
    )


def test_record_starts_with_step_id_agent_role() -> None:
    s = Step(
        index=7,
        agent="Orchestrator (-> WebSurfer)",
        role="assistant",
        content="go",
        span_id="ab",
        parent_span_id="cd",
        name="chat",
        tool_calls=[{"name": "f", "arguments": {"x": 1}}],
        observation="ok",
        input="[user] hi",
    )
    rec = step_record(s)
    assert rec.startswith('{"step_id": 7, "agent": "Orchestrator (-> WebSurfer)", "role": "assistant", ')
    assert list(json.loads(rec)) == [
        "step_id",
        "agent",
        "role",
        "name",
        "span_id",
        "parent_span_id",
        "content",
        "tool_calls",
        "input",
        "observation",
    ]
    bare = json.loads(step_record(Step(index=0, agent="a", role="user", content="")))
    assert list(bare) == ["step_id", "agent", "role", "content"]


def test_wrap_keeps_every_character_and_width() -> None:
    rec = step_record(Step(index=0, agent="a", role="user", content=("word " * 300) + "\n".join(["line"] * 200) + "x" * 1000))
    for width in (20, 80, 200):
        starts = wrap_record(rec, width)
        pieces = [rec[a:b] for a, b in zip(starts, starts[1:] + [len(rec)])]
        assert "".join(pieces) == rec
        assert all(0 < len(p) <= width for p in pieces)


def test_lines_are_deterministic_and_map_to_steps() -> None:
    t = _trace(["short", "y" * 1000, "z\n" * 300, ""])
    a, b = LineView(t, width=100), LineView(t, width=100)
    assert a.lines == b.lines
    assert a.total_lines == len(a.lines) and a.total_chars == sum(map(len, a.lines))
    assert all(len(line) <= 100 for line in a.lines)
    for step in range(4):
        first, last = a.lines_of_step(step)
        assert a.line_of_step(step) == first
        assert a.lines[first].startswith(f'{{"step_id": {step}, ')
        assert all(a.step_at_line(n) == step for n in range(first, last + 1))
        # the step's lines rebuild its record exactly
        assert json.loads("".join(a.lines[first : last + 1]))["content"] == t.steps[step].content
    assert a.line_of_step(0) == 0 and a.lines_of_step(3)[1] == a.total_lines - 1
    assert a.text() == "\n".join(a.lines)
    with pytest.raises(IndexError):
        a.line_of_step(4)
    with pytest.raises(IndexError):
        a.step_at_line(a.total_lines)
    with pytest.raises(IndexError):
        a.step_at_line(-1)


def test_tokens_and_positions() -> None:
    t = _trace(["a" * 400, "b" * 40, "c" * 4000])
    v = LineView(t)
    # Each record is 67 characters of '{"step_id": i, "agent": "Agenti", "role": "assistant", "content": "'
    # plus the content, '"}' and a newline: 470, 110 and 4070 characters, about 4 per token rounded up.
    assert [v.token_position_of_step(i) for i in range(3)] == [0, 118, 118 + 28]
    assert v.tokens() == 118 + 28 + 1018
    calls = []
    counted = LineView(t, count_tokens=lambda s: calls.append(s) or len(s.split("c")))
    # pieces around each "c": 1 in '"content"' per record, plus 4000 in the third record's content
    assert counted.tokens() == 2 + 2 + 4002 and len(calls) == 3


def test_read_numbered_windows() -> None:
    v = LineView(_trace([f"content {i}" for i in range(30)]))
    out = v.read(2, 2).splitlines()
    assert out[0] == '   2 (step 2)| {"step_id": 2, "agent": "Agent2", "role": "assistant", "content": "content 2"}'
    assert out[1].startswith("   3 (step 3)| ")
    assert out[2] == "[shown lines 2-3 of 0-29]"
    assert v.read(28, 10).splitlines()[-1] == "[shown lines 28-29 of 0-29; end of trace]"
    assert v.read(0, 1).startswith('   0 (step 0)| {"step_id": 0, ')
    # the end of the run, read as an investigator boots (offset = total - limit)
    tail = v.read(v.total_lines - 5, 5).splitlines()
    assert tail[-2].startswith("  29 (step 29)| ") and tail[-1].endswith("end of trace]")


@pytest.mark.parametrize(
    ("offset", "limit", "expect"),
    [
        (30, 5, "[read error: offset 30 is past the end; the trace has lines 0..29]"),
        (-2, 5, "[read error: offset -2 is negative; the trace has lines 0..29]"),
        (1, 0, "[read error: limit must be at least 1; the trace has lines 0..29]"),
        ("x", 3, "[read error: offset and limit must be whole numbers; the trace has lines 0..29]"),
    ],
)
def test_read_out_of_range_is_an_observation(offset, limit, expect) -> None:
    v = LineView(_trace([f"content {i}" for i in range(30)]))
    assert v.read(offset, limit) == expect


def test_search_finds_step_first_line_case_insensitively() -> None:
    t = _trace([f"content {i}" for i in range(12)] + ["The Flag of Lebanon has a CEDAR tree"])
    v = LineView(t)
    res = v.search_hits('"step_id": 7')
    assert [h[0] for h in res.hits] == [v.line_of_step(7)] and res.error is None
    res = v.search_hits("cedar TREE")
    assert [h[0] for h in res.hits] == [v.line_of_step(12)]
    assert "CEDAR tree" in res.hits[0][1]
    text = v.search("cedar")
    assert text.splitlines()[0].startswith(f"{v.line_of_step(12):>4} (step 12)| ")
    assert text.splitlines()[-1] == "[search 'cedar': 1 matching line]"
    assert v.search("nowhere to be found") == "[search 'nowhere to be found': no matches in 13 lines]"


def test_search_across_a_wrap_reports_the_starting_line() -> None:
    content = "x" * 150 + "needle-in-the-wrap" + "y" * 150  # no space: the wrap must cut the needle
    v = LineView(_trace([content]), width=40)
    # lines 0-1 hold the 66-character record head (cut after spaces), lines 2-4 take 119 x's,
    # line 5 the last 31 x's and "needle-in", line 6 the rest of the needle
    assert v.lines[5] == "x" * 31 + "needle-in" and v.lines[6].startswith("-the-wrap")
    assert [h[0] for h in v.search_hits("needle-in-the-wrap").hits] == [5]


def test_search_result_cap_and_snippet_size() -> None:
    v = LineView(_trace(["match here " + "z" * 1000] * 80), width=100)
    res = v.search_hits("match", max_results=10)
    assert [h[0] for h in res.hits] == [v.line_of_step(i) for i in range(10)] and res.truncated
    # a snippet is 160 characters then "...": the 67-character record head, "match here ", 82 z's
    head = '{"step_id": 0, "agent": "Agent0", "role": "assistant", "content": "match here '
    assert res.hits[0][1] == head + "z" * 82 + "..."
    assert {len(snip) for _, snip in res.hits} == {163}
    assert v.search("match", max_results=10).splitlines()[-1] == (
        "[search 'match': first 10 matching lines shown; more exist later, narrow the pattern]"
    )


@pytest.mark.parametrize(
    ("pattern", "expect"),
    [
        ("(unclosed", "invalid pattern: missing ) at position 9"),
        ("[", "invalid pattern: unterminated character set at position 1"),
        ("a**", "invalid pattern: multiple repeat at position 2"),
        ("", "empty pattern"),
        ("(a{1000}){1000}", "counted repeats multiply to 1000000, too large (at most 10000); use + or *"),
        ("a{10001}", "repeat count 10001 too large (at most 10000)"),
        ("a" * 5000, "pattern too long (5000 characters, at most 2000)"),
    ],
)
def test_bad_patterns_give_observations(pattern: str, expect: str) -> None:
    assert MAX_REPEAT == 10000
    v = LineView(_trace(["abc"]))
    res = v.search_hits(pattern)
    assert (res.error, res.hits) == (expect, [])
    assert v.search(pattern) == f"[search {pattern!r}: {expect}; nothing searched]"


def test_catastrophic_pattern_times_out_with_an_observation() -> None:
    """(a+)+$ on 30,000 a's never finishes by itself; the search must give up with an observation.
    How fast it gives up is measured by scripts/bench_search.py (evil_regex_ms), not asserted here;
    the join below only turns a hang into a failure."""
    v = LineView(_trace(["a" * 30_000 + "!", "ordinary text"]))
    got: list = []
    worker = threading.Thread(target=lambda: got.append(v.search_hits("(a+)+$", timeout_s=0.3)), daemon=True)
    worker.start()
    worker.join(120)
    assert got, "the search did not return: its timeout is not enforced"
    assert (got[0].timed_out, got[0].hits) == (True, [])
    assert v.search("(a+)+$", timeout_s=0.3) == (
        "[search '(a+)+$': timed out after 0.3s with no match found; use a simpler pattern (a literal word, no nested repetition)]"
    )


def test_view_of_real_fixture() -> None:
    t = load_trace(FIX / "openinference_trail.json")
    v = LineView(t)
    assert (v.line_of_step(3), v.line_of_step(4)) == (6, 8)
    assert v.lines[6].startswith(
        '{"step_id": 3, "agent": "CodeAgent", "role": "assistant", "name": "LiteLLMModel.__call__", '
        '"span_id": "a1b2c3d4e5f60001", "parent_span_id": "a1b2c3d4e5f6000s", "content": '
    )
    assert [h[0] for h in v.search_hits('"span_id": "a1b2c3d4e5f60002"').hits] == [8]


def test_width_too_small() -> None:
    with pytest.raises(ValueError):
        LineView(_trace(["x"]), width=5)

"""Long labelled runs: the fault lands at the asked depth, labels follow it, filler is benign and varied."""

from __future__ import annotations

from pathlib import Path

import pytest

from localfa.tokens import approx_tokens
from localfa.traces.filler import SHINGLE
from localfa.traces.lineview import step_record
from localfa.traces.longruns import LongRunError, lengthen, long_runs, parse_tokens, window_depths
from localfa.traces.model import Labels, Step, Trace

FAULT = "I will report the total as 12 because the second table obviously repeats the first one exactly."
DEV = Path(__file__).resolve().parents[3] / "shared" / "data" / "whowhen"


def small_run() -> Trace:
    said = [
        ("human", "user", "How many stations does the line have? Give the count."),
        ("Planner", "assistant", "Plan: 1. Find the official timetable. 2. Count the stations listed between the two ends."),
        ("Coder", "assistant", "```python\nimport pandas as pd\ndf = pd.read_csv('stations.csv')\nprint(len(df))\n```"),
        ("Terminal", "user", "exitcode: 0 (execution succeeded)\nCode output: 14\nname,zone\nSouth,1\nNorth,2"),
        ("Coder", "assistant", FAULT),
        ("Planner", "assistant", "The total reported is 12. Let us double check the timetable before finishing."),
        ("Terminal", "user", "exitcode: 0 (execution succeeded)\nCode output: 12"),
        ("Planner", "assistant", "FINAL ANSWER: 12"),
    ]
    steps = [Step(index=i, agent=a, role=r, content=c) for i, (a, r, c) in enumerate(said)]
    labels = Labels(mistake_agent="Coder", mistake_step=4, fault_steps=[4], high_impact_steps=[5], fault_spans=[(4, 5)])
    return Trace(id="t/small", source="small.json", format="whowhen", task="Count the stations.", steps=steps, labels=labels)


def tokens_before(trace: Trace, step: int) -> int:
    return sum(approx_tokens(step_record(s)) for s in trace.steps[:step])


def test_fault_at_the_asked_depth_labels_shifted_with_it():
    run = small_run()
    grown = lengthen(run, length=12_000, depth=6_000, seed=3)
    labels = grown.labels
    assert labels is not None and labels.mistake_step is not None
    assert grown.steps[labels.mistake_step].content == FAULT
    assert grown.steps[labels.mistake_step].agent == "Coder"
    assert labels.fault_steps == [labels.mistake_step]
    assert labels.high_impact_steps == [labels.mistake_step + 1]  # the fault keeps its effect next to it
    assert labels.fault_spans == [(labels.mistake_step, labels.mistake_step + 1)]
    assert grown.steps[labels.mistake_step - 1].content == run.steps[3].content  # and its cause
    assert [s.index for s in grown.steps] == list(range(len(grown.steps)))
    assert abs(tokens_before(grown, labels.mistake_step) - 6_000) < 150
    total = sum(approx_tokens(step_record(s)) for s in grown.steps)
    assert abs(total - 12_000) < 300
    info = grown.metadata["long_run"]
    assert info["from"] == "t/small" and info["inserted_steps"] == len(grown.steps) - len(run.steps)
    originals = [s.content for s in grown.steps if s.content in {o.content for o in run.steps}]
    assert originals == [s.content for s in run.steps]  # every real step kept, in order


def test_seeded_and_deterministic():
    run = small_run()
    a = lengthen(run, 8_000, 4_000, seed=1)
    b = lengthen(run, 8_000, 4_000, seed=1)
    c = lengthen(run, 8_000, 4_000, seed=2)
    assert a.model_dump() == b.model_dump()
    assert [s.content for s in a.steps] != [s.content for s in c.steps]


def test_filler_is_varied_in_the_runs_voices_and_never_quotes_the_fault():
    run = small_run()
    grown = lengthen(run, 20_000, 10_000, seed=0)
    originals = {s.content for s in run.steps}
    filler = [s for s in grown.steps if s.content not in originals]
    assert len(filler) > 20
    agents = {s.agent for s in filler}
    assert agents <= {"Planner", "Coder", "Terminal"}  # the run's own agents; the human gave the task once
    assert len(agents) == 3
    assert max(sum(1 for s in filler if s.agent == a) for a in agents) < 0.7 * len(filler)
    assert len({s.content for s in filler}) > 0.9 * len(filler)  # not one repeated string
    fault_words = FAULT.lower().split()
    fault_runs = {tuple(fault_words[i : i + SHINGLE]) for i in range(len(fault_words) - SHINGLE + 1)}
    for s in filler:
        words = s.content.lower().split()
        assert not any(tuple(words[i : i + SHINGLE]) in fault_runs for i in range(len(words) - SHINGLE + 1)), s.content
    terminal = [s.content for s in filler if s.agent == "Terminal"]
    assert any("\n" in t for t in terminal)  # tool output looks like tool output, not prose


def test_what_cannot_be_grown_says_why():
    run = small_run()
    with pytest.raises(LongRunError, match="t/small: the fault already sits"):
        lengthen(run, 10_000, depth=10)
    unlabelled = run.model_copy(update={"labels": None})
    with pytest.raises(LongRunError, match="no labelled mistake step"):
        lengthen(unlabelled, 10_000)


def test_window_depths_and_token_counts():
    assert window_depths(32768, [1, 2, 5]) == [(49152, 32768), (81920, 65536), (180224, 163840)]
    assert [parse_tokens(x) for x in ("10k", "1M", "48000")] == [10_000, 1_000_000, 48_000]
    with pytest.raises(ValueError, match="not a token count"):
        parse_tokens("lots")


def test_long_runs_pick_fitting_traces_and_grow_each_to_every_length():
    runs = long_runs([small_run()], [4_000, 9_000], count=2)
    assert sorted(runs) == [4_000, 9_000]
    assert [len(v) for v in runs.values()] == [1, 1]
    assert runs[9_000][0].metadata["long_run"]["asked_depth"] == 4_500


@pytest.mark.skipif(not DEV.is_dir(), reason="the Who&When dev split is not here")
def test_dev_traces_grow_past_the_window():
    from localfa.bench.sweep import load_traces

    traces = load_traces([DEV], limit=1)
    for t in traces:
        grown = lengthen(t, 49_152, 32_768)
        assert grown.labels is not None and grown.labels.mistake_step is not None
        assert abs(tokens_before(grown, grown.labels.mistake_step) - 32_768) < 600


def test_a_grown_run_written_as_whowhen_reads_back_with_its_label(tmp_path):
    import json

    from localfa.traces.load import load_trace
    from localfa.traces.longruns import as_whowhen

    grown = lengthen(small_run(), 6_000, 3_000, seed=4)
    path = tmp_path / "hand-crafted" / "small-L6000-D3000-s4.json"
    path.parent.mkdir()
    path.write_text(json.dumps(as_whowhen(grown)))
    back = load_trace(path)
    assert back.labels is not None and grown.labels is not None
    assert back.labels.mistake_step == grown.labels.mistake_step and back.labels.mistake_agent == "Coder"
    assert [(s.agent, s.content) for s in back.steps] == [(s.agent, s.content) for s in grown.steps]
    assert back.metadata["long_run"]["asked_depth"] == 3_000


def test_the_run_still_opens_with_its_task_and_closes_with_its_answer():
    run = small_run()
    grown = lengthen(run, 9_000, 4_000, seed=5)
    assert grown.steps[0].content == run.steps[0].content
    assert grown.steps[-1].content == run.steps[-1].content


def test_a_run_of_one_agent_grows_without_hanging():
    """algorithm-generated/35 has one agent only: the rule that hands the turn on after a few
    steps of one speaker had nobody to hand it to, and the mutant sweep's long runs never ended."""
    base = small_run()
    steps = [s.model_copy(update={"agent": "Solo"}) for s in base.steps]
    labels = base.labels.model_copy(update={"mistake_agent": "Solo"}) if base.labels else None
    solo = base.model_copy(update={"steps": steps, "labels": labels})
    grown = lengthen(solo, 8_000, 4_000)
    assert {s.agent for s in grown.steps} == {"Solo"} and abs(tokens_before(grown, grown.labels.mistake_step) - 4_000) < 600

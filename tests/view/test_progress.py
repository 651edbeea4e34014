"""Live progress: a watched program behaves exactly like the program, and the display follows it."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from localfa.cli.progress import LiveProgress, stage_of, watch
from localfa.engine.types import Usage
from localfa.methods.runner import Job


class _Req:
    def __init__(self, key: str) -> None:
        self.key = key


class _Resp:
    def __init__(self, prompt: int, completion: int) -> None:
        self.usage = Usage(prompt_tokens=prompt, completion_tokens=completion)


def _program(log: list):
    got = yield [_Req("turn/1")]
    log.append(len(got))
    got = yield [_Req("eval/0/0"), _Req("eval/0/1"), _Req("eval/0/2")]
    log.append(len(got))
    return "diagnosis"


def test_stage_names_come_from_request_keys():
    assert stage_of(["turn/3"]) == "turn/3"
    assert stage_of(["eval/0/0", "eval/0/1", "eval/0/2"]) == "eval ×3"
    assert stage_of(["falat/window/0", "falat/window/1", "falat/prior"]) == "falat/window ×2, falat/prior"
    assert stage_of([""]) == "call"


def test_watch_is_transparent_and_reports_batches_and_responses():
    log, batches, answers = [], [], []
    prog = watch(_program(log), lambda b: batches.append([r.key for r in b]), lambda r: answers.append(len(r)))
    assert [r.key for r in next(prog)] == ["turn/1"]
    assert len(prog.send([_Resp(1, 1)])) == 3
    with pytest.raises(StopIteration) as stop:
        prog.send([_Resp(1, 1)] * 3)
    assert stop.value.value == "diagnosis"
    assert log == [1, 3] and answers == [1, 3] and batches[1] == ["eval/0/0", "eval/0/1", "eval/0/2"]


def test_closing_the_watcher_closes_the_program():
    closed = []

    def prog():
        try:
            yield [_Req("turn/1")]
        finally:
            closed.append(True)

    w = watch(prog(), lambda b: None, lambda r: None)
    next(w)
    w.close()
    assert closed == [True]


def test_live_progress_shows_stage_and_tokens_per_trace_on_its_console():
    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    with LiveProgress("safari", 1, console) as live:
        job = live.wrap(Job("0", _program([]), lambda d: d), label="whowhen/hand-crafted/1")
        next(job.program)
        (row,) = [t for t in live.progress.tasks if t.id != live.overall]
        assert row.description.strip() == "whowhen/hand-crafted/1" and row.fields["stage"] == "turn/1"
        job.program.send([_Resp(900, 40)])
        assert row.fields["stage"] == "eval ×3" and row.fields["tokens"] == "940 tok"
        with pytest.raises(StopIteration):
            job.program.send([_Resp(100, 10)] * 3)
        assert row.fields["tokens"] == "1,270 tok"
        live.finished("0")
        assert [t.id for t in live.progress.tasks] == [live.overall]
        assert live.progress.tasks[0].completed == 1 and live.progress.tasks[0].fields["count"] == "1/1"

"""Live progress of long diagnoses on stderr: per trace, the turn or stage it is at and its tokens.

A method program is a generator of request batches; `watch` wraps one without changing what it
yields or returns, and reads two things on the way: the keys of each batch it sends (``turn/3``,
``eval/0/1``, ``falat/window/2``...: the stage) and the usage of the responses it gets back (the
tokens). So every method shows progress, present and future, with no code of its own.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, Callable

from localfa.engine.types import Request, Response
from localfa.methods.base import Program
from localfa.methods.runner import Job


def stage_of(keys: list[str]) -> str:
    """What a batch is doing, from its request keys: the key itself for a single request
    (``turn/3``), else each key family with its count (``eval ×3``)."""
    keys = [k for k in keys if k] or ["call"]
    if len(keys) == 1:
        return keys[0]
    families = Counter("/".join(p for p in k.split("/") if not p.isdigit()) or k for k in keys)
    return ", ".join(f"{name} ×{n}" if n > 1 else name for name, n in families.items())


def watch(program: Program, on_batch: Callable[[list[Request]], None], on_responses: Callable[[list[Response]], None]) -> Program:
    """`program`, unchanged, calling `on_batch` on each batch it yields and `on_responses` on
    each answer it receives.

    An exception thrown into the wrapper (the runner throws a failed request into its program)
    is thrown into the program, which may recover from it (SAFARI's forced finalisation after a
    turn the engine could not produce); closing the wrapper closes the program.
    """
    try:
        batch = next(program)
        while True:
            on_batch(batch)
            try:
                responses = yield batch
            except GeneratorExit:
                raise
            except BaseException as exc:  # noqa: BLE001 - whatever the runner throws goes to the program
                batch = program.throw(exc)
                continue
            on_responses(responses)
            batch = program.send(responses)
    except StopIteration as stop:
        return stop.value
    finally:
        program.close()


class LiveProgress:
    """A rich display on stderr: one overall bar, one line per trace in flight.

    Use as a context manager; `wrap` each job before it runs and call `finished` with its key.
    """

    def __init__(self, title: str, total: int, console: Any) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=24),
            TextColumn("{task.fields[count]}", justify="right"),
            TextColumn("[cyan]{task.fields[stage]}"),
            TextColumn("{task.fields[tokens]}"),
            TimeElapsedColumn(),
            transient=True,
            console=console,
        )
        self.total, self.done = total, 0
        self.overall = self.progress.add_task(title, total=total, stage="", tokens="", count=f"0/{total}")
        self.rows: dict[str, Any] = {}
        self.tokens: dict[str, int] = {}

    def __enter__(self) -> "LiveProgress":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)

    def _tokens_text(self, n: int) -> str:
        return f"{n:,} tok"

    def wrap(self, job: Job, label: str | None = None) -> Job:
        """The same job, reporting its stage and tokens here (as `label`, default its key)."""
        key = job.key

        def on_batch(batch: list[Request]) -> None:
            if key not in self.rows:
                self.tokens[key] = 0
                self.rows[key] = self.progress.add_task(f"  {label or key}", total=None, stage="", tokens=self._tokens_text(0), count="")
            self.progress.update(self.rows[key], stage=stage_of([r.key for r in batch]))

        def on_responses(responses: list[Response]) -> None:
            spent = sum(r.usage.prompt_tokens + r.usage.completion_tokens for r in responses)
            self.tokens[key] = self.tokens.get(key, 0) + spent
            if key in self.rows:
                self.progress.update(self.rows[key], tokens=self._tokens_text(self.tokens[key]))
            self.progress.update(self.overall, tokens=self._tokens_text(sum(self.tokens.values())))

        return dataclasses.replace(job, program=watch(job.program, on_batch, on_responses))

    def finished(self, key: str) -> None:
        """One trace is done: its line goes, the overall bar advances."""
        row = self.rows.pop(key, None)
        if row is not None:
            self.progress.remove_task(row)
        self.done += 1
        self.progress.update(self.overall, advance=1, count=f"{self.done}/{self.total}")

"""The sweep's progress bar: done of total, ETA and the running step accuracy (the report's scorer)."""

from __future__ import annotations

from typing import Any, Iterable

from localfa.bench.store import Kept


class Progress:
    """A rich progress bar on stderr (silent when disabled); counts what the store keeps per key."""

    def __init__(self, enabled: bool, total: int, done: int, finished: Iterable[Kept]) -> None:
        self.enabled = enabled
        self.total = total
        self.done = done
        self.n = self.errors = 0
        self.hits = 0.0
        for k in finished:
            self._count(k)
        self._progress: Any = None
        self._task: Any = None

    def _count(self, kept: Kept) -> None:
        if kept.step_score is not None:
            self.n += 1
            self.hits += kept.step_score
        self.errors += int(bool(kept.error))

    def _acc_text(self) -> str:
        text = "step acc —" if not self.n else f"step acc {self.hits / self.n:.3f} (n={self.n})"
        return text + (f", {self.errors} errors" if self.errors else "")

    def __enter__(self) -> "Progress":
        if not self.enabled:
            return self
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
        from rich.progress import Progress as Bar

        self._progress = Bar(
            TextColumn("[bold]bench[/]"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[acc]}"),
            console=Console(stderr=True),
            transient=False,
        )
        self._progress.__enter__()
        self._task = self._progress.add_task("bench", total=self.total, completed=self.done, acc=self._acc_text())
        return self

    def advance(self, kept: Kept) -> None:
        self._count(kept)
        if self._progress is not None:
            self._progress.update(self._task, advance=1, acc=self._acc_text())

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)

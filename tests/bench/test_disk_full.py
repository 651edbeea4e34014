"""Disk full while a sweep writes: one error line naming the results file and exit status 1, no
traceback; the records written before it are kept, and the same command resumes the run."""

from __future__ import annotations

import errno
from pathlib import Path

from typer.testing import CliRunner

from localfa.bench import store
from localfa.bench.store import read_run_records
from localfa.cli import build_app
from tests.bench.test_sweep import write_whowhen


class FillsUp:
    """A results file handle whose writes fail with ENOSPC after `room` records."""

    def __init__(self, fh, room: int) -> None:
        self._fh, self._room = fh, room

    def write(self, data: bytes) -> int:
        if self._room <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        self._room -= 1
        return self._fh.write(data)

    def __getattr__(self, name: str):
        return getattr(self._fh, name)


def bench(data: Path, run: Path) -> object:
    args = ["bench", str(data), "--out", str(run), "--methods", "all-at-once", "--engine", "scripted", "--no-progress", "--no-cache"]
    return CliRunner().invoke(build_app(), args)


def test_disk_full_is_one_error_line_and_the_run_resumes(tmp_path, monkeypatch):
    data = write_whowhen(tmp_path / "data", per_subset=2)
    run = tmp_path / "run"
    real_open = store.ResultStore.open

    def open_then_fill(self):
        opened = real_open(self)
        self._fh = FillsUp(self._fh, room=2)
        return opened

    monkeypatch.setattr(store.ResultStore, "open", open_then_fill)
    full = bench(data, run)
    assert full.exit_code == 1, full.output
    assert f"error: {run / 'results.jsonl'}: cannot write: No space left on device" in full.output
    assert full.exception is None or isinstance(full.exception, SystemExit)  # no traceback
    assert len(read_run_records(run)) == 2
    monkeypatch.setattr(store.ResultStore, "open", real_open)  # space freed
    resumed = bench(data, run)
    assert resumed.exit_code == 0, resumed.output
    assert len(read_run_records(run)) == 4

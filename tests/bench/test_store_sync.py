"""The results store never makes the sweep wait on the disk (issue 26): each record is written
and flushed on the caller's thread, fsynced on the store's own thread, and `close` returns only
after an fsync that covers the last record."""

from __future__ import annotations

import os
import threading

import pytest

import localfa.bench.store as store_module
from localfa.bench.store import ResultStore, StoreError
from localfa.results import ResultRecord


def _record(trace: str) -> ResultRecord:
    return ResultRecord(trace=trace, method="m", budget="none", seed=0, step=1)


def test_fsync_runs_off_the_callers_thread_and_close_covers_the_last_record(tmp_path, monkeypatch):
    synced: list[tuple[str, int]] = []
    real = os.fsync

    def recording(fd):
        synced.append((threading.current_thread().name, os.fstat(fd).st_size))
        return real(fd)

    with ResultStore(tmp_path) as store:
        monkeypatch.setattr(store_module.os, "fsync", recording)
        for i in range(20):
            store.append(_record(f"t{i}"))
        size = store.path.stat().st_size
    assert synced, "nothing was fsynced"
    assert all(name == "localfa-fsync" for name, _ in synced)  # never on the sweep's thread
    assert synced[-1][1] == size  # the last fsync came after the last record was written
    assert len(store.path.read_text().splitlines()) == 20


def test_a_failed_fsync_stops_the_store_with_its_file_named(tmp_path, monkeypatch):
    def broken(fd):
        raise OSError(5, "Input/output error")

    store = ResultStore(tmp_path).open()
    monkeypatch.setattr(store_module.os, "fsync", broken)
    store.append(_record("a"))
    with pytest.raises(StoreError, match="results.jsonl.*cannot write the results to disk"):
        store.close()
    monkeypatch.undo()
    ResultStore(tmp_path).open().close()  # the run's lock was released all the same

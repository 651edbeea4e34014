"""One way to replace a file durably (`localfa.durable`), and every file localfa rewrites uses it.

The call-site tests make the helper's fsync fail: a writer that went through `replacing` then
raises and leaves the old file and no temporary file behind; a hand-written copy of the pattern
would not even notice (its test fails), and a helper that left a half-written file or a stray
temporary file would fail them all.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Callable

import pytest

import localfa.durable as durable
from localfa.durable import replace_durably, replacing


def _fail_fsync(monkeypatch) -> None:
    def broken(path: Path) -> None:
        raise OSError(5, "Input/output error (test)", str(path))

    monkeypatch.setattr(durable, "fsync_file", broken)


def test_replace_durably_writes_text_or_bytes_and_fsyncs_file_and_folder(tmp_path, monkeypatch):
    synced: list[Path] = []
    monkeypatch.setattr(durable, "fsync_dir", synced.append)
    target = tmp_path / "out.json"
    assert replace_durably(target, "héllo\n") == target
    assert target.read_bytes() == "héllo\n".encode("utf-8")
    replace_durably(target, b"\x00bytes")
    assert target.read_bytes() == b"\x00bytes"
    assert synced == [tmp_path, tmp_path]
    assert os.listdir(tmp_path) == ["out.json"]  # no temporary file left


def test_the_new_file_gets_the_permissions_open_would_give(tmp_path):
    plain = tmp_path / "plain"
    plain.write_text("x")
    replace_durably(tmp_path / "durable", "x")
    assert stat.S_IMODE((tmp_path / "durable").stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)


def test_the_temporary_file_is_hidden_unique_and_beside_the_target(tmp_path):
    target = tmp_path / "a.html"
    with replacing(target) as one, replacing(target) as two:
        assert one != two and one.parent == two.parent == tmp_path
        assert one.name.startswith(".a.html.") and one.name.endswith(".tmp") and one.exists()
        one.write_text("first")
        two.write_text("second")
    assert target.read_text() == "first" and os.listdir(tmp_path) == ["a.html"]  # the last to finish wins


def test_an_error_in_the_block_leaves_the_old_file_and_no_temporary_file(tmp_path):
    target = tmp_path / "m.json"
    target.write_text("old")
    with pytest.raises(RuntimeError, match="half-way"):
        with replacing(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("half-way")
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["m.json"]


def test_a_failed_fsync_leaves_the_old_file_and_no_temporary_file(tmp_path, monkeypatch):
    _fail_fsync(monkeypatch)
    target = tmp_path / "m.json"
    target.write_text("old")
    with pytest.raises(OSError, match="test"):
        replace_durably(target, "new")
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["m.json"]


# ---- every writer that replaces a file goes through it ------------------------------------------


def _manifest(d: Path) -> tuple[Path, Callable[[], object]]:
    from localfa.bench.run_manifest import write_json_atomic

    path = d / "manifest.json"
    return path, lambda: write_json_atomic(path, {"model": "new"})


def _report(d: Path) -> tuple[Path, Callable[[], object]]:
    from localfa.bench.report import write_report
    from tests.bench.test_report import write_run

    run = write_run(d)
    return run / "report.html", lambda: write_report(run)


def _p_report(d: Path) -> tuple[Path, Callable[[], object]]:
    from localfa.bench.ceiling import write_p_report

    return d / "report.html", lambda: write_p_report(d)


def _page(d: Path) -> tuple[Path, Callable[[], object]]:
    from localfa.view.page import write_page

    path = d / "view.html"
    return path, lambda: write_page([], path)


WRITERS = {"manifest": _manifest, "report": _report, "p-report": _p_report, "view-page": _page}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_each_writer_replaces_its_file_durably(writer, tmp_path, monkeypatch):
    path, write = WRITERS[writer](tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("old")
    before = sorted(p.name for p in path.parent.iterdir())
    _fail_fsync(monkeypatch)
    with pytest.raises(OSError, match="test"):
        write()
    assert path.read_text() == "old"
    assert sorted(p.name for p in path.parent.iterdir()) == before  # no temporary file left
    monkeypatch.undo()
    write()
    assert path.read_text() != "old" and sorted(p.name for p in path.parent.iterdir()) == before


def test_the_cache_merge_replaces_the_main_file_durably(tmp_path, monkeypatch):
    from localfa.engine.cache_files import MAIN, PART_GLOB, CacheFiles, merge_parts
    from tests.engine.test_cache_files import rows

    def part(key: str) -> None:
        cache = CacheFiles(tmp_path)
        cache.put_many([(key, {"text": key})])
        cache.close()

    part("a")
    assert merge_parts(tmp_path) == 1
    part("b")
    before = sorted(os.listdir(tmp_path))
    _fail_fsync(monkeypatch)
    with pytest.raises(OSError, match="test"):
        merge_parts(tmp_path)
    assert set(rows(tmp_path / MAIN)) == {"a"} and len(list(tmp_path.glob(PART_GLOB))) == 1  # the part stays
    assert sorted(os.listdir(tmp_path)) == before
    monkeypatch.undo()
    assert merge_parts(tmp_path) == 1 and set(rows(tmp_path / MAIN)) == {"a", "b"}


def test_replace_atomically_replaces_whole_without_fsyncs(tmp_path, monkeypatch):
    """The trace pages' writer: atomic (a reader sees the old file or the new one, no temporary
    file stays), with no fsync (the caller fsyncs the folder once for hundreds of pages)."""
    from localfa.durable import replace_atomically

    _fail_fsync(monkeypatch)
    monkeypatch.setattr(durable, "fsync_dir", lambda path: (_ for _ in ()).throw(AssertionError("fsync_dir called")))
    target = tmp_path / "00000.html"
    target.write_text("old")
    assert replace_atomically(target, "new") == target
    assert target.read_text() == "new" and os.listdir(tmp_path) == ["00000.html"]

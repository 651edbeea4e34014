"""`localfa.bench` stays the sweep function even after the bench package has been imported."""

from __future__ import annotations

import shutil
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "failed_run.json"


def test_localfa_bench_is_callable_twice(tmp_path: Path) -> None:
    import localfa.bench.metrics  # noqa: F401 - binds `localfa.bench` to the package

    folder = tmp_path / "ds"
    folder.mkdir()
    shutil.copy(EXAMPLE, folder / "t1.json")
    for run in ("a", "b"):
        result = localfa.bench([folder], tmp_path / run, "random", seeds=[0], engine="scripted")
        assert (tmp_path / run / "results.jsonl").is_file(), result


def test_an_engine_named_in_a_call_is_built_for_it_and_closed_after(monkeypatch) -> None:
    """`engine="NAME"` (the README's example starts one engine and passes it instead): the call
    builds that backend, answers, and closes what it built."""
    import localfa
    from localfa.engine.scripted import ScriptedEngine

    closed: list[bool] = []
    monkeypatch.setattr(ScriptedEngine, "close", lambda self: closed.append(True), raising=False)
    d = localfa.diagnose(localfa.load_trace(EXAMPLE), method="all-at-once", engine="scripted")
    assert d.error is None and d.step is not None
    assert closed == [True]

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

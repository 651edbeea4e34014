"""A Who&When-format file outside a Who&When tree is named by the path rule, and a resume keeps
the ids a run already gave (issue 55, case 13): `ds/a/run1.json` was `run1`, so adding
`ds/b/run1.json` made the next `bench ds --out RUN` refuse although `ds` holds both files."""

from __future__ import annotations

import json
from pathlib import Path

from localfa.bench.store import read_run_records
from localfa.cli import main
from localfa.testing.hostile import whowhen_file


def bench(ds: Path, run: Path) -> int:
    return main(["bench", str(ds), "--methods", "random", "--engine", "scripted", "--out", str(run), "--no-progress"])


def write(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(whowhen_file(["Planner", "Coder", "Checker"])))


def test_a_same_named_file_added_beside_is_a_new_trace(tmp_path, capsys):
    ds, run = tmp_path / "ds", tmp_path / "run"
    write(ds / "a" / "run1.json")
    assert bench(ds, run) == 0
    write(ds / "b" / "run1.json")
    assert bench(ds, run) == 0, capsys.readouterr().err
    assert sorted(r.trace for r in read_run_records(run)) == ["a/run1", "b/run1"]


def test_an_id_the_run_already_gave_keeps_its_name(tmp_path, capsys):
    ds, run = tmp_path / "ds", tmp_path / "run"
    write(ds / "a" / "run1.json")
    assert bench(ds, run) == 0
    # the run as the old rule wrote it: the bare file name
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["trace_ids"] = {path: "run1" for path in manifest["trace_ids"]}
    (run / "manifest.json").write_text(json.dumps(manifest))
    results = run / "results.jsonl"
    results.write_text(results.read_text().replace('"trace":"a/run1"', '"trace":"run1"'))
    write(ds / "b" / "run1.json")
    assert bench(ds, run) == 0, capsys.readouterr().err
    assert "1 new records" in capsys.readouterr().err  # only b's unit ran; a's record is kept under its old id
    assert sorted(r.trace for r in read_run_records(run)) == ["b/run1", "run1"]

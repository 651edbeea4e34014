"""Categorising a sharded run takes effect (issue 55, case 5): the categorised copies went to
results.jsonl with the original's `finished_at`, the shard file holding the original was read
after it and won the tie, so no record carried a category and each rerun appended the copies again."""

from __future__ import annotations

from localfa.bench.store import read_run_records
from localfa.cli import main
from tests.insights.sample import write_sample


def test_a_sharded_run_categorised_once_carries_its_categories(tmp_path, capsys):
    write_sample(tmp_path / "data", 6)
    run = tmp_path / "run"
    base = ["bench", str(tmp_path / "data"), "--methods", "all-at-once", "--engine", "oracle", "--out", str(run), "--no-progress"]
    for shard in ("1/2", "2/2"):
        assert main([*base, "--shard", shard]) == 0
    assert main([*base, "--categorise", "agentrx"]) == 0
    assert "categorised 6 records" in capsys.readouterr().err
    records = read_run_records(run)
    assert len(records) == 6 and all(r.category and r.taxonomy == "agentrx" for r in records)
    lines = (run / "results.jsonl").read_text().count("\n")
    assert main([*base, "--categorise", "agentrx"]) == 0  # nothing left to categorise: nothing appended
    assert (run / "results.jsonl").read_text().count("\n") == lines

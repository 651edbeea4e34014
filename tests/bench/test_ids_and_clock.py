"""Two small rules that decide which record is whose: trace ids are one Unicode spelling (NFC), so
the NFD and NFC names of one file are one trace and two such files a refused clash; and between two
error records of one key the later line wins, whatever time a skewed clock stamped on them."""

from __future__ import annotations

import json
import unicodedata

import pytest

from localfa.bench.store import read_records
from localfa.bench.sweep import load_traces
from localfa.bench.units import Unreadable
from localfa.results import ResultRecord
from localfa.testing.hostile import whowhen_file
from localfa.traces.errors import TraceError

NFC, NFD = unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")


def test_an_nfd_file_name_gives_the_nfc_id(tmp_path):
    (tmp_path / f"{NFD}.json").write_text(json.dumps(whowhen_file(["A", "B", "C"])))
    (tmp_path / f"{NFD}-bad.json").write_text("{")
    bad: list[Unreadable] = []
    (trace,) = load_traces([tmp_path], warn=lambda _: None, unreadable=bad)
    assert trace.id == NFC and trace.id != NFD
    assert [u.id for u in bad] == [f"{NFC}-bad"]


def test_the_nfc_and_nfd_names_of_one_id_are_a_refused_clash(tmp_path):
    for name in (NFC, NFD):
        (tmp_path / f"{name}.json").write_text(json.dumps(whowhen_file(["A", "B", name])))
    with pytest.raises(TraceError, match="is also the id of"):
        load_traces([tmp_path], warn=lambda _: None)


def test_between_two_errors_the_later_line_wins_whatever_their_stamps(tmp_path):
    def error(when: str, text: str) -> str:
        return ResultRecord(
            trace="t", method="m", seed=0, error=text, error_kind="transient", stop_reason="error", finished_at=when
        ).to_line()

    path = tmp_path / "results.jsonl"
    path.write_text(error("2099-01-01T00:00:00+0000", "old: from a clock in the future") + error("2026-01-01T00:00:00+0000", "new"))
    (rec,) = read_records(path)
    assert rec.error == "new"

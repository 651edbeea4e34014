"""FALAT's path in the trace view, drawn from records FALAT itself wrote (through `localfa
diagnose` on the scripted engine, and through the runner with a scripted plan)."""

from __future__ import annotations

import json
import re

from localfa.results import ResultRecord
from localfa.view.falat import SECTIONS
from localfa.view.page import build_page
from tests.methods.test_falat_logic import Script, make_trace, run_one
from tests.view.conftest import LABELLED, localfa, run_groups

CLAIMED = {k for _, keys, _ in SECTIONS for k in keys}
NOT_FALATS = {"label"}  # shown on the label card


def _falat_block(html: str) -> str:
    """The HTML of the (only) FALAT verdict's path."""
    (block,) = re.findall(r"<summary>How falat got there</summary>(.*?)</article>", html, re.S)
    return block


def _sections(block: str) -> dict[str, str]:
    """Stage title -> its HTML (up to the next stage)."""
    parts = block.split('<details class="stage"')[1:]
    return {re.search(r"<summary>(.*?)</summary>", p).group(1).replace("&#x27;", "'"): p for p in parts}


def test_every_key_falat_records_has_its_section(tmp_path):
    out = tmp_path / "falat.jsonl"
    localfa("diagnose", str(LABELLED), "--method", "falat", "--engine", "scripted", "--quiet", "--out", str(out))
    (rec,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert rec["error"] is None
    assert set(rec["details"]) - NOT_FALATS <= CLAIMED, set(rec["details"]) - NOT_FALATS - CLAIMED
    html = _falat_block(build_page(run_groups(out)))
    assert "Other details" not in html
    shown = _sections(html)
    assert [t for t, keys, _ in SECTIONS if any(k in rec["details"] for k in keys)] == list(shown)


def test_the_real_details_land_in_their_stages(tmp_path):
    flags = {2: (True, True, False), 4: (True, False, True), 7: (True, False, False)}
    labels = {(2, 4): "error_shift", (4, 7): "follow_up"}
    script = Script(flags=flags, labels=labels, verdicts={4: (True, True)}, suspicion={2: 3, 4: 9}, passive=[6])
    trace = make_trace(10)
    diag, _ = run_one(script, trace)
    out = tmp_path / "r.jsonl"
    out.write_text(ResultRecord.from_diagnosis(diag, trace).model_dump_json() + "\n")
    sections = _sections(_falat_block(build_page(run_groups(out))))
    windows = sections["Windows: stage and step summaries"]
    assert "window at 0" in windows and "window at 5" in windows  # the stage summaries, not under cost
    assert "its window judged it passive" in windows
    pairs = sections["Typed pairs"]
    assert "error_shift" in pairs and "r2-4" in pairs and 'href="#t0-s7">step 7</a>' in pairs
    assert "carriers traced back to" in sections["Pruning"] and 'href="#t0-s7">step 7</a>' in sections["Pruning"]
    ranking = sections["Judged ranking"]
    assert "rated 4" in ranking and ranking.index('href="#t0-s4"') < ranking.index('href="#t0-s2"')
    verdicts = sections["Top candidates and verdicts"]
    assert "t̂ =" in verdicts and verdicts.count("<tr>") == 1 + len(diag.details["top"])  # each verdict, not only t_hat_verified
    assert "r4" in verdicts and "the count is" in verdicts
    research = sections["Local re-search"]
    assert "ROOT_CAUSE" in research and "for 4" in research and "confirms" in research
    cost = sections["Cost per stage"]
    assert "window at" not in cost and "ranking" in cost

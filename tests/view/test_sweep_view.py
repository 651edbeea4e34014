"""`localfa view` of a sweep (issue 56.1, 56.5): an index beside one page per trace, written
only over files `localfa view` wrote, each trace page written once and rewritten only when it
changes. No browser here (tests/view/test_index_browser.py opens the pages in Chromium)."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

from localfa.view.index import build_index, json_block, script
from localfa.view.records import TraceGroup
from tests.view.conftest import REPO, localfa
from tests.view.test_index_browser import generated_sweep


def _view(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "localfa", "view", *args], capture_output=True, text=True, cwd=REPO, timeout=300)


def _small_sweep(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    data = REPO / "tests" / "fixtures" / "traces"
    localfa(
        "bench",
        str(data / "whowhen_algorithm.json"),
        str(data / "whowhen_handcrafted.json"),
        "--engine",
        "scripted",
        "--methods",
        "all-at-once,random",
        "--out",
        str(run),
        "--no-progress",
    )
    return run


def test_a_sweep_gets_an_index_and_one_page_per_trace(tmp_path):
    run = _small_sweep(tmp_path)
    proc = localfa("view", str(run))
    assert proc.stderr.strip() == f"wrote {run / 'view.html'} (4 diagnoses of 2 traces; one page per trace in {run / 'view-traces'}/)"
    pages = sorted((run / "view-traces").iterdir())
    assert [p.name for p in pages] == ["00000.html", "00001.html"]
    first = pages[0].read_text()
    assert first.count('class="diag"') == 2 and '<a href="../view.html">← every diagnosis</a>' in first
    assert "<script" not in first  # a trace page runs no script
    rows = json.loads(re.search(r'id="rows">(.*?)</script>', (run / "view.html").read_text()).group(1))
    assert [r[-2:] for r in rows["rows"]] == [[0, 0], [0, 1], [1, 0], [1, 1]]  # each row: its page and its place there


def test_an_unchanged_page_is_not_written_again_and_pages_no_longer_needed_go(tmp_path):
    run = tmp_path / "run"
    localfa("bench", str(REPO / "examples" / "whowhen"), "--engine", "scripted", "--methods", "random", "--out", str(run), "--no-progress")
    localfa("view", str(run))
    pages = run / "view-traces"
    assert len(list(pages.iterdir())) == 4  # the four examples
    before = (pages / "00000.html").stat().st_mtime_ns
    localfa("view", str(run))
    assert (pages / "00000.html").stat().st_mtime_ns == before
    localfa("view", str(run), "--trace", "algorithm-generated")
    assert sorted(p.name for p in pages.iterdir()) == ["00000.html", "00001.html", "00002.html"]
    localfa("view", str(run), "--trace", "hand-crafted/6")  # one trace: one page, and the index's pages go
    assert not pages.exists() and (run / "view.html").read_text().count('class="diag"') == 1


def test_view_never_replaces_a_file_it_did_not_write_unless_forced(tmp_path):
    run = _small_sweep(tmp_path)
    mine = tmp_path / "notes.html"
    mine.write_text("<p>my notes</p>")
    refused = _view(str(run), "--out", str(mine))
    assert refused.returncode == 2 and refused.stdout == ""
    assert (
        refused.stderr
        == f"error: {mine}: exists and is not a page localfa view wrote: left as it is (give another --out, or add --force to replace it)\n"
    )
    assert mine.read_text() == "<p>my notes</p>"
    # a folder of other files where the trace pages would go is left alone too
    (tmp_path / "notes-traces").mkdir()
    (tmp_path / "notes-traces" / "keep.txt").write_text("keep")
    mine.unlink()
    refused = _view(str(run), "--out", str(mine))
    assert refused.returncode == 2 and "notes-traces: holds files localfa view did not write (keep.txt)" in refused.stderr
    assert not mine.exists()
    forced = _view(str(run), "--out", str(mine), "--force")
    assert forced.returncode == 0, forced.stderr
    assert (tmp_path / "notes-traces" / "keep.txt").read_text() == "keep"  # forced, and still nothing of the user's deleted
    assert len(list((tmp_path / "notes-traces").glob("*.html"))) == 2
    again = _view(str(run), "--out", str(mine))  # its own page now: replaced without a word
    assert again.returncode == 2 and "keep.txt" in again.stderr  # ... but the folder still holds the user's file
    (tmp_path / "notes-traces" / "keep.txt").unlink()
    assert _view(str(run), "--out", str(mine)).returncode == 0


def test_diagnose_html_refuses_a_file_it_did_not_write_before_running(tmp_path):
    mine = tmp_path / "report.html"
    mine.write_text("mine")
    example = REPO / "examples" / "failed_run.json"
    proc = subprocess.run(
        [sys.executable, "-m", "localfa", "diagnose", str(example), "--engine", "scripted", "--html", str(mine)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == 2 and proc.stdout == "" and "exists and is not a page localfa view wrote" in proc.stderr
    assert mine.read_text() == "mine"


def test_the_index_policy_admits_its_own_script_and_nothing_else(tmp_path):
    html = build_index([TraceGroup("t", "", None, [{"trace": "t", "method": "m", "seed": 0}])], "x-traces", "t")
    policy = re.search(r'Content-Security-Policy" content="([^"]+)"', html).group(1)
    digest = base64.b64encode(hashlib.sha256(script().encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in policy and "default-src 'none'" in policy and "connect-src" not in policy
    assert html.count("<script>") == 1 and f"<script>{script()}</script>" in html


def test_the_rows_block_cannot_be_ended_by_a_record():
    text = json_block({"a": "</script><!-- & \u2028 \ud83d"})
    assert "<" not in text and ">" not in text and "&" not in text and text.isascii()
    assert json.loads(text) == {"a": "</script><!-- & \u2028 \ud83d"}


def test_a_large_sweep_index_stays_small(tmp_path):
    run = generated_sweep(tmp_path / "run")
    localfa("view", str(run))
    assert (run / "view.html").stat().st_size < 400_000  # 1,000 rows as data: about 300 bytes each

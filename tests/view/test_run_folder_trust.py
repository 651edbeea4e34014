"""A run folder names files; only the user's word or the file's own content opens them (issue 55,
cases 6 and 9). A forged manifest naming a trace file outside the run made `view` embed it; an
edited trace was shown beside diagnoses made on its old text without a word."""

from __future__ import annotations

import json
from pathlib import Path

from tests.view.conftest import localfa

SECRET = "TOPSECRET-0815"


def whowhen(path: Path, words: str, mistake_step: int = 3) -> Path:
    history = [{"role": "assistant", "name": ["Planner", "Coder"][i % 2], "content": f"step {i}: {words}"} for i in range(6)]
    path.write_text(json.dumps({"question": "rows?", "history": history, "mistake_agent": "Coder", "mistake_step": str(mistake_step)}))
    return path


def a_run(tmp_path: Path) -> tuple[Path, Path]:
    """(run directory of a scripted sweep over one trace, that trace's file)."""
    (tmp_path / "data").mkdir()
    trace = whowhen(tmp_path / "data" / "run.json", "counted the rows")
    run = tmp_path / "run"
    localfa("bench", str(tmp_path / "data"), "--methods", "all-at-once", "--engine", "scripted", "--out", str(run), "--no-progress")
    return run, trace


def test_a_forged_manifest_cannot_make_the_page_read_a_file_outside_the_run(tmp_path):
    run, _ = a_run(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    secret = whowhen(tmp_path / "elsewhere" / "secret.json", SECRET)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["trace_files"].append(str(secret))
    (run / "manifest.json").write_text(json.dumps(manifest))
    good = json.loads((run / "results.jsonl").read_text().splitlines()[0])
    forged = dict(good, trace="secret", source=str(secret), trace_sha256="0123456789abcdef")
    unstamped = dict(good, trace="secret2", source=str(secret), trace_sha256=None)
    with (run / "results.jsonl").open("a") as fh:
        fh.write(json.dumps(forged) + "\n" + json.dumps(unstamped) + "\n")
    index = tmp_path / "index.html"  # the sweep index and one page per trace: none opens the file
    localfa("view", str(run), "--out", str(index))
    assert not any(SECRET in p.read_text() for p in [index, *(tmp_path / "index-traces").glob("*.html")])
    page = tmp_path / "page.html"
    localfa("view", str(run), "--out", str(page), "--one-page")
    html = page.read_text()
    assert SECRET not in html
    assert "does not hold the trace these diagnoses were made on" in html
    assert html.count('<li id="t0-s') == 6  # the run's own trace, whose content its record names, is shown
    localfa("view", str(run), "--out", str(page), "--one-page", "--traces", str(tmp_path / "elsewhere"))
    assert SECRET in page.read_text()  # the user's word opens it


def test_view_says_when_a_trace_changed_since_its_diagnosis(tmp_path):
    run, trace = a_run(tmp_path)
    page = tmp_path / "page.html"
    quiet = localfa("view", str(run), "--out", str(page))
    assert "changed" not in quiet.stderr and "changed since" not in page.read_text()
    whowhen(trace, "counted the rows again, differently", mistake_step=1)
    said = localfa("view", str(run), "--out", str(page), "--traces", str(tmp_path / "data"))
    assert "warning:" in said.stderr and "has changed since 1 of its 1 diagnosis" in said.stderr
    html = page.read_text()
    assert "has changed since 1 of its 1 diagnosis" in html and "made on other content than the trace shown" in html
    assert "counted the rows again" in html  # shown as it is now
    localfa("view", str(run), "--out", str(page))  # without --traces the run folder alone cannot open other content
    assert "counted the rows again" not in page.read_text() and "if the file was edited since" in page.read_text()

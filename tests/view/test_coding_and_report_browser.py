"""Issue 37 points 3 and 4 in a real browser (the system's Chromium, as tests/view/test_browser.py):
the coding view reads like a terminal, and the report's labels, calibration and cascade stages
can be read.

Diagnoses come from the CLI on the scripted engine (``all-at-once``) and baselines; no model.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.view.conftest import REPO, localfa
from tests.view.test_browser import Opened, _visible_box, browser  # noqa: F401  (the shared fixture)

FIX = REPO / "tests" / "fixtures"
SHARED = REPO.parent / "shared" / "data" / "coding-agents" / "6e44b9__sweagenttestrepo-1c2844.traj"
PATCH_LINES = 60  # a patch longer than the fold threshold (40 lines): it must still be shown whole
LS = ["total 16", "drwxr-xr-x 2 dev dev 4096 Dec  5 11:00 .", "-rw-r--r-- 1 dev dev  120 Dec  5 11:00 dates.py"]
CASCADES = ("cascade:stages=random*3>heuristic:agree=2", "cascade:stages=random*3>heuristic:agree=3")


def _patch() -> str:
    body = [f"-    old_{i} = {i}\n+    new_{i} = {i}" for i in range(PATCH_LINES // 2)]
    return "diff --git a/src/dates.py b/src/dates.py\n--- a/src/dates.py\n+++ b/src/dates.py\n@@ -1,30 +1,30 @@\n" + "\n".join(body)


def _coding_run(folder: Path) -> Path:
    """The Claude Code stream-json fixture with terminal output that has ANSI colours and an
    ``ls -la`` listing, and a submitted patch as its result."""
    lines = [json.loads(x) for x in (FIX / "agent_logs" / "claude_code" / "stream.jsonl").read_text().splitlines()]
    for rec in lines:
        content = (rec.get("message") or {}).get("content")
        if isinstance(content, list) and content and content[0].get("tool_use_id") == "toolu_01run":
            content[0]["content"] += "\n<output>\n" + "\n".join(LS) + "\n</output>"
    lines[-1]["result"] = _patch()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "fix-dates.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _view(tmp_path: Path, trace: Path) -> Path:
    out = tmp_path / "diag.jsonl"
    localfa("diagnose", str(trace), "--engine", "scripted", "--method", "all-at-once", "--quiet", "--out", str(out))
    page = tmp_path / "view.html"
    localfa("view", str(out), "--traces", str(trace.parent), "--out", str(page))
    return page


def test_coding_view_reads_like_a_terminal(browser, tmp_path):  # noqa: F811
    trace = _coding_run(tmp_path / "traces")
    opened = Opened(browser, _view(tmp_path, trace))
    page = opened.page
    # the agent count is the one `localfa inspect` prints
    info = json.loads(
        subprocess.run([sys.executable, "-m", "localfa", "inspect", str(trace), "--json"], capture_output=True, text=True).stdout
    )
    assert len(info["agents"]) == 2
    assert "· 2 agents ·" in page.locator("section.trace p.muted").first.inner_text()
    # ANSI colours rendered, never shown raw
    ansi = page.locator("span.ansi")
    assert ansi.count() >= 2
    assert ansi.first.evaluate("e => getComputedStyle(e).color") == "rgb(201, 27, 0)"  # pytest's red F
    text = page.locator("body").inner_text()
    assert "\x1b" not in text and "[31m" not in text and "[0m" not in text
    # an `ls -la` listing is no diff: nothing outside a diff is painted as removed or added
    listing = page.locator("li.step pre.code", has_text="-rw-r--r--")
    assert listing.count() == 1  # laid out as code, where a diff's colours could apply
    assert listing.locator("span.del").count() == 0 and listing.locator("span.add").count() == 0
    # the submitted patch: shown whole, not folded, its lines coloured
    final = page.locator("div.final")
    _visible_box(page, "div.final pre.code")
    assert final.locator("details").count() == 0
    assert final.locator("span.del").count() == PATCH_LINES // 2 and final.locator("span.add").count() == PATCH_LINES // 2
    assert final.locator("span.hunk").count() == 1
    assert final.locator("span.del").nth(PATCH_LINES // 2 - 1).is_visible()
    assert final.locator("pre.code").evaluate("e => e.scrollHeight <= e.clientHeight")  # no inner scroll either
    assert final.locator("span.del").first.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(255, 235, 233)"
    opened.check_offline_and_clean()
    opened.screenshot("coding-view.png", tmp_path, full_page=True)


def test_swe_agent_history_only_demonstrations_and_tool_calls(browser, tmp_path):  # noqa: F811
    if not SHARED.is_file():
        pytest.skip("the shared SWE-agent sample is not on this machine")
    data = json.loads(SHARED.read_text())
    data.pop("trajectory")
    demo = {
        "role": "user",
        "content": "Here is a demonstration of how to solve a task",
        "agent": "main",
        "message_type": "demonstration",
        "is_demo": True,
    }
    data["history"].insert(2, demo)
    folder = tmp_path / "traces"
    folder.mkdir()
    trace = folder / "6e44b9__sweagenttestrepo-1c2844.traj"
    trace.write_text(json.dumps(data))
    opened = Opened(browser, _view(tmp_path, trace))
    page = opened.page
    heads = [page.locator("div.stephead").nth(i).inner_text() for i in range(page.locator("div.stephead").count())]
    assert heads and not any("tool · assistant" in h for h in heads)
    assert "demonstration" not in page.locator("ol.timeline").inner_text()
    first_action = page.locator("li.step", has_text="SWE-agent (gpt-4o)").first
    assert "find_file" in first_action.locator(".part", has_text="tool call").first.inner_text()
    opened.check_offline_and_clean()


def _report_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    data = FIX / "traces"
    localfa(
        "bench",
        str(data / "whowhen_algorithm.json"),
        str(data / "whowhen_handcrafted.json"),
        "--engine",
        "scripted",
        "--methods",
        ",".join([*CASCADES, "random"]),
        "--seeds",
        "0,1,2",
        "--out",
        str(run),
        "--no-progress",
    )
    return run


def test_report_labels_calibration_and_cascade_stages(browser, tmp_path):  # noqa: F811
    run = _report_run(tmp_path)
    markdown = localfa("report", str(run), "--markdown").stdout
    opened = Opened(browser, run / "report.html")
    page = opened.page
    labels = ["cascade:agree=2:stages=random*3>heuristic", "cascade:agree=3:stages=random*3>heuristic"]
    for chart in ("bars", "cost", "lines"):  # each label whole, in its wrapped lines
        shown = page.locator(f'svg[data-chart="{chart}"] text.label')
        texts = ["".join(shown.nth(i).locator("tspan").all_text_contents()).removesuffix(" ★") for i in range(shown.count())]
        assert set(labels) <= set(texts), (chart, texts)
        inside = "e => { const s = e.ownerSVGElement.getBoundingClientRect(), b = e.getBoundingClientRect(); return b.left >= s.left && b.right <= s.right + 0.5 }"
        assert all(shown.nth(i).evaluate(inside) for i in range(shown.count())), chart  # not clipped at the picture's edge
    # calibration: ticks at the bin edges that do not overlap, each point with its bin's count
    calib = page.locator("svg.chart", has_text="Calibration")
    ticks = calib.locator("text.xtick")
    boxes = [ticks.nth(i).bounding_box() for i in range(ticks.count())]
    assert ticks.all_text_contents() == ["0", "0.2", "0.4", "0.6", "0.8", "1"]
    assert all(a["x"] + a["width"] < b["x"] for a, b in zip(boxes, boxes[1:]))
    notes = calib.locator("text.pointnote")
    assert notes.count() >= 1 and all(t.startswith("n=") for t in notes.all_text_contents())
    # the share of runs each cascade stage answered, in both reports
    for label in labels:
        rows = page.locator(f'table.stages tr[data-cascade="{label}"]')
        assert rows.count() == 2
        shares = [rows.nth(i).locator("td.share").inner_text() for i in range(2)]
        assert sum(int(s.split("/")[0]) for s in shares) == 6 and all(s.split(" ")[0].endswith("/6") for s in shares)
        assert f"| {label} | 0 |" in markdown.replace("\\|", "|")
    opened.check_offline_and_clean()
    opened.screenshot("report-cascades.png", tmp_path, full_page=True)


def test_view_method_takes_the_spec_in_any_key_order(browser, tmp_path):  # noqa: F811
    run = _report_run(tmp_path)
    page_path = tmp_path / "one.html"
    localfa("view", str(run), "--method", "cascade:stages=random*3>heuristic:agree=3", "--one-page", "--out", str(page_path))
    opened = Opened(browser, page_path)
    badges = set(opened.page.locator("article.diag .verdict .badge").all_inner_texts())
    assert badges == {"cascade:agree=3:stages=random*3>heuristic"}
    opened.check_offline_and_clean()
    missing = subprocess.run(
        [sys.executable, "-m", "localfa", "view", str(run), "--method", "cascade:agree=9"], capture_output=True, text=True, cwd=REPO
    )
    assert missing.returncode == 2
    assert (
        "the methods in this file: cascade:agree=2:stages=random*3>heuristic, cascade:agree=3:stages=random*3>heuristic, random"
        in missing.stderr
    )


def test_verdict_lines_are_not_hard_wrapped_when_piped(tmp_path):
    trace = _coding_run(tmp_path / "a-folder-whose-name-makes-the-summary-line-longer-than-eighty-columns")
    out = tmp_path / "d.jsonl"
    proc = localfa("diagnose", str(trace), "--engine", "scripted", "--method", "all-at-once", "--out", str(out))
    (line,) = proc.stdout.splitlines()
    assert line.startswith("fix-dates: step") and line.endswith(f" → {out}") and len(line) > 80 and " tokens, " in line
    proc = localfa("diagnose", str(trace), "--engine", "scripted", "--method", "all-at-once", "--json")  # the line goes to stderr
    summary = [line for line in proc.stderr.splitlines() if line.startswith("fix-dates: step")]
    assert len(summary) == 1 and len(summary[0]) > 80 and json.loads(proc.stdout)["trace"] == "fix-dates", proc.stderr


def test_view_of_an_inspect_ai_sample(browser, tmp_path):  # noqa: F811
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "sums.eval").write_bytes((FIX / "agent_logs" / "inspect_ai" / "sums.eval").read_bytes())
    run = tmp_path / "run"
    localfa("bench", str(logs), "--failed-only", "--engine", "scripted", "--methods", "random", "--out", str(run), "--no-progress")
    localfa("view", str(run), "--out", str(tmp_path / "view.html"))
    opened = Opened(browser, tmp_path / "view.html")
    page = opened.page
    assert page.locator("section.trace h2").all_inner_texts() == ["sums/sum-2"]
    assert page.locator("section.trace li.step").count() == 6 and page.locator("p.err").count() == 0
    assert "What is 3 + 4?" in page.locator("div.task").first.inner_text()
    opened.check_offline_and_clean()

"""Reports: the markdown table, the self-contained HTML, the CLI, and an empty run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

from localfa.bench.report import html_report, markdown_report, write_report
from localfa.results import ResultRecord

LOCALFA = [sys.executable, "-m", "localfa"]  # the `localfa` command (localfa/__main__.py)


def rec(
    trace, method, step, label_step, *, agent="A", subset="hand-crafted", seed=0, evidence=(), error=None, reasoning="because", calls=2
):
    return ResultRecord.from_line(
        json.dumps(
            {
                "trace": trace,
                "method": method,
                "budget": "none",
                "seed": seed,
                "subset": subset,
                "step": step,
                "agent": agent,
                "reasoning": reasoning,
                "evidence": list(evidence),
                "spans": None,
                "stop_reason": "error" if error else "submitted",
                "error": error,
                "usage": {"calls": calls, "prompt_tokens": 1000, "completion_tokens": 50, "cached_tokens": 400},
                "wall_s": 1.0,
                "details": {},
                "label": {"mistake_step": label_step, "mistake_agent": "A", "fault_steps": [label_step], "high_impact_steps": []},
            }
        )
    )


RECORDS = [
    rec("whowhen/hand-crafted/1", "safari", 7, 7, evidence=['the agent said "<b>done</b>" too early']),
    rec("whowhen/hand-crafted/2", "safari", 17, 7),  # substring trap: counted only by the W&W scorer
    rec("whowhen/algorithm-generated/1", "safari", 2, 3, subset="algorithm-generated"),
    rec("whowhen/algorithm-generated/2", "safari", None, 1, subset="algorithm-generated", error="EngineError: boom"),
    rec("whowhen/hand-crafted/1", "all-at-once", 6, 7, agent="B", calls=1),
    rec("whowhen/hand-crafted/2", "all-at-once", 7, 7, calls=1),
]
MANIFEST = {
    "model": {"name": "SmolLM2-135M-Instruct", "sha256": "f" * 64},
    "engine": {"backend": "vllm"},
    "localfa_version": "0.1.0",
    "git_revision": "abc",
    "created": "2026-01-01T00:00:00",
    "seeds": [0],
    "budgets": ["none"],
    "methods": {"all-at-once": {}, "safari": {}},
}


def write_run(tmp_path: Path, records=RECORDS, manifest=MANIFEST) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_text("".join(r.to_line() for r in records))
    if manifest is not None:
        (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def test_markdown_table_values(tmp_path):
    md = markdown_report(RECORDS, MANIFEST, substring=True, n_boot=200)
    lines = md.splitlines()
    header = next(x for x in lines if x.startswith("| method"))
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "method",
        "subset",
        "traces",
        "seeds × traces",
        "runs",
        "agent acc",
        "step acc",
        "±1",
        "±2",
        "±3",
        "±4",
        "±5",
        "calls/trace",
        "tokens/trace",
        "cached/trace",
        "errors",
    ]
    # the report states its aggregation and interval method
    assert ("Aggregation: per-trace mean over seeds, then mean over traces. Intervals: 95% percentile bootstrap over traces") in md
    # manifest order: all-at-once first; hand-crafted: 1 of 2 exact, with n=2 the interval spans [0, 1]
    rows = [x for x in lines if x.startswith("| all-at-once") or x.startswith("| safari")]
    assert rows[0].startswith("| all-at-once | hand-crafted | 2 | 1 × 2 | 2 | 0.500 [0.00, 1.00] | 0.500 [0.00, 1.00] |")
    safari_overall = next(x for x in rows if x.startswith("| safari | overall"))
    cells = [c.strip() for c in safari_overall.strip("|").split("|")]
    # safari: traces 4, step exact 1/4; ±1: steps 7,·,2(vs 3),error -> 2/4; calls 2; tokens 1050; errors 1
    assert cells[2:5] == ["4", "1 × 4", "4"]
    assert cells[6].startswith("0.250 [") and cells[7].startswith("0.500 [")
    assert cells[-4:] == ["2.0", "1,050", "400", "1"]
    assert "- safari: 1 of 4 runs are errors, scored as misses." in lines
    # the substring table says what it is and shows the inflated number beside the exact one
    assert "### Who&When reference scorer (substring match; for comparison with published tables only)" in lines
    sub = [x for x in lines if x.startswith("| safari | hand-crafted")][-1]
    assert sub == "| safari | hand-crafted | 2 | 0.500 [0.00, 1.00] | 1.000 [1.00, 1.00] |"


def test_report_counts_engine_errors_and_shows_an_unbalanced_run():
    records = [
        rec("t1", "m", 1, 1, seed=0),
        rec("t1", "m", 1, 1, seed=1),
        rec("t2", "m", None, 2, seed=0, error="EngineError: http://127.0.0.1:9/v1: HTTP 503: overloaded"),
        # t2 has no seed 1: a partial run
    ]
    md = markdown_report(records, None, n_boot=0)
    row = next(x for x in md.splitlines() if x.startswith("| m | hand-crafted"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:5] == ["2", "2 × 2 (3 of 4 runs)", "3"]
    assert cells[6] == "0.500 [0.50, 0.50]"  # t1: 1.0, t2: 0.0 (an error is a miss); no resampling with n_boot=0
    assert cells[-1] == "1 (1 engine)"
    notes = [x for x in md.splitlines() if x.startswith("- m:")]
    assert notes == [
        "- m: 1 of 3 runs are errors, scored as misses; 1 failed on engine errors (timeouts, refused connections, "
        "server errors): run the same `localfa bench` command again to retry them.",
        "- m: unbalanced run, 3 runs for 2 seeds × 2 traces.",
    ]


def test_markdown_without_substring_flag_hides_it():
    md = markdown_report(RECORDS, MANIFEST, n_boot=50)
    assert "substring" not in md and "W&W" not in md


def test_html_is_self_contained_and_escaped(tmp_path):
    doc = html_report(RECORDS, MANIFEST, run_dir="RUN", n_boot=100)
    assert "<script" not in doc and "<link" not in doc and "@import" not in doc and "url(" not in doc
    assert "src=" not in doc
    urls = set(re.findall(r"https?://[^\s\"'<>]+", doc))
    assert urls <= {"http://www.w3.org/2000/svg"}  # the SVG namespace only: nothing is fetched
    assert "&lt;b&gt;done&lt;/b&gt;" in doc and "<b>done</b>" not in doc
    assert doc.count("<polyline") == 2  # one curve per method
    assert "SmolLM2-135M-Instruct" in doc and "whowhen/hand-crafted/2" in doc
    assert "EngineError: boom" in doc

    class Check(HTMLParser):
        def __init__(self):
            super().__init__()
            self.stack = []

        def handle_starttag(self, tag, attrs):
            if tag not in ("meta", "br", "wbr", "circle", "line", "rect", "polyline"):
                self.stack.append(tag)

        def handle_endtag(self, tag):
            if tag in ("circle", "line", "rect", "polyline", "meta", "br", "wbr"):
                return
            assert self.stack and self.stack[-1] == tag, (tag, self.stack[-5:])
            self.stack.pop()

    c = Check()
    c.feed(doc)
    assert c.stack == []


def test_report_cli_writes_html_and_prints_table(tmp_path):
    run = write_run(tmp_path)
    p = subprocess.run(
        [*LOCALFA, "report", str(run), "--substring", "--json", str(tmp_path / "m.json"), "--markdown"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("## localfa bench report — SmolLM2-135M-Instruct on vllm")
    assert p.stdout == markdown_report(RECORDS, MANIFEST, substring=True)
    assert (run / "report.html").read_text() == html_report(RECORDS, MANIFEST, run_dir=str(run))
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert [(g["method"], g["subset"]) for g in metrics] == [
        ("all-at-once", "hand-crafted"),
        ("all-at-once", "overall"),
        ("safari", "algorithm-generated"),
        ("safari", "hand-crafted"),
        ("safari", "overall"),
    ]
    safari = metrics[-1]
    assert (safari["traces"], safari["records"], safari["errors"], safari["seeds"]) == (4, 4, 1, [0])
    assert safari["metrics"]["step"]["mean"] == 0.25 and safari["metrics"]["step"]["n"] == 4
    assert safari["aggregation"] == "per-trace mean over seeds, then mean over traces"
    assert safari["interval"] == "95% percentile bootstrap over traces"


def test_empty_run_and_partial_line(tmp_path):
    run = write_run(tmp_path, records=[], manifest=None)
    md, path = write_report(run)
    assert md.splitlines()[-1] == "No records in this run yet." and "<p>No records in this run yet.</p>" in path.read_text()
    # a run killed mid-write: the partial last line is ignored, not an error
    with open(run / "results.jsonl", "a") as fh:
        fh.write(RECORDS[0].to_line() + '{"trace": "x", "meth')
    md, _ = write_report(run)
    assert "| safari | hand-crafted | 1 | 1 × 1 | 1 | 1.000 [1.00, 1.00] |" in md


def test_report_cli_bad_input(tmp_path):
    for target, needle in ((tmp_path / "nope", "no such run directory"), (tmp_path, "no results file")):
        p = subprocess.run([*LOCALFA, "report", str(target)], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2
        err = p.stderr.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and needle in err[0]


def _report(run: Path, *args: str) -> subprocess.CompletedProcess:
    p = subprocess.run([*LOCALFA, "report", str(run), *args], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p


def test_the_terminal_table_is_short_and_fits_100_columns(tmp_path):
    long = "cascade:agree=3:stages=random*3>heuristic>all-at-once:max_chars=6000"
    records = [*RECORDS, rec("whowhen/hand-crafted/1", long, 7, 7), rec("whowhen/hand-crafted/2", long, 6, 7)]
    run = write_run(tmp_path, records=records, manifest=MANIFEST)
    out = _report(run).stdout
    lines = out.splitlines()
    assert lines[0] == f"localfa report: {run} (SmolLM2-135M-Instruct on vllm): 8 records, 4 traces, 3 methods"
    table = lines[lines.index(next(x for x in lines if x.startswith("method / subset"))) :]
    assert all(len(x) <= 100 for x in table if x and not x.startswith("Everything else"))
    assert table[0].split() == [
        "method",
        "/",
        "subset",
        "traces",
        "runs",
        "agent",
        "acc",
        "[95%]",
        "step",
        "acc",
        "[95%]",
        "tokens/trace",
        "errors",
    ]
    safari = next(x for x in table if x.startswith("safari "))
    assert safari.split()[:3] == ["safari", "4", "4"] and "0.250 [" in safari and safari.split()[-1] == "1"
    assert "  hand-crafted" in out and "  algorithm-generated" in out  # subsets under their method
    assert f"Everything else (±k, spans, cost, stages, charts, each trace): {run / 'report.html'}; --json FILE, --markdown." in lines
    assert "safari: 1 of 4 runs are errors, scored as misses." in out


def _unlabelled(r: ResultRecord, **update) -> ResultRecord:
    return r.model_copy(update={"label": None, **update})


def test_an_unlabelled_sweep_says_so_once_and_shows_what_is_known(tmp_path):
    records = [
        _unlabelled(RECORDS[0], category="Invalid Invocation"),
        _unlabelled(RECORDS[1], category="Invalid Invocation"),
        _unlabelled(RECORDS[2]),
        _unlabelled(RECORDS[3]),
        _unlabelled(RECORDS[4], confidence=0.5),
        _unlabelled(RECORDS[5], confidence=1.0),
    ]
    run = write_run(tmp_path, records=records)
    out = _report(run).stdout
    lines = out.splitlines()
    assert lines[1] == f"This sweep has no labels, so there is no accuracy to report; `localfa summarize {run}` says what failed."
    assert "acc [95%]" not in out and out.count("no labels") == 1
    rows = {x.split()[0]: x.split() for x in lines if x.startswith(("safari ", "all-at-once "))}
    assert rows["safari"][1:4] == ["4", "4", "1"] and rows["safari"][4] == "—"  # traces, runs, errors, no confidence
    assert rows["all-at-once"][4] == "0.75"  # mean confidence
    assert "  safari       A 1.00" in lines and "  all-at-once  B 0.50, A 0.50" in lines  # agents named
    assert "  safari       Invalid Invocation 1.00" in lines  # its categories
    assert "The methods name the same step in 0 of the 2 traces two or more of them answered." in lines
    page = (run / "report.html").read_text()
    assert "This sweep has no labels" in page and "<h2>Without labels</h2>" in page
    assert "<h2>Charts</h2>" not in page and 'data-chart="lines"' not in page and "step acc" not in page  # no empty accuracy charts


def test_a_partly_labelled_sweep_says_what_accuracy_is_over(tmp_path):
    run = write_run(tmp_path, records=[RECORDS[0], _unlabelled(RECORDS[1]), RECORDS[4], _unlabelled(RECORDS[5])])
    out = _report(run).stdout
    assert "1 of 2 traces carry labels: accuracy is over those." in out.splitlines()
    assert "1 of 2 traces carry labels: accuracy is over those." in (run / "report.html").read_text()

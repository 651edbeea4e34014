"""`localfa diagnose`'s own errors: bad input stops it with one line; a failing trace does not."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from localfa.bench.metrics import score_record
from localfa.cli.diagnose import verdict_line
from localfa.results import ResultRecord

LOCALFA = [sys.executable, "-m", "localfa"]
ENV = {**os.environ, "COLUMNS": "400"}  # one summary line per trace, unwrapped


def diagnose(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*LOCALFA, "diagnose", *args, "--engine", "scripted"], capture_output=True, text=True, timeout=300, env=ENV)


def unlabelled(path: Path) -> Path:
    path.write_text(
        json.dumps(
            [
                {"role": "user", "content": "Find the file."},
                {"role": "assistant", "name": "Coder", "content": "I looked in /tmp."},
                {"role": "assistant", "name": "Checker", "content": "FINAL ANSWER: none"},
            ]
        )
    )
    return path


def test_a_lone_bad_trace_is_exit_2_and_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"history": [{"content": "hi", "name": "A"}, ')
    p = diagnose(str(bad), "--method", "random")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.splitlines() == [p.stderr.strip()]
    assert p.stderr.startswith(f"error: {bad}: truncated JSON: the file ends before the value is complete")


def test_an_unreadable_trace_among_good_ones_is_its_own_error_record(whowhen, tmp_path):
    """Issue 25.10: `diagnose good.json unreadable.json` diagnoses the good one, writes an error
    record for the unreadable one (the others are not refused) and exits 1."""
    good = shutil.copy(whowhen / "algorithm-generated" / "1.json", tmp_path / "good.json")
    bad = tmp_path / "unreadable.json"
    bad.write_text('{"history": [{"content": "hi", "name": "A"}, ')
    other = shutil.copy(whowhen / "hand-crafted" / "1.json", tmp_path / "other.json")
    out = tmp_path / "d.jsonl"
    p = diagnose(str(good), str(bad), str(other), "--method", "all-at-once", "--out", str(out))
    assert p.returncode == 1, p.stderr
    assert f"error: {bad}: truncated JSON" in p.stderr
    recs = [ResultRecord.from_line(x) for x in out.read_text().splitlines()]
    assert [(r.trace, r.source) for r in recs] == [("good", str(good)), ("unreadable", str(bad)), ("other", str(other))]
    assert recs[0].error is None and recs[0].step is not None and recs[2].error is None
    assert recs[1].error.startswith("TraceError: truncated JSON") and recs[1].error_kind == "unreadable" and recs[1].step is None
    assert recs[1].method == "all-at-once" and recs[1].finished_at


def test_one_failing_trace_gets_an_error_record_and_the_others_are_diagnosed(whowhen, tmp_path):
    data = tmp_path / "traces"
    data.mkdir()
    shutil.copy(whowhen / "algorithm-generated" / "1.json", data / "1.json")
    unlabelled(data / "nolabel.json")
    out = tmp_path / "d.jsonl"
    # scale:2 needs a labelled fault: the unlabelled trace fails in the method, the labelled one runs
    p = diagnose(str(data), "--method", "all-at-once", "--budget", "scale:2", "--out", str(out))
    assert p.returncode == 1, p.stderr
    recs = [ResultRecord.from_line(x) for x in out.read_text().splitlines()]
    assert [r.trace for r in recs] == ["1", "nolabel"]
    ok, failed = recs
    assert ok.error is None and ok.step is not None and ok.usage["calls"] == 1
    assert (ok.method, ok.method_name, ok.budget, ok.n_steps) == ("all-at-once", "all-at-once", "scale:2", 6)  # 1.json has 6 steps
    assert ok.label is not None and ok.label.mistake_step == 0
    assert failed.error.startswith("BudgetError: budget scale:2: the trace has no labelled fault step")
    assert (failed.error_kind, failed.stop_reason, failed.step, failed.label) == ("final", "error", None, None)
    # one readable line per trace on stdout, scored with the report's scorer, saying where the record went
    lines = p.stdout.splitlines()
    assert lines == [verdict_line(ok, out), verdict_line(failed, out)]
    hit = "hit" if score_record(ok)["step"] == 1.0 else "miss"
    assert f"· label step 0 ({hit})" in lines[0] and "· 1 call, " in lines[0] and lines[0].endswith(f" → {out}")
    assert lines[1] == "nolabel: error: BudgetError: budget scale:2: the trace has no labelled fault step to scale from"

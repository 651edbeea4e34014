"""`localfa inspect --lines A:B --json` carries the same text per line as the plain view."""

from __future__ import annotations

import json
import subprocess
import sys

from localfa.traces.lineview import LineView
from localfa.traces.load import load_trace

LOCALFA = [sys.executable, "-m", "localfa"]


def test_json_rows_match_the_numbered_view(whowhen):
    path = whowhen / "algorithm-generated" / "1.json"
    view = LineView(load_trace(path), width=200)
    plain = subprocess.run([*LOCALFA, "inspect", str(path), "--lines", "0:5"], capture_output=True, text=True, timeout=120)
    js = subprocess.run([*LOCALFA, "inspect", str(path), "--lines", "0:5", "--json"], capture_output=True, text=True, timeout=120)
    assert plain.returncode == js.returncode == 0, (plain.stderr, js.stderr)
    rows = json.loads(js.stdout)["lines"]
    assert [r["line"] for r in rows] == [0, 1, 2, 3, 4, 5]
    numbered = plain.stdout.splitlines()[:6]
    for row, shown in zip(rows, numbered):
        label, text = shown.split("| ", 1)
        assert int(label.split()[0]) == row["line"] and f"(step {row['step']})" in label
        assert row["text"] == text == view.lines[row["line"]]
    assert rows[0]["text"] == view.lines[0] != view.lines[-1]  # row 0 is line 0, not the last line

"""The trace view of a coding run: code and diffs unwrapped in monospace, diff lines coloured,
long command output folded with its head and tail shown, evidence marks kept inside code."""

from __future__ import annotations

import re
from pathlib import Path

from localfa.traces.load import load_trace
from localfa.view import write_view
from localfa.view.code import FOLD_LINES, HEAD_LINES, TAIL_LINES, code_text_html, is_code_heavy
from localfa.view.marks import find_quotes

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "coding"


def test_a_diff_is_a_pre_block_with_coloured_lines() -> None:
    text = "Submitting:\ndiff --git a/x.py b/x.py\n@@ -3,2 +3,2 @@ def f():\n-    return 1\n+    return 2\n     pass\nThanks."
    html = code_text_html(text, [])
    assert html.startswith('<div class="text">Submitting:</div><pre class="code">')
    assert '<span class="hunk">@@ -3,2 +3,2 @@ def f():</span>' in html
    assert '<span class="del">-    return 1</span>' in html and '<span class="add">+    return 2</span>' in html
    assert html.endswith('</pre><div class="text">Thanks.</div>')
    assert not is_code_heavy("just prose\nover two lines")


def test_long_output_is_folded_with_head_and_tail_and_marks_survive() -> None:
    lines = [f"{i}:    x_{i} = compute({i})" for i in range(1, 201)]
    text = "<returncode>0</returncode>\n<output>\n" + "\n".join(lines) + "\n</output>"
    quote = "x_150 = compute(150)"
    html = code_text_html(text, find_quotes(text, [quote]))
    head, rest = html.split('<details class="fold mid">', 1)
    middle, tail = rest.split("</details>", 1)
    assert "1:    x_1 = compute(1)" in head and f"{HEAD_LINES - 2}:" in head and "x_50 " not in head
    assert "x_150 = compute(150)" in middle and '<mark class="ev" data-quote="0">x_150 = compute(150)</mark>' in middle
    assert "200:    x_200 = compute(200)" in tail and "&lt;/output&gt;" in tail
    total = len(text.split("\n"))
    assert f"{total - HEAD_LINES - TAIL_LINES:,} lines" in middle and total > FOLD_LINES
    assert code_text_html(text, [], open_=True).count('<details class="fold mid" open>') == 1


def test_the_page_of_a_coding_run(tmp_path: Path) -> None:
    trace = load_trace(FIX / "mini_swe_agent.traj.json")
    record = {
        "trace": trace.id,
        "source": trace.source,
        "method": "random",
        "seed": 0,
        "step": 6,
        "agent": trace.steps[6].agent,
        "reasoning": "r",
        "evidence": ["max(len(xs) - 1, 1)"],
        "details": {},
    }
    page = write_view([record], tmp_path / "v.html", traces={trace.id: trace}).read_text()
    assert page.count('<pre class="code">') >= 5
    assert '<span class="add">+    return sum(xs) / <mark' in page
    assert len(re.findall(r'<span class="obs">observation</span>', page)) == 7
    assert 'data-quote="0">max(len(xs) - 1, 1)</mark>' in page

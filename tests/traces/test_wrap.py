"""The line view keeps code legible in coding runs: a line of code, a diff or a numbered listing
starts its own physical line; a long line is never cut inside an escape or a number."""

from __future__ import annotations

import json

from localfa.traces.lineview import LineView, step_record
from localfa.traces.model import Step, Trace
from localfa.traces.wrap import code_line_ends, wrap_record

DIFF = (
    "I will submit this patch:\n"
    "diff --git a/astropy/io/ascii/rst.py b/astropy/io/ascii/rst.py\n"
    "index abdeba8efb..0720660a08 100644\n"
    "--- a/astropy/io/ascii/rst.py\n"
    "+++ b/astropy/io/ascii/rst.py\n"
    "@@ -57,10 +57,11 @@ class RST(FixedWidth):\n"
    "-    def __init__(self):\n"
    "+    def __init__(self, header_rows=None):\n"
    "     def write(self, lines):\n"
    "That is all."
)


def _trace(content: str, fmt: str) -> Trace:
    return Trace(id="t", source="t.json", format=fmt, steps=[Step(index=0, agent="a", role="assistant", content=content)])


def _pieces(record: str, starts: list[int]) -> list[str]:
    return [record[a:b] for a, b in zip(starts, starts[1:] + [len(record)])]


def test_every_diff_line_starts_a_physical_line_in_a_coding_run() -> None:
    view = LineView(_trace(DIFF, "mini-swe-agent"))
    lines = view.lines
    assert lines[1].startswith("diff --git a/astropy") and lines[1].endswith("\\n")
    assert [line[:4] for line in lines[2:9]] == ["inde", "--- ", "+++ ", "@@ -", "-   ", "+   ", "    "]
    assert lines[-1] == 'That is all."}'
    assert json.loads("".join(lines))["content"] == DIFF
    # the same step in a Who&When-style chat log keeps the packed layout it always had
    packed = LineView(_trace(DIFF, "messages"))
    assert packed.total_lines < view.total_lines
    assert packed.lines == _pieces(step_record(packed.trace.steps[0]), wrap_record(step_record(packed.trace.steps[0]), 200))


def test_fenced_code_and_numbered_listings_are_code() -> None:
    text = "Here:\n```python\nx = 1\ny = 2\n```\nprose one\nprose two\n  1712\tdef f():\n12:    return 1\nend"
    rec = step_record(Step(index=0, agent="a", role="assistant", content=text))
    ends = code_line_ends(rec)
    ended = [rec[:e].rsplit("\\n", 2)[-2] for e in ends]
    assert ended == ["```python", "x = 1", "y = 2", "```", "  1712\\tdef f():", "12:    return 1"]


def test_long_code_lines_are_never_cut_inside_an_escape_or_a_number() -> None:
    long_line = "+" + " ".join(f"value_{i}=\\u00e9\\t{i * 1234567}" for i in range(40))
    text = "diff --git a/x b/x\n@@ -1 +1 @@\n" + long_line.encode().decode("unicode_escape") + "\n"
    rec = step_record(Step(index=0, agent="a", role="assistant", content=text))
    for width in (20, 37, 80, 200):
        pieces = _pieces(rec, wrap_record(rec, width, code=True))
        assert "".join(pieces) == rec and all(0 < len(p) <= width for p in pieces)
        for a, b in zip(pieces, pieces[1:]):
            trailing = len(a) - len(a.rstrip("\\"))
            assert trailing % 2 == 0, (a, b)  # no escape split across lines
            assert not (a[-1].isdigit() and b[0].isdigit()), (a, b)  # no number split

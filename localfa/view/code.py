"""A step's text on the trace view when it is code-heavy: code and diffs in monospace without
wrapping (a diff's line numbers never break), long outputs folded with their head and tail shown.

Lines of code are found as the line view finds them (`localfa.traces.wrap.code_lines`): fenced
blocks, command output, diffs, numbered listings. A diff's added, removed and hunk lines are
coloured. A text longer than `FOLD_LINES` lines shows its first `HEAD_LINES` and last
`TAIL_LINES` lines, the middle behind a fold that says how much it holds (open when a quote or
the verdict points into the step). Evidence marks are kept: each block is marked with the quote
ranges that fall inside it.
"""

from __future__ import annotations

from localfa.traces.wrap import code_lines
from localfa.view.html import e
from localfa.view.marks import Range, marked_html

FOLD_LINES = 40
HEAD_LINES = 12
TAIL_LINES = 8


def _clip(ranges: list[Range], a: int, b: int) -> list[Range]:
    """The parts of `ranges` inside [a, b), shifted to start at 0."""
    return [(max(s, a) - a, min(t, b) - a, q) for s, t, q in ranges if s < b and t > a]


def _line_class(line: str) -> str:
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+") and not line.startswith("+++"):
        return "add"
    if line.startswith("-") and not line.startswith("---"):
        return "del"
    return ""


def _blocks(text: str, start: int, lines: list[str], code: list[bool], ranges: list[Range]) -> str:
    """Consecutive code lines as one <pre>, prose lines as one text block; `start` is the offset
    of lines[0] in the step's text."""
    out: list[str] = []
    at, i = start, 0
    while i < len(lines):
        j = i
        while j < len(lines) and code[j] == code[i]:
            j += 1
        if code[i]:
            rows = []
            for line in lines[i:j]:
                inner = marked_html(line, _clip(ranges, at, at + len(line)))
                cls = _line_class(line)
                rows.append(f'<span class="{cls}">{inner}</span>' if cls else inner)
                at += len(line) + 1
            out.append(f'<pre class="code">{chr(10).join(rows)}</pre>')
        else:
            chunk = "\n".join(lines[i:j])
            out.append(f'<div class="text">{marked_html(chunk, _clip(ranges, at, at + len(chunk)))}</div>')
            at += len(chunk) + 1
        i = j
    return "".join(out)


def is_code_heavy(text: str) -> bool:
    """Whether `text` holds any line of code (the page then lays it out with `code_text_html`)."""
    return any(code_lines(text.split("\n")))


def code_text_html(text: str, ranges: list[Range], open_: bool = False) -> str:
    """`text` as code and prose blocks, the middle of a long text folded (head and tail shown)."""
    lines = text.split("\n")
    code = code_lines(lines)
    if len(lines) <= FOLD_LINES:
        return _blocks(text, 0, lines, code, ranges)
    head, tail = lines[:HEAD_LINES], lines[len(lines) - TAIL_LINES :]
    middle = lines[HEAD_LINES : len(lines) - TAIL_LINES]
    mid_start = sum(len(x) + 1 for x in head)
    tail_start = mid_start + sum(len(x) + 1 for x in middle)
    hidden = sum(len(x) + 1 for x in middle)
    fold = (
        f'<details class="fold mid"{" open" if open_ else ""}><summary><span class="muted">… {len(middle):,} lines '
        f"({hidden:,} characters) folded; the first {HEAD_LINES} and last {TAIL_LINES} are shown</span></summary>"
        f"{_blocks(text, mid_start, middle, code[HEAD_LINES : len(lines) - TAIL_LINES], ranges)}</details>"
    )
    return (
        _blocks(text, 0, head, code[:HEAD_LINES], ranges)
        + fold
        + _blocks(text, tail_start, tail, code[len(lines) - TAIL_LINES :], ranges)
        + f'<div class="muted note">{e(f"{len(lines):,} lines in all")}</div>'
    )

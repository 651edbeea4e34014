"""A step's text on the trace view when it is code-heavy: code and diffs in monospace without
wrapping (a diff's line numbers never break), long outputs folded with their head and tail shown,
terminal output as a terminal shows it.

Lines of code are found as the line view finds them (`localfa.traces.wrap.code_lines`): fenced
blocks, command output, diffs, numbered listings. Added, removed and hunk lines are coloured only
inside a diff (from a ``diff --git`` / ``--- a`` + ``+++ b`` header or an ``@@`` hunk to the first
line that is no diff line): ``ls -la``'s ``-rw-r--r--`` is not a removal. ANSI colour codes
(pytest, git, compilers) are rendered as the colours they name; other escape sequences are
dropped. A text longer than `FOLD_LINES` lines shows its first `HEAD_LINES` and last `TAIL_LINES`
lines, the middle behind a fold that says how much it holds (open when a quote or the verdict
points into the step); a text holding a diff (a submitted patch) is never folded. Evidence marks
are kept: each block is marked with the quote ranges that fall inside it.
"""

from __future__ import annotations

import re

from localfa.traces.wrap import code_lines
from localfa.view.html import e
from localfa.view.marks import Range, marked_html

FOLD_LINES = 40
HEAD_LINES = 12
TAIL_LINES = 8


def _clip(ranges: list[Range], a: int, b: int) -> list[Range]:
    """The parts of `ranges` inside [a, b), shifted to start at 0."""
    return [(max(s, a) - a, min(t, b) - a, q) for s, t, q in ranges if s < b and t > a]


_HUNK = re.compile(r"^@@ -\d+(,\d+)? \+\d+(,\d+)? @@")
_DIFF_HEAD = re.compile(r"^(diff --git |diff -[a-zA-Z]*u|index [0-9a-f]+\.\.[0-9a-f]+)")
_DIFF_BODY = re.compile(r"^([ +\-\\]|@@ |diff |index |new file|deleted file|similarity |rename |old mode|new mode|Binary files|$)")
_ESCAPE = re.compile(r"\x1b\[([0-9;]*)([A-Za-z])|\x1b[()][A-Z0-9]|\x1b[=>]")
_ANSI_COLOURS = ("#1e1e1e", "#c91b00", "#00a600", "#a68a00", "#0225c7", "#b000b0", "#00a6b2", "#7f7f7f")
_ANSI_BRIGHT = ("#676767", "#e5534b", "#2da44e", "#bf8700", "#4a6cf7", "#d25bd2", "#1fb5c1", "#bbbbbb")


def diff_lines(lines: list[str]) -> list[bool]:
    """Which lines are inside a diff: from a header (``diff --git``, ``--- a/x`` followed by
    ``+++ b/x``) or a hunk (``@@ -1,2 +1,3 @@``) to the first line no diff holds."""
    out: list[bool] = []
    inside = False
    for i, line in enumerate(lines):
        starts = bool(_HUNK.match(line) or _DIFF_HEAD.match(line))
        starts = starts or (line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "))
        inside = starts or (inside and bool(_DIFF_BODY.match(line)))
        out.append(inside)
    return out


def _line_class(line: str, in_diff: bool) -> str:
    if not in_diff:
        return ""
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+") and not line.startswith("+++ "):
        return "add"
    if line.startswith("-") and not line.startswith("--- "):
        return "del"
    return ""


def _sgr_style(codes: str, style: dict[str, str]) -> None:
    """Apply one ``ESC[...m`` (select graphic rendition) to the running style."""
    for code in (codes or "0").split(";"):
        n = int(code) if code.isdigit() else 0
        if n == 0:
            style.clear()
        elif n == 1:
            style["font-weight"] = "bold"
        elif n in (22, 21):
            style.pop("font-weight", None)
        elif 30 <= n <= 37:
            style["color"] = _ANSI_COLOURS[n - 30]
        elif 90 <= n <= 97:
            style["color"] = _ANSI_BRIGHT[n - 90]
        elif n == 39:
            style.pop("color", None)
        elif 40 <= n <= 47:
            style["background"] = _ANSI_COLOURS[n - 40] + "33"
        elif n == 49:
            style.pop("background", None)


def has_ansi(text: str) -> bool:
    return "\x1b" in text


def strip_ansi(text: str) -> str:
    """`text` without terminal escape sequences."""
    return _ESCAPE.sub("", text)


def _ansi_html(line: str, ranges: list[Range], style: dict[str, str]) -> str:
    """A line holding escape sequences: each run of text in the colours the codes before it set
    (`style` carries over to the next line, as on a terminal); quote marks kept by offset."""
    out: list[str] = []
    at = 0
    for m in _ESCAPE.finditer(line):
        out.append(_styled(line, at, m.start(), ranges, style))
        if m.group(2) == "m":
            _sgr_style(m.group(1), style)
        at = m.end()
    out.append(_styled(line, at, len(line), ranges, style))
    return "".join(out)


def _styled(line: str, a: int, b: int, ranges: list[Range], style: dict[str, str]) -> str:
    if a >= b:
        return ""
    inner = marked_html(line[a:b], _clip(ranges, a, b))
    if not style:
        return inner
    css = ";".join(f"{k}:{v}" for k, v in sorted(style.items()))
    return f'<span class="ansi" style="{css}">{inner}</span>'


def _blocks(text: str, start: int, lines: list[str], code: list[bool], ranges: list[Range]) -> str:
    """Consecutive code lines as one <pre>, prose lines as one text block; `start` is the offset
    of lines[0] in the step's text."""
    out: list[str] = []
    in_diff = diff_lines(lines)
    style: dict[str, str] = {}
    at, i = start, 0
    while i < len(lines):
        j = i
        while j < len(lines) and code[j] == code[i]:
            j += 1
        if code[i]:
            rows = []
            for k in range(i, j):
                line = lines[k]
                clipped = _clip(ranges, at, at + len(line))
                inner = _ansi_html(line, clipped, style) if has_ansi(line) else marked_html(line, clipped)
                cls = _line_class(line, in_diff[k])
                rows.append(f'<span class="{cls}">{inner}</span>' if cls else inner)
                at += len(line) + 1
            out.append(f'<pre class="code">{chr(10).join(rows)}</pre>')
        else:
            chunk = "\n".join(lines[i:j])
            out.append(f'<div class="text">{marked_html(chunk, _clip(ranges, at, at + len(chunk)))}</div>')
            at += len(chunk) + 1
        i = j
    return "".join(out)


def _code(lines: list[str]) -> list[bool]:
    """Code lines as the line view finds them, plus every line of terminal output (escape codes)."""
    return [c or has_ansi(line) for c, line in zip(code_lines(lines), lines)]


def is_code_heavy(text: str) -> bool:
    """Whether `text` holds any line of code or terminal output (the page then lays it out with
    `code_text_html`)."""
    return any(_code(text.split("\n")))


def code_text_html(text: str, ranges: list[Range], open_: bool = False) -> str:
    """`text` as code and prose blocks, the middle of a long text folded (head and tail shown)
    unless it holds a diff: a patch is read whole."""
    lines = text.split("\n")
    code = _code(lines)
    if len(lines) <= FOLD_LINES or any(diff_lines(lines)):
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

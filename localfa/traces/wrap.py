"""Where the line view breaks a step's JSON record, so that code and diffs stay legible.

A record is one JSON line; its text's newlines are the escapes ``\\n``. Prose is packed: a break
goes after the last escaped newline or space in the second half of the `width` window. In coding
runs (``code=True``: the line view sets it for the coding-agent formats) code is not packed: inside a fenced block (```), a command's ``<output>`` (mini-swe-agent), a diff (``diff --git``, ``@@`` hunks, ``+``/``-``
lines) or a numbered file listing (``12:`` or ``  12\\t`` prefixes, as ``nl``, ``cat -n`` and
SWE-agent's viewer print them), every source line starts a physical line. A line longer than the
window is cut at a space or punctuation when it can be, never inside an escape sequence (``\\n``,
``\\"``, ``\\u00e9``) nor inside a number or a word when a boundary is near (a diff's line numbers
and a hunk header's ``-57,10`` stay whole).
"""

from __future__ import annotations

import re

CODE_FORMATS = frozenset({"atif", "mini-swe-agent", "swe-agent"})  # coding-agent runs
_NEWLINE = "\\n"
_FENCE = re.compile(r"^\s*```")
_DIFF_START = re.compile(r"^(diff --git |@@ |--- a/|\+\+\+ b/|index [0-9a-f]+\.\.)")
_DIFF_BODY = re.compile(r"^([ +\-@\\]|diff |index |new file|deleted file|similarity |rename |old mode|new mode|$)")
_NUMBERED = re.compile(r"^\s*\d+(:|\t|\\t)")
_WORD = re.compile(r"\w")


def code_lines(lines: list[str]) -> list[bool]:
    """Which of a text's lines are code: in a fenced block (the fences too), in a command's
    ``<output>``, in a diff, or numbered like a file listing. Works on raw lines and on a JSON
    record's escaped ones alike."""
    out: list[bool] = []
    in_fence = in_diff = in_output = False
    for line in lines:
        if "<output>" in line:
            in_output = True
        if _FENCE.match(line):
            in_fence = not in_fence
            out.append(True)
        else:
            in_diff = bool(_DIFF_START.match(line)) or (in_diff and bool(_DIFF_BODY.match(line)))
            out.append(in_fence or in_diff or in_output or bool(_NUMBERED.match(line)))
        if "</output>" in line:
            in_output = False
    return out


def code_line_ends(record: str) -> list[int]:
    """Offsets where a line of code, a diff or a listing ends (just after its escaped newline)."""
    lines = record.split(_NEWLINE)
    ends: list[int] = []
    at = 0
    for line, code in zip(lines[:-1], code_lines(lines[:-1])):
        at += len(line) + len(_NEWLINE)
        if code:
            ends.append(at)
    return ends


def code_breaks(record: str) -> list[int]:
    """Offsets where a physical line must break in a coding run: where each line of code starts
    and where it ends."""
    out: set[int] = set()
    for end in code_line_ends(record):
        out.add(end)
        start = record.rfind(_NEWLINE, 0, end - len(_NEWLINE))
        if start != -1:
            out.add(start + len(_NEWLINE))
    return sorted(out)


def _splits_escape(record: str, c: int) -> bool:
    """Whether a break at `c` falls inside an escape sequence (``\\n``, ``\\"``, ``\\u00e9``)."""
    slashes = 0
    while c - slashes - 1 >= 0 and record[c - slashes - 1] == "\\":
        slashes += 1
    if slashes % 2 == 1:
        return True
    m = re.search(r"(\\+)u[0-9a-fA-F]{0,3}$", record[max(0, c - 12) : c])
    return bool(m and len(m.group(1)) % 2 == 1)


def _splits_word(record: str, c: int) -> bool:
    return 0 < c < len(record) and bool(_WORD.match(record[c - 1])) and bool(_WORD.match(record[c]))


def _hard_cut(record: str, pos: int, width: int) -> int:
    """A cut in a window with no space: at a word or number boundary outside any escape, in the
    window's second half when there is one, else just outside an escape."""
    end = pos + width
    for c in range(end, pos + width // 2, -1):
        if not _splits_escape(record, c) and not _splits_word(record, c):
            return c
    for c in range(end, pos, -1):
        if not _splits_escape(record, c):
            return c
    return end


def wrap_record(record: str, width: int, code: bool = False) -> list[int]:
    """Start offsets of the physical lines of `record` (each at most `width` characters); with
    `code`, lines of code end physical lines and hard cuts keep escapes and numbers whole."""
    code_ends = code_breaks(record) if code else []
    starts = [0]
    pos, n = 0, len(record)
    half = width // 2
    k = 0  # next code line end to consider
    while pos < n:
        while k < len(code_ends) and code_ends[k] <= pos:
            k += 1
        if k < len(code_ends) and code_ends[k] - pos <= width and code_ends[k] < n:
            pos = code_ends[k]  # a line of code ends here: so does the physical line
            starts.append(pos)
            continue
        if n - pos <= width:
            break
        window_end = pos + width
        cut = record.rfind(_NEWLINE, pos + half, window_end)
        if cut != -1:
            cut += len(_NEWLINE)
        else:
            cut = record.rfind(" ", pos + half, window_end)
            if cut != -1:
                cut += 1
            else:
                cut = _hard_cut(record, pos, width) if code else window_end
        pos = cut
        starts.append(pos)
    return starts

"""A trace as numbered lines, with the read/search tools an investigating model uses.

Each step is one compact JSON record, ``{"step_id": N, "agent": ..., "role": ..., [name,
span_id, parent_span_id, "kind": "observation", call_id,] "content": ..., [tool_calls, input,
observation]}`` (``kind`` only on observation steps: tool results and environment output no agent
wrote; ``call_id`` names the tool call such a step answers), serialised
deterministically (same trace, same width -> same lines) and wrapped onto continuation lines of
at most `width` characters, preferring to break after an escaped newline or a space; in coding
runs code, diffs and numbered listings break after every source line (`localfa.traces.wrap`). Lines are
numbered from 0, like steps, everywhere (read offsets, search hits, line_of_step), and every
line shown carries the step it belongs to (``  57 (step 12)| ...``):
`search('"step_id": 7')` finds step 7's first line, `read(that_line, n)` shows it.

Search runs on the unwrapped records, so a match may span a wrap; it is reported at the line
where it starts. Patterns are case-insensitive `regex` patterns, run under a timeout with a
result cap: a pattern that does not compile or times out gives an observation saying so (text for
the model), never an exception or a hang.
"""

from __future__ import annotations

import bisect
import json
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import regex

from localfa.tokens import TokenCounter, approx_tokens  # noqa: F401  (re-exported)
from localfa.traces.model import Step, Trace
from localfa.traces.wrap import CODE_FORMATS, wrap_record

SNIPPET_CHARS = 160
MAX_PATTERN_CHARS = 2000
MAX_REPEAT = 10_000
#: How every tool shows a line: its number (for read offsets) and its step, then the text.
#: The one place this format lives: `LineView` writes it, `SHOWN_LINE` and `steps_shown` read it.
LABEL_FORMAT = "{line:>{digits}} (step {step})"
LINE_FORMAT = "{label}| {text}"
SHOWN_LINE = re.compile(r"^\s*(\d+) \(step (\d+)\)\| ", re.MULTILINE)


def steps_shown(text: str) -> set[int]:
    """The steps whose lines `text` shows in the numbered form every tool uses (``  57 (step 12)| ...``).

    For readers of a prompt (the oracle and its audit); the tools themselves return the steps
    they show (`Shown.steps`), so a method never parses its own results."""
    return {int(m.group(2)) for m in SHOWN_LINE.finditer(text)}


def shown_lines(text: str) -> list[tuple[int, int, str]]:
    """(line number, step, text) of every numbered line `text` shows, in order."""
    out = []
    for m in SHOWN_LINE.finditer(text):
        end = text.find("\n", m.end())
        out.append((int(m.group(1)), int(m.group(2)), text[m.end() : end if end >= 0 else len(text)]))
    return out


@dataclass(frozen=True)
class Shown:
    """A tool's result: the text a model reads, and the step of each numbered line in it, in
    order (a prefix of `line_steps` is what a result cut after some lines still shows)."""

    text: str
    line_steps: tuple[int, ...] = ()

    @property
    def steps(self) -> frozenset[int]:
        return frozenset(self.line_steps)


def step_record(step: Step) -> str:
    """One step as a single-line JSON record (keys in a fixed order; absent optionals omitted)."""
    rec: dict[str, Any] = {"step_id": step.index, "agent": step.agent, "role": step.role}
    if step.name:
        rec["name"] = step.name
    if step.span_id:
        rec["span_id"] = step.span_id
    if step.parent_span_id:
        rec["parent_span_id"] = step.parent_span_id
    if step.kind == "observation":
        rec["kind"] = "observation"
    if step.call_id:
        rec["call_id"] = step.call_id
    rec["content"] = step.content
    if step.tool_calls:
        rec["tool_calls"] = step.tool_calls
    if step.input is not None:
        rec["input"] = step.input
    if step.observation is not None:
        rec["observation"] = step.observation
    return json.dumps(rec, ensure_ascii=False, default=str)


_REPEAT = regex.compile(r"\{\s*(\d*)\s*(?:,\s*(\d*)\s*)?\}")


def _refuse_pattern(pattern: str) -> str | None:
    """Why a pattern is refused before compiling, or None.

    The timeout covers matching, not compiling, and `regex` expands counted repeats when
    compiling: ``(a{1000}){1000}`` alone takes most of a second. So very long patterns and
    large repeat counts are refused up front.
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"pattern too long ({len(pattern)} characters, at most {MAX_PATTERN_CHARS})"
    product = 1
    for m in _REPEAT.finditer(pattern):
        for g in m.groups():
            if g:
                n = int(g)
                if n > MAX_REPEAT:
                    return f"repeat count {n} too large (at most {MAX_REPEAT})"
                product *= max(n, 1)
    if product > MAX_REPEAT:
        return f"counted repeats multiply to {product}, too large (at most {MAX_REPEAT}); use + or *"
    return None


@dataclass
class SearchResult:
    """Structured search outcome: hits as (line number, snippet), and why it stopped."""

    pattern: str
    hits: list[tuple[int, str]] = field(default_factory=list)
    truncated: bool = False
    error: str | None = None
    timed_out: bool = False
    elapsed_ms: float = 0.0


class LineView:
    """Numbered lines of a trace, for reading in windows and searching."""

    def __init__(
        self,
        trace: Trace,
        width: int = 200,
        count_tokens: TokenCounter | None = None,
        code: bool | None = None,
        count_many: Callable[[list[str]], list[int]] | None = None,
    ) -> None:
        """`code`: lines of code, diffs and listings each start a line (`localfa.traces.wrap`);
        by default for the coding-agent formats, whose steps are mostly code and command output.
        `count_many`: counts every record in one call (a tokenizer over HTTP), else `count_tokens`."""
        if width < 20:
            raise ValueError("width must be at least 20 characters")
        if code is None:
            code = trace.format in CODE_FORMATS
        self.trace = trace
        self.width = width
        self.code = code
        self.count_many = count_many
        self.count_tokens: TokenCounter = count_tokens or approx_tokens
        self.lines: list[str] = []
        self._records: list[str] = []
        self._step_first_line: list[int] = []  # 0-based line index of each step's first line
        self._line_offsets: list[int] = []  # offset of each line in self._text
        self._record_offsets: list[int] = []  # offset of each record in self._text
        offset = 0
        for step in trace.steps:
            rec = step_record(step)
            self._records.append(rec)
            self._record_offsets.append(offset)
            self._step_first_line.append(len(self.lines))
            starts = wrap_record(rec, width, code)
            for i, s in enumerate(starts):
                e = starts[i + 1] if i + 1 < len(starts) else len(rec)
                self.lines.append(rec[s:e])
                self._line_offsets.append(offset + s)
            offset += len(rec) + 1
        self._text = "\n".join(self._records)
        self.total_lines = len(self.lines)
        self._labels: dict[int, str] = {}  # line -> its label, built once per view (on first use)
        self.total_chars = sum(len(line) for line in self.lines)
        self._token_prefix: list[int] | None = None

    def rewrapped(self, width: int) -> LineView:
        """The same trace in lines of `width` characters (the records' token counts carried over)."""
        view = LineView(self.trace, width, self.count_tokens, self.code, self.count_many)
        view._token_prefix = self._token_prefix
        return view

    # ---- sizes -------------------------------------------------------------------------------

    def _prefix(self) -> list[int]:
        if self._token_prefix is None:
            texts = [rec + "\n" for rec in self._records]
            counts = self.count_many(texts) if self.count_many is not None else [self.count_tokens(t) for t in texts]
            prefix = [0]
            for n in counts:
                prefix.append(prefix[-1] + int(n))
            self._token_prefix = prefix
        return self._token_prefix

    def tokens(self) -> int:
        """Tokens in the whole view (sum over step records, each with its newline)."""
        return self._prefix()[-1]

    def token_position_of_step(self, step: int) -> int:
        """Tokens before `step`'s first line (the position a budget 'scaling factor' refers to)."""
        self._check_step(step)
        return self._prefix()[step]

    # ---- step <-> line -----------------------------------------------------------------------

    def _check_step(self, step: int) -> None:
        if not 0 <= step < len(self._step_first_line):
            raise IndexError(f"step {step} is outside the trace (0..{len(self._step_first_line) - 1})")

    def line_of_step(self, step: int) -> int:
        """Number (0-based) of the first line of `step`'s record."""
        self._check_step(step)
        return self._step_first_line[step]

    def lines_of_step(self, step: int) -> tuple[int, int]:
        """(first, last) line numbers (0-based, inclusive) of `step`'s record."""
        self._check_step(step)
        first = self._step_first_line[step]
        nxt = self._step_first_line[step + 1] if step + 1 < len(self._step_first_line) else self.total_lines
        return first, nxt - 1

    def step_at_line(self, line: int) -> int:
        """The step whose record contains `line` (0-based)."""
        if not 0 <= line < self.total_lines:
            raise IndexError(f"line {line} is outside the view (0..{self.total_lines - 1})")
        return bisect.bisect_right(self._step_first_line, line) - 1

    def text(self) -> str:
        """The whole view as plain lines (no numbers), as a model would receive it in full."""
        return "\n".join(self.lines)

    # ---- tools -------------------------------------------------------------------------------

    def label(self, line: int) -> str:
        """A line's number and the step it belongs to, as every tool shows it: ``  57 (step 12)``.

        Wrapped continuation lines carry their step too, so a line number is never mistaken
        for a step id.
        """
        found = self._labels.get(line)
        if found is None:
            digits = max(4, len(str(self.total_lines)))
            found = self._labels[line] = LABEL_FORMAT.format(line=line, digits=digits, step=self.step_at_line(line))
        return found

    def _number(self, line: int, text: str | None = None) -> str:
        return LINE_FORMAT.format(label=self.label(line), text=self.lines[line] if text is None else text)

    def read(self, offset: int, limit: int) -> str:
        """Lines `offset` .. `offset + limit - 1` (numbered from 0), each as ``  12 (step 3)| ...``.

        A footer says which lines were shown, nothing more (where to read next is the reader's
        choice: SAFARI tells its model not to scan sequentially). Out-of-range requests give
        an observation saying what the valid range is, never an exception.
        """
        return self.read_shown(offset, limit).text

    def read_shown(self, offset: int, limit: int) -> Shown:
        """`read`, with the step of each line it shows."""
        span = f"lines 0..{self.total_lines - 1}"
        try:
            offset, limit = int(offset), int(limit)
        except (TypeError, ValueError, OverflowError):
            return Shown(f"[read error: offset and limit must be whole numbers; the trace has {span}]")
        if limit < 1:
            return Shown(f"[read error: limit must be at least 1; the trace has {span}]")
        if offset < 0:
            return Shown(f"[read error: offset {offset} is negative; the trace has {span}]")
        if offset >= self.total_lines:
            return Shown(f"[read error: offset {offset} is past the end; the trace has {span}]")
        last = min(self.total_lines - 1, offset + limit - 1)
        body = "\n".join(self._number(i) for i in range(offset, last + 1))
        if last < self.total_lines - 1:
            body += f"\n[shown lines {offset}-{last} of 0-{self.total_lines - 1}]"
        else:
            body += f"\n[shown lines {offset}-{last} of 0-{self.total_lines - 1}; end of trace]"
        return Shown(body, tuple(bisect.bisect_right(self._step_first_line, i) - 1 for i in range(offset, last + 1)))

    def _line_at_offset(self, pos: int) -> int:
        """The line (0-based) containing text offset `pos`."""
        return bisect.bisect_right(self._line_offsets, pos) - 1

    def _snippet(self, start: int, end: int) -> str:
        """About SNIPPET_CHARS of the match's record around the match (never across records)."""
        rec_i = bisect.bisect_right(self._record_offsets, start) - 1
        rec_start = self._record_offsets[rec_i]
        rec_end = rec_start + len(self._records[rec_i])
        shown = min(max(end - start, 0), SNIPPET_CHARS)
        a = max(rec_start, start - (SNIPPET_CHARS - shown) // 2)
        b = min(rec_end, a + SNIPPET_CHARS)
        a = max(rec_start, min(a, b - SNIPPET_CHARS))
        return ("..." if a > rec_start else "") + self._text[a:b] + ("..." if b < rec_end else "")

    def search_hits(self, pattern: str, max_results: int = 50, timeout_s: float = 1.0, from_end: bool = False) -> SearchResult:
        """Lines where the case-insensitive regex `pattern` matches (first match per line), the
        first `max_results` in order, or with `from_end` the last ones, latest first (an
        investigator tracing a failure back from the run's end wants the latest mentions).

        Never raises for a bad pattern or a slow one: `error` / `timed_out` say what happened.
        """
        res = SearchResult(pattern=pattern)
        t0 = time.perf_counter()
        if not isinstance(pattern, str) or pattern == "":
            res.error = "empty pattern"
            return res
        refusal = _refuse_pattern(pattern)
        if refusal:
            res.error = refusal
            return res
        try:
            compiled = regex.compile(pattern, regex.IGNORECASE | regex.MULTILINE | regex.V0)
        except (regex.error, ValueError, TypeError, OverflowError, RecursionError) as e:
            res.error = f"invalid pattern: {e}"
            return res
        max_results = max(1, int(max_results))
        timeout_s = max(0.01, float(timeout_s))
        self._scan(compiled, res, max_results, timeout_s, t0 + timeout_s, from_end)
        res.elapsed_ms = (time.perf_counter() - t0) * 1000
        return res

    def _scan(self, compiled: Any, res: SearchResult, max_results: int, timeout_s: float, deadline: float, from_end: bool) -> None:
        """The search loop, in the caller's thread (no thread per search): `regex`'s own timeout
        ends one catastrophic match, the deadline check a scan with very many matches. From the
        end it scans to the end keeping the last `max_results` lines (snippets only for those)."""
        found: deque[tuple[int, int, int]] = deque(maxlen=max_results + 1 if from_end else None)
        try:
            for m in compiled.finditer(self._text, timeout=timeout_s):
                line = self._line_at_offset(m.start())
                if not found or found[-1][0] != line:
                    if not from_end and len(found) >= max_results:
                        res.truncated = True
                        break
                    found.append((line, m.start(), m.end()))
                if time.perf_counter() > deadline:
                    raise TimeoutError("search deadline passed")
        except TimeoutError:
            res.timed_out = True
            res.error = f"search timed out after {timeout_s:g}s"
        except (regex.error, RecursionError, MemoryError) as e:
            res.error = f"search failed: {e}"
        hits = list(found)
        if from_end:
            res.truncated = len(hits) > max_results
            hits = hits[-max_results:][::-1]
        res.hits = [(line, self._snippet(a, b)) for line, a, b in hits]

    def search(self, pattern: str, max_results: int = 50, timeout_s: float = 1.0, from_end: bool = False) -> str:
        """`search_hits` as observation text for a model: one ``line (step N)| snippet`` per hit."""
        return self.search_shown(pattern, max_results, timeout_s, from_end).text

    def search_shown(self, pattern: str, max_results: int = 50, timeout_s: float = 1.0, from_end: bool = False) -> Shown:
        """`search`, with the step of each hit line it shows."""
        res = self.search_hits(pattern, max_results=max_results, timeout_s=timeout_s, from_end=from_end)
        shown = repr(pattern) if isinstance(pattern, str) else "(not text)"
        if res.error and not res.hits:
            if res.timed_out:
                return Shown(
                    f"[search {shown}: timed out after {timeout_s:g}s with no match found; "
                    f"use a simpler pattern (a literal word, no nested repetition)]"
                )
            return Shown(f"[search {shown}: {res.error}; nothing searched]")
        if not res.hits:
            return Shown(f"[search {shown}: no matches in {self.total_lines} lines]")
        out = [self._number(line, snip) for line, snip in res.hits]
        n = len(res.hits)
        order = ", latest first" if from_end and n > 1 else ""
        if res.timed_out:
            out.append(f"[search {shown}: timed out after {timeout_s:g}s; {n} matching lines found before it]")
        elif res.truncated:
            which = "last" if from_end else "first"
            out.append(
                f"[search {shown}: {which} {n} matching lines shown{order}; more exist {'earlier' if from_end else 'later'}, narrow the pattern]"
            )
        else:
            out.append(f"[search {shown}: {n} matching line{'s' if n != 1 else ''}{order}]")
        return Shown("\n".join(out), tuple(self.step_at_line(line) for line, _ in res.hits))

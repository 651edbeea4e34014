"""Is a quoted piece of evidence really in the trace? One check for every method.

A quote counts as verbatim when it occurs in the trace's text as a person reads it:

- the steps' own strings (task, content, tool calls and their arguments, inputs, observations,
  final output), not their JSON serialisation alone;
- across line wraps: whitespace runs fold to one space, and a quote that joined two wrapped
  lines with or without a space still matches (the line view may wrap in the middle of a word);
- with JSON escapes undone: a model that read ``\\"`` or ``\\n`` in the numbered line view may
  quote either form;
- with the line view's own decoration dropped: a ``  57 (step 12)| `` prefix copied into the
  quote, and leading or trailing ellipses, are not part of the evidence.

Case and punctuation are kept: a quote with different words is not verbatim. `extract_quotes`
finds quoted spans in free text (a model's reasoning), apostrophes inside them included.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any, Iterator

import regex as re

from localfa.traces.model import Trace

_ESCAPE = re.compile(r'\\(["\\/bfnrt]|u[0-9a-fA-F]{4})')
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_LINE_PREFIX = re.compile(r"(?m)^\s*\d+(?: \(step \d+\))?\| ")
_ELLIPSIS = re.compile(r"^(?:\.\.\.|\u2026|\s)+|(?:\.\.\.|\u2026|\s)+$")
# Quote marks: which closer ends which opener. Straight single quotes double as apostrophes,
# so for them an opener must not follow a letter and a closer must not precede one.
_PAIRS = {'"': '"', "\u201c": "\u201d", "'": "'", "\u2018": "\u2019", "`": "`"}
_APOSTROPHE_LIKE = frozenset("'\u2019")
MIN_QUOTE_CHARS = 12
MAX_QUOTE_CHARS = 600
MAX_CLOSERS = 8  # closers tried per opener: bounds the work on long reasoning


def fold(text: str) -> str:
    """Whitespace runs become one space; ends stripped; case kept. (`str.split` does it in C:
    a trace's whole text is folded once per trace, beside a waiting engine.)"""
    return " ".join(text.split())


def _squeeze(text: str) -> str:
    """No whitespace at all: a quote that joined wrapped lines differently still matches."""
    return "".join(text.split())


def unescape(text: str) -> str:
    """JSON string escapes undone (``\\"`` -> ``"``, ``\\n`` -> newline, ``\\u00e9`` -> é)."""
    if "\\" not in text:
        return text

    def one(m: re.Match[str]) -> str:
        code = m.group(1)
        return chr(int(code[1:], 16)) if code[0] == "u" else _ESCAPES[code]

    return _ESCAPE.sub(one, text)


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON-like value (tool call names, argument values, ...)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)
    elif value is not None:
        yield str(value)


def trace_text(trace: Trace) -> str:
    """Everything the trace's steps say, as read by a person, folded."""
    parts: list[str] = [trace.task or "", trace.final_output or ""]
    for s in trace.steps:
        parts.append(s.content or "")
        for call in s.tool_calls:
            parts.append(json.dumps(call, ensure_ascii=False, default=str))
            parts.extend(_strings(call))
        for extra in (s.input, s.observation):
            if extra is None:
                continue
            parts.extend(_strings(extra) if not isinstance(extra, str) else [extra])
    return fold("\n".join(parts))


def clean_quote(quote: str) -> str:
    """A quote without the line view's decoration (line/step prefixes, ellipses), folded."""
    return fold(_ELLIPSIS.sub("", _LINE_PREFIX.sub(" ", _ELLIPSIS.sub("", quote))))


class _Haystack:
    """The trace's text in the two forms quotes are matched against, built once."""

    def __init__(self, trace: Trace) -> None:
        self.folded = trace_text(trace)
        self.squeezed = _squeeze(self.folded)

    def holds(self, quote: str) -> bool:
        q = clean_quote(quote)
        if not q:
            return False
        forms = {q, fold(unescape(q))}
        if any(f in self.folded for f in forms if f):
            return True
        return any(_squeeze(f) in self.squeezed for f in forms if _squeeze(f))


_HAYSTACKS: "OrderedDict[int, tuple[Trace, _Haystack]]" = OrderedDict()
HAYSTACKS_MAX = 64  # traces whose folded text is kept (a sweep's traces in flight, with room)


def _haystack(trace: Trace) -> _Haystack:
    """The trace's haystack, built once per trace (methods check quotes every turn)."""
    hit = _HAYSTACKS.get(id(trace))
    if hit is not None and hit[0] is trace:
        _HAYSTACKS.move_to_end(id(trace))
        return hit[1]
    hay = _Haystack(trace)
    _HAYSTACKS[id(trace)] = (trace, hay)  # the trace is held, so its id names no other object
    while len(_HAYSTACKS) > HAYSTACKS_MAX:
        _HAYSTACKS.popitem(last=False)
    return hay


def verify_quotes(trace: Trace, quotes: list[str]) -> list[bool]:
    """One verdict per quote, in order: does it occur in the trace as a person reads it?"""
    hay = _haystack(trace)
    return [hay.holds(q) for q in quotes]


def is_verbatim(quote: str, trace: Trace) -> bool:
    return verify_quotes(trace, [quote])[0]


def _closers(text: str, start: int, closer: str, single: bool) -> Iterator[int]:
    """Positions after `start` where a quote opened at `start` may end, nearest first."""
    end = min(len(text), start + MAX_QUOTE_CHARS + 2)
    j, tried = text.find(closer, start + 1, end), 0
    while j != -1 and tried < MAX_CLOSERS:
        if not (single and j + 1 < len(text) and text[j + 1].isalnum()):
            tried += 1
            yield j
        j = text.find(closer, j + 1, end)


def extract_quotes(text: str, accept: Any = None) -> list[str]:
    """Quoted spans of `text` (at least MIN_QUOTE_CHARS long), in order, without duplicates.

    A span may hold other quote marks and apostrophes (``'the agent's answer'``,
    ``"he said "no" twice"``). Where several closers are possible, the longest span that
    `accept(span)` approves is taken (by default the nearest closer).
    """
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        closer = _PAIRS.get(ch)
        single = ch in _APOSTROPHE_LIKE or ch == "\u2018"
        if closer is None or (single and i > 0 and text[i - 1].isalnum()):
            i += 1
            continue
        chosen: tuple[str, int] | None = None
        for j in _closers(text, i, closer, single):
            span = text[i + 1 : j].strip()
            if len(span) < MIN_QUOTE_CHARS:
                continue
            if accept is None:
                chosen = (span, j)
                break
            if accept(span):
                chosen = (span, j)  # keep looking: a longer span may hold inner quotes
        if chosen is None:
            i += 1
            continue
        if chosen[0] not in out:
            out.append(chosen[0])
        i = chosen[1] + 1
    return out


def quoted_evidence(trace: Trace, text: str) -> list[str]:
    """The quoted spans of `text` that occur verbatim in `trace`, in order."""
    return extract_quotes(text, accept=_haystack(trace).holds)

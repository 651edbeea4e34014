"""Is a quoted piece of evidence really in the trace? One check for every method.

A quote counts as verbatim when it occurs in the trace's text as a person reads it: the steps'
own strings (content, tool calls, inputs, observations), whitespace runs folded to one space (so a
quote may cross a line wrap or a newline), and JSON escapes undone (a model that read ``\\"`` or
``\\n`` in the numbered line view may quote either form).
"""

from __future__ import annotations

import json
import regex as re

from localfa.traces.model import Trace

_SPACE = re.compile(r"\s+")


def fold(text: str) -> str:
    """Whitespace runs become one space; ends stripped; case kept."""
    return _SPACE.sub(" ", text).strip()


def _unescape(text: str) -> str:
    """JSON string escapes undone where the text holds them (``\\"`` -> ``"``, ``\\n`` -> newline)."""
    if "\\" not in text:
        return text
    try:
        return json.loads('"' + text.replace('"', '\\"').replace('\\\\"', '\\"') + '"')
    except (json.JSONDecodeError, ValueError):
        return text.replace('\\"', '"').replace("\\n", "\n").replace("\\t", "\t")


def trace_text(trace: Trace) -> str:
    """Everything the trace's steps say, as read by a person, folded."""
    parts: list[str] = [trace.task or "", trace.final_output or ""]
    for s in trace.steps:
        parts.append(s.content or "")
        parts.extend(json.dumps(c, ensure_ascii=False) for c in s.tool_calls)
        parts.extend(x for x in (s.input, s.observation) if x)
    return fold("\n".join(parts))


def _found(quote: str, text: str, unescaped: str) -> bool:
    q = fold(quote)
    if not q:
        return False
    plain = fold(_unescape(q))
    return q in text or plain in text or plain in unescaped


def verify_quotes(trace: Trace, quotes: list[str]) -> list[bool]:
    """One verdict per quote, in order: does it occur in the trace as a person reads it?"""
    text = trace_text(trace)
    unescaped = fold(_unescape(text))
    return [_found(q, text, unescaped) for q in quotes]


def is_verbatim(quote: str, trace: Trace) -> bool:
    return verify_quotes(trace, [quote])[0]

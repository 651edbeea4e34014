"""What a summarised tool result keeps (issue 53.3): the lines the investigator quoted or noted,
verbatim, and the lines holding the values (numbers, names, paths) it named; a stub only for a
result nothing referred to.

The paper's tool results arrive as summaries that keep facts and verbatim values; a stub ("call it
again") lost the fault's lines on hand-crafted/51 while evaluate was still closed. What counts as
referred to is read from what the model wrote (its analyses, its STM, its evaluate and submit
reasoning), at the moment the result is summarised.
"""

from __future__ import annotations

import re
from typing import Iterable

from localfa.traces.lineview import SHOWN_LINE

#: At most this many characters of kept lines in one summary (the rest is named, not shown).
KEPT_CHARS = 1500
#: A quote shorter than this is a word, not a quote: it is matched as a value.
MIN_QUOTE = 12
_QUOTE = re.compile(r"“([^”]+)”|\"([^\"]+)\"|'([^']{12,})'")
_VALUE = re.compile(r"(?<![\w.])(?:\d[\d.,:/-]*\d|\d{2,}|[\w.-]*/[\w./-]+|[\w-]+\.[a-z]{2,4}\b|[A-Z][a-z]+(?:[A-Z][a-z]+)+)(?![\w])")
_SPACE = re.compile(r"\s+")


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text.replace("\\n", " ").replace('\\"', '"')).strip().casefold()


def referred(texts: Iterable[str]) -> tuple[list[str], set[str]]:
    """(quotes, values) the model's own texts name: quoted pieces of at least `MIN_QUOTE`
    characters (normalised), and numbers, paths, file names and CamelCase names."""
    quotes: list[str] = []
    values: set[str] = set()
    for text in texts:
        for m in _QUOTE.finditer(text):
            q = next(g for g in m.groups() if g is not None)
            if len(q) >= MIN_QUOTE:
                quotes.append(_norm(q))
        values.update(v for v in _VALUE.findall(text) if len(v) >= 3)
    return quotes, values


def kept_lines(body: str, quotes: list[str], values: set[str], evidence: Iterable[str] = ()) -> list[int]:
    """The indices (among `body`'s numbered lines) of those that hold a quote, a noted piece of
    evidence or a value, in order, within `KEPT_CHARS` (lines with quotes and evidence first)."""
    lines = [ln for ln in body.splitlines() if SHOWN_LINE.match(ln)]
    pieces = [q for q in quotes if q] + [_norm(e) for e in evidence if len(e.strip()) >= MIN_QUOTE]
    strong: list[int] = []
    weak: list[int] = []
    for i, ln in enumerate(lines):
        said = _norm(SHOWN_LINE.sub("", ln))
        if any(p in said or (len(said) >= MIN_QUOTE and said in p) or _overlap(p, said) for p in pieces):
            strong.append(i)
        elif any(v in SHOWN_LINE.sub("", ln) for v in values):
            weak.append(i)
    chosen: list[int] = []
    used = 0
    for i in strong + weak:
        if used + len(lines[i]) > KEPT_CHARS:
            continue
        chosen.append(i)
        used += len(lines[i]) + 1
    return sorted(chosen)


def _overlap(quote: str, line: str, k: int = 40) -> bool:
    """A quote that runs across a line wrap: its first or last `k` characters are on the line."""
    return len(quote) >= k and (quote[:k] in line or quote[-k:] in line)


def summarise(call: str, steps: str, body: str, model_texts: Iterable[str], evidence: Iterable[str] = ()) -> tuple[str, list[int]]:
    """The summary that replaces a tool result (the lines referred to, verbatim, else a stub) and
    the indices of the numbered lines it keeps."""
    quotes, values = referred(model_texts)
    kept = kept_lines(body, quotes, values, evidence)
    if not kept:
        stub = f"[{call}: its result (steps {steps}) was summarised away to keep room; nothing in it was quoted or noted; call it again to see it]"
        return stub, []
    lines = [ln for ln in body.splitlines() if SHOWN_LINE.match(ln)]
    head = f"[{call}: its result (steps {steps}) was summarised to keep room; the {len(kept)} lines you quoted, noted or named values from, verbatim:"
    return head + "\n" + "\n".join(lines[i] for i in kept) + "\n(call it again to see the rest)]", kept

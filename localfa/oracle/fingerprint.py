"""The fault's own words: all an oracle rule may know of the answer key.

A `FaultFingerprint` is built once per trace from its labels (`localfa.oracle.labels`, the one
oracle module that reads a `Trace`) and handed to every rule with the request. It holds, for the
labelled decisive step (and each other labelled fault step or span), the *distinctive* word
shingles of its text: runs of `SHINGLE_WORDS` normalised words that occur in no other step. Where
none is distinctive (a step that repeats earlier words, as hand-crafted/16's "Next speaker
WebSurfer"), the shingles of its whole text stand in, and a reader recognises the first block that
carries them, as a careful reader would. It also holds the labelled agent's name, the labelled
categories and whether the run is labelled as having no decisive error. Nothing else: no step id,
no position, no other step's text, no trace.

Recognition is by content. A text *carries* a fault where it holds at least `RECOGNISE` of its
shingles (`FaultText.covered_by`); a quote *shows* it where it holds at least `QUOTE_SHINGLES` of
them (`FaultText.quoted_in`): a few verbatim five-word runs that only the fault step says. A header
without the text, text of the right length that says something else, or a summary that does not
carry the fault's words recognise nothing.

Words are normalised so that every way a prompt shows a step reads alike: JSON escapes (``\\n``,
``\\"``: SAFARI's line view shows each step as a JSON record) are undone, then the letters and
digits runs are taken, case-folded.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Iterable, Sequence

import regex

SHINGLE_WORDS = 5
RECOGNISE = 0.5  # share of a fault's shingles a block must hold to carry it
QUOTE_SHINGLES = 3  # distinctive shingles a quote must hold to show the fault (all of them where fewer)
_WORD = regex.compile(r"[\p{L}\p{N}]+")
_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|[nrtbf\"\\/])")
_ESCAPED = {"n": " ", "r": " ", "t": " ", "b": " ", "f": " ", '"': '"', "\\": "\\", "/": "/"}


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    return _ESCAPE.sub(lambda m: chr(int(m.group(0)[2:], 16)) if m.group(0)[1] == "u" else _ESCAPED[m.group(0)[1]], text)


def words(text: str) -> list[str]:
    """The normalised words of `text` (JSON escapes undone, letters and digits, case-folded)."""
    return list(_words(text))


@lru_cache(maxsize=256)
def _words(text: str) -> tuple[str, ...]:
    """`words`, kept: rules read the same prompt blocks again and again in a sweep."""
    return tuple(w.casefold() for w in _WORD.findall(_unescape(text)))


def word_spans(text: str) -> list[tuple[str, int, int]]:
    """(normalised word, start, end) in `text` itself (escapes left as they are), for quoting."""
    return [(m.group(0).casefold(), m.start(), m.end()) for m in _WORD.finditer(text)]


def shingles(ws: Sequence[str], k: int = SHINGLE_WORDS) -> list[str]:
    """Every run of `k` consecutive words (the whole text as one shingle when it is shorter)."""
    if not ws:
        return []
    if len(ws) <= k:
        return [" ".join(ws)]
    return [" ".join(ws[i : i + k]) for i in range(len(ws) - k + 1)]


@lru_cache(maxsize=256)
def shingle_set(text: str) -> frozenset[str]:
    """The shingles of `text`'s normalised words, kept for the texts a sweep asks about again
    (each prompt block is read once per rule that looks at it). 256 entries: a block is at most a
    window's text, so the cache holds tens of MB at worst and memory benchmarks stay true."""
    return frozenset(shingles(words(text)))


@dataclass(frozen=True)
class FaultText:
    """One labelled fault's words: its shingles and whether they are distinctive (said by no other
    step) or the whole text's (nothing it says is its own)."""

    shingles: frozenset[str]
    distinctive: bool = True

    def share(self, text: str) -> float:
        """The share of this fault's shingles `text` holds (0 for an empty fingerprint)."""
        if not self.shingles:
            return 0.0
        return len(self.shingles & shingle_set(text)) / len(self.shingles)

    def covered_by(self, text: str, threshold: float = RECOGNISE) -> bool:
        """Whether `text` carries this fault: at least `threshold` of its shingles."""
        return bool(self.shingles) and self.share(text) >= threshold - 1e-12

    def quoted_in(self, text: str) -> bool:
        """Whether a quote shows this fault: `QUOTE_SHINGLES` of its shingles verbatim (all of them
        where it has fewer)."""
        if not self.shingles:
            return False
        need = min(QUOTE_SHINGLES, len(self.shingles))
        return len(self.shingles & shingle_set(text)) >= need

    def best_quote(self, text: str, max_chars: int) -> str:
        """The verbatim piece of `text` (at most `max_chars`) that holds the most of this fault's
        shingles: what a reader who saw the fault quotes. '' when `text` holds none."""
        spans = word_spans(text)
        ws = [w for w, _, _ in spans]
        hits = [i for i, sh in enumerate(shingles(ws)) if sh in self.shingles]
        if not hits:
            return ""
        # where each hit's shingle ends: non-decreasing, so the hits a window from `a` fits are a run
        ends = [spans[min(b + SHINGLE_WORDS, len(spans)) - 1][2] for b in hits]
        best, best_n = (0, 0), -1
        for i, a in enumerate(hits):  # windows that start at a hit: the one that fits the most hits
            n = bisect_right(ends, spans[a][1] + max_chars, lo=i) - i
            if n > best_n:
                best, best_n = (a, n), n
        start = spans[best[0]][1]
        end = start
        for _, _, e in spans[best[0] :]:
            if e - start > max_chars:
                break
            end = e
        return text[start:end]


@dataclass(frozen=True)
class FaultFingerprint:
    """What an oracle rule knows of a trace's answer key (module doc): the decisive fault's words
    (`faults[0]`), any other labelled fault's words, the labelled agent's name, the labelled
    categories, and whether the run is labelled as having no decisive error."""

    faults: tuple[FaultText, ...] = ()
    agent: str | None = None
    categories: tuple[str, ...] = ()
    no_fault: bool = False

    @property
    def decisive(self) -> FaultText | None:
        return self.faults[0] if self.faults else None

    @cached_property
    def all_shingles(self) -> frozenset[str]:
        return frozenset().union(*(f.shingles for f in self.faults)) if self.faults else frozenset()

    def carried_by(self, text: str, threshold: float = RECOGNISE) -> bool:
        """Whether `text` carries any labelled fault (`FaultText.covered_by`)."""
        return any(f.covered_by(text, threshold) for f in self.faults)

    def decisive_in(self, text: str, threshold: float = RECOGNISE) -> bool:
        """Whether `text` carries the decisive fault."""
        return self.decisive is not None and self.decisive.covered_by(text, threshold)

    def quoted_in(self, text: str) -> bool:
        """Whether a quote shows any labelled fault (`FaultText.quoted_in`)."""
        return any(f.quoted_in(text) for f in self.faults)

    def best_quote(self, text: str, max_chars: int) -> str:
        """The verbatim piece of `text` that shows the decisive fault best ('' where none)."""
        return self.decisive.best_quote(text, max_chars) if self.decisive else ""


def distinctive_shingles(text: str, others: Iterable[str]) -> FaultText:
    """`text`'s shingles that none of `others` holds (`distinctive=True`), else all of its own."""
    own = set(shingles(words(text)))
    if not own:
        return FaultText(frozenset(), distinctive=False)
    elsewhere: set[str] = set()
    for other in others:
        elsewhere.update(shingles(words(other)))
    mine = own - elsewhere
    return FaultText(frozenset(mine), True) if mine else FaultText(frozenset(own), False)

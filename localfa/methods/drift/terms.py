"""What a claim is about, as comparable terms: its values (numbers) and its content words.

Three DRIFT rules read claims this way: two wordings of one claim merge in the ledger when they
name the same values and (nearly) the same words ("The population of Springfield is 170,000." and
"Springfield's population is 170,000."); the passages of a shortened step shown beside a claim are
the ones that mention its terms; and inside a span the answered step is the one whose text uses
them. Plain word sets, no model: cheap, deterministic, and the same on every backend.
"""

from __future__ import annotations

from functools import lru_cache

import regex as re

MIN_WORD = 4  # shorter words ("the", "is", "of") say nothing about what a claim is about
SAME_WORDS = 0.6  # Jaccard overlap of content words above which two claims with equal values merge
STOPWORDS = frozenset(
    "that this with from have been were they them their there then than which what when where while "
    "into onto also only just very more most some such each will would should could about after before "
    "over under again these those here does done being because since until upon within without".split()
)
_WORD = re.compile(r"\p{L}+")
_NUMBER = re.compile(r"\d(?:[\d,._]*\d)?")


@lru_cache(maxsize=8192)
def values(text: str) -> frozenset[str]:
    """The numbers in `text`, separators dropped ("170,000" and "170000" are one value)."""
    return frozenset(re.sub(r"[,_]", "", m.group(0)) for m in _NUMBER.finditer(text))


def _stem(word: str) -> str:
    return word[:-1] if len(word) > MIN_WORD and word.endswith("s") and not word.endswith("ss") else word


@lru_cache(maxsize=8192)
def words(text: str) -> frozenset[str]:
    """Content words of `text`: case-folded, at least `MIN_WORD` letters, no stopwords, plural 's' off."""
    out = (w.casefold() for w in _WORD.findall(text))
    return frozenset(_stem(w) for w in out if len(w) >= MIN_WORD and w not in STOPWORDS)


@lru_cache(maxsize=8192)
def terms(text: str) -> frozenset[str]:
    """Everything a claim is about: its content words and its values."""
    return words(text) | values(text)


def same_content(a: str, b: str) -> bool:
    """Two wordings of one claim: the same values and nearly the same content words."""
    if values(a) != values(b):
        return False
    wa, wb = words(a), words(b)
    if not wa or not wb:
        return False
    return len(wa & wb) / len(wa | wb) >= SAME_WORDS


def search_forms(term: str) -> tuple[str, ...]:
    """How a term may be written in a step: a value with and without thousands separators."""
    if term.isdigit() and len(term) > 3:
        grouped = f"{int(term):,}"
        return (term, grouped) if grouped != term else (term,)
    return (term,)

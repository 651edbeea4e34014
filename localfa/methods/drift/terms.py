"""What a claim is about, as comparable terms: its values (numbers) and its content words.

Three DRIFT rules read claims this way: two wordings of one claim merge in the ledger when they
name the same entities with the same values and (nearly) the same words ("The population of
Springfield is 170,000." and "Springfield's population is 170,000."), never when they differ in a
value, a quoted word, a name, a negation or the order of a comparison (a contradiction is two
claims); the passages of a shortened step shown beside a claim are
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
_QUOTED = re.compile(r"(?<![\p{L}\p{N}])['\"\u2018\u201c]([^'\"\u2019\u201d\n]{1,80})['\"\u2019\u201d](?![\p{L}\p{N}])")
_NAME = re.compile(r"\b\p{Lu}[\p{L}\p{N}]+")
OPENERS = frozenset(
    "the a an this that these those it its we they he she so then there here our my in on at for by of and but or "
    "if when as after before with from final answer according based".split()
)
NEGATIONS = frozenset({"not", "no", "never", "none", "nothing", "without", "cannot", "neither", "nor"})
COMPARISONS = frozenset({"than", "before", "after", "above", "below", "exceeds", "precedes", "follows", "over", "under"})


@lru_cache(maxsize=8192)
def values(text: str) -> frozenset[str]:
    """The numbers in `text`, separators dropped ("170,000" and "170000" are one value), and its
    quoted words, case-folded ("quotes 'fluffy'" and "quotes 'tricksy'" name different values)."""
    numbers = {re.sub(r"[,_]", "", m.group(0)) for m in _NUMBER.finditer(text)}
    return frozenset(numbers | {"'" + " ".join(m.group(1).casefold().split()) for m in _QUOTED.finditer(text)})


@lru_cache(maxsize=8192)
def _names(text: str) -> frozenset[str]:
    """Capitalised words (the entities a claim names), folded; a function word opening a
    sentence ("The", "So") is not a name."""
    return frozenset(_stem(w) for w in (m.group(0).casefold() for m in _NAME.finditer(text)) if w not in OPENERS)


def _negated(text: str) -> bool:
    return any(w.casefold() in NEGATIONS or w.casefold().endswith("n't") for w in re.findall(r"[\p{L}']+", text))


def _compares(text: str) -> bool:
    return any(w.casefold() in COMPARISONS for w in _WORD.findall(text))


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


def step_terms(text: str) -> frozenset[str]:
    """`terms` of a whole step's text, computed without filling the caches: a run's steps, read
    once for its term index, would crowd the claims' texts out of them."""
    return words.__wrapped__(text) | values.__wrapped__(text)


def same_content(a: str, b: str) -> bool:
    """Two wordings of one claim: the same values, the same named entities, the same polarity,
    a comparison in the same order, and nearly the same content words."""
    if values(a) != values(b) or _negated(a) != _negated(b):
        return False
    if _names(a) != _names(b):
        return False
    if (_compares(a) or _compares(b)) and _content_order(a) != _content_order(b):
        return False
    wa, wb = words(a), words(b)
    if not wa or not wb:
        return False
    return len(wa & wb) / len(wa | wb) >= SAME_WORDS


def _content_order(text: str) -> list[str]:
    """The content words of `text` in order (a comparison reversed reads them in another order)."""
    return [_stem(w.casefold()) for w in _WORD.findall(text) if len(w) >= MIN_WORD and w.casefold() not in STOPWORDS]


def search_forms(term: str) -> tuple[str, ...]:
    """How a term may be written in a step: a value with and without thousands separators."""
    if term.isdigit() and len(term) > 3:
        grouped = f"{int(term):,}"
        return (term, grouped) if grouped != term else (term,)
    return (term,)

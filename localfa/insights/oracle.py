"""The oracle's answers to the categorise pass (key ``categorise``): a ceiling like every method's.

Honest: where the prompt carries the fault's words and the fingerprint holds a labelled category
of this taxonomy (AgentRx's labels do), that category; otherwise a category chosen by the task the
prompt shows (the same for every call on one run, as a consistent model's would be), since nothing
shown says which is right. Wrong: another category of the taxonomy.
"""

from __future__ import annotations

import hashlib
import re

from localfa.oracle.policy import Ask, Policy, Rule, clip, max_length, schema_choices

_NOT_WORD = re.compile(r"[^0-9a-z]+")


def _norm(name: str) -> str:
    return _NOT_WORD.sub("", name.casefold())


def labelled_category(ask: Ask, names: list[str]) -> str | None:
    """The first of the fingerprint's labelled categories that names one of `names` (spelling aside)."""
    by_norm = {_norm(n): n for n in names}
    for c in ask.fingerprint.categories:
        if _norm(c) in by_norm:
            return by_norm[_norm(c)]
    return None


def _guessed(ask: Ask, names: list[str]) -> str:
    """A category chosen by the run's task as the prompt shows it (one guess per run)."""
    task = ask.fenced("TASK") or ask.prompt
    digest = hashlib.sha256(f"categorise\x1f{task}".encode()).digest()
    return names[int.from_bytes(digest[:4], "big") % len(names)] if names else ""


def _honest_category(ask: Ask) -> str:
    names = [str(n) for n in schema_choices(ask.grammar, "category")]
    labelled = labelled_category(ask, names)
    if labelled is not None and ask.recognised():
        return labelled
    return _guessed(ask, names)


def _definition(ask: Ask, category: str) -> str:
    """The category's definition as the prompt lists it (``- NAME [GROUP]: DEFINITION``)."""
    for line in ask.text.splitlines():
        if line.startswith(f"- {category}") and ": " in line:
            return line.split(": ", 1)[1]
    return f"it fits {category}"


def _answer(ask: Ask, category: str) -> dict[str, str]:
    definition = _definition(ask, category)
    reason = f"At this step {definition[:1].lower()}{definition[1:]}"
    return {"reason": clip(reason, max_length(ask.grammar, "reason")), "category": category}


def _honest(ask: Ask) -> dict[str, str]:
    return _answer(ask, _honest_category(ask))


def _wrong(ask: Ask) -> dict[str, str]:
    names = [str(n) for n in schema_choices(ask.grammar, "category")]
    right = _honest_category(ask)
    others = [n for n in names if n != right] or names
    return _answer(ask, ask.rng.choice(others))


POLICY = Policy(
    [
        Rule(
            "categorise",
            r"categorise",
            _honest,
            _wrong,
            "the labelled category where the prompt carries the fault's words (else a category chosen by the task shown)",
            "another category of the taxonomy",
        )
    ]
)

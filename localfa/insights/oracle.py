"""The oracle's answers to the categorise pass (key ``categorise``): a ceiling like every method's.

Honest: where the step the prompt shows is one of the trace's labelled faults and the trace's
labels carry a category of this taxonomy (AgentRx's do), that category; otherwise a valid category
drawn from the trace id (the same for every call on the trace, as a consistent model's would be),
since nothing shown says which is right. Wrong: another category of the taxonomy.
"""

from __future__ import annotations

import hashlib
import re

from localfa.oracle.policy import Ask, Policy, Rule, clip, max_length, schema_choices

_NOT_WORD = re.compile(r"[^0-9a-z]+")


def _norm(name: str) -> str:
    return _NOT_WORD.sub("", name.casefold())


def labelled_category(ask: Ask, names: list[str]) -> str | None:
    """The first of the trace's labelled categories that names one of `names` (spelling aside)."""
    by_norm = {_norm(n): n for n in names}
    for c in ask.labels.categories:
        if _norm(c) in by_norm:
            return by_norm[_norm(c)]
    return None


def _seeded(ask: Ask, names: list[str]) -> str:
    digest = hashlib.sha256(f"categorise\x1f{ask.trace.id}".encode()).digest()
    return names[int.from_bytes(digest[:4], "big") % len(names)]


def _honest_category(ask: Ask) -> str:
    names = [str(n) for n in schema_choices(ask.grammar, "category")]
    shown = ask.shown_steps()
    labelled = labelled_category(ask, names)
    if labelled is not None and any(ask.is_fault(step) for step in shown):
        return labelled
    return _seeded(ask, names)


def _definition(ask: Ask, category: str) -> str:
    """The category's definition as the prompt lists it (``- NAME [GROUP]: DEFINITION``)."""
    for line in ask.text.splitlines():
        if line.startswith(f"- {category}") and ": " in line:
            return line.split(": ", 1)[1]
    return f"it fits {category}"


def _honest(ask: Ask) -> dict[str, str]:
    category = _honest_category(ask)
    reason = f"At this step {_definition(ask, category)[0].lower()}{_definition(ask, category)[1:]}"
    return {"reason": clip(reason, max_length(ask.grammar, "reason")), "category": category}


def _wrong(ask: Ask) -> dict[str, str]:
    names = [str(n) for n in schema_choices(ask.grammar, "category")]
    right = _honest_category(ask)
    others = [n for n in names if n != right] or names
    category = ask.rng.choice(others)
    reason = f"At this step {_definition(ask, category)[0].lower()}{_definition(ask, category)[1:]}"
    return {"reason": clip(reason, max_length(ask.grammar, "reason")), "category": category}


POLICY = Policy(
    [
        Rule(
            "categorise",
            r"categorise",
            _honest,
            _wrong,
            "the trace's labelled category where the shown step is a labelled fault (else a category seeded by the trace)",
            "another category of the taxonomy",
        )
    ]
)

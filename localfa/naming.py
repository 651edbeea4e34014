"""Agent names compared the one way every part of localfa compares them (traces, metrics, the oracle)."""

from __future__ import annotations

import re

PAREN_SUFFIX = re.compile(r"\s*\(.*\)\s*$", re.DOTALL)
_SPACES = re.compile(r"\s+")


def normalize_agent(name: str) -> str:
    """Comparison key for an agent name: the speaker before any parenthesis, case-folded.

    Magentic-One roles name the speaker before the parenthesis (``Orchestrator (thought)``,
    ``Orchestrator (-> WebSurfer)`` are both the orchestrator); Who&When labels differ from the
    trace in case only (``Websurfer``). Inner whitespace is collapsed so ``Web  Surfer`` and
    ``web surfer`` compare equal; underscores are kept (``Verification_Expert`` and
    ``VerificationExpert`` are distinct agents in Who&When).
    """
    text = name.strip()
    stripped = PAREN_SUFFIX.sub("", text)
    if stripped:  # a name that is only a parenthesis keeps its text
        text = stripped
    return _SPACES.sub(" ", text).strip().casefold()

"""Trace-made names outside a data fence: a safe identifier, or an alias whose original is fenced.

An agent or tool name is text the trace's authors chose: it may be 5,000 characters of
instructions, hold markers, line breaks or look-alike characters. `neutralise` keeps it on one
line, but a prompt that prints it where the prompt speaks (``[4] NAME:`` step headers, an
"Agents:" list right before "Reply as JSON") still speaks it in its own voice. So outside a fence
a name is shown only when it is a safe identifier (`SAFE`: letters, digits, ``_ . -`` and spaces,
at most `MAX_SHOWN` characters); any other name is shown as an alias (``agent-3``) and its
original stands in a fenced block of its own, which `ShownNames.legend` gives for the prompt:

    <<<NAME agent-3>>>
    ...the name as the trace spells it...
    <<<END NAME agent-3>>>

A short name that only punctuation makes unsafe gets a readable alias instead of a number
(``Orchestrator (thought)`` is shown as ``Orchestrator thought``, its original fenced the same way).

Aliases are numbered in order of first appearance, so every prompt of a trace shows the same
ones (and shares its prefix); an alias never takes the spelling of a shown safe name. An answer
that names an alias is mapped back to the trace's spelling (`ShownNames.original`), and a reader
of the prompt alone (the oracle engine) finds every alias's original in the prompt's own blocks
(`aliases_in_prompt`). Names that are already safe, the usual case, leave prompts unchanged.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Iterable

from localfa.methods.fencing import fence, fenced_blocks
from localfa.traces.model import Trace, normalize_agent

MAX_SHOWN = 40
SAFE = re.compile(rf"[A-Za-z0-9_.-](?:[A-Za-z0-9_ .-]{{0,{MAX_SHOWN - 2}}}[A-Za-z0-9_.-])?")
_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9_.-]+")
LABEL = "NAME {alias}"
_ALIAS_LABEL = re.compile(r"NAME ([A-Za-z0-9_ .-]+)")
LEGEND_INTRO = (
    "Some names in this log are printed outside the data blocks in a plainer form or as an alias (a name too long "
    "or unusual to print there); the block named after each holds the name as the log spells it:"
)


def is_safe(name: str) -> bool:
    """Whether `name` may stand outside a fence as it is (see the module doc)."""
    return SAFE.fullmatch(name) is not None


def plain_form(name: str) -> str:
    """A readable alias for a short name that only punctuation makes unsafe: every run of other
    characters one space (``Orchestrator (-> WebSurfer)`` -> ``Orchestrator - WebSurfer``); ""
    when that is no safe name or would drop a letter (``Ärzt``: an alias ``agent-N`` instead)."""
    if any(c.isalnum() and not c.isascii() for c in name):
        return ""
    plain = " ".join(_UNSAFE_RUN.sub(" ", name).split())
    return plain if is_safe(plain) else ""


@dataclass
class ShownNames:
    """How a trace's names appear outside fences, and back (see the module doc)."""

    kind: str = "agent"
    shown: dict[str, str] = field(default_factory=dict)  # the trace's spelling -> as shown
    back: dict[str, str] = field(default_factory=dict)  # as shown -> the trace's spelling (first of it)
    aliases: dict[str, str] = field(default_factory=dict)  # alias -> the trace's spelling
    by_key: dict[str, str] = field(default_factory=dict)  # normalised spelling -> as shown (first of it)

    @classmethod
    def of(cls, names: Iterable[str], kind: str = "agent") -> "ShownNames":
        """Safe names as they are, every other one an alias (its `plain_form`, else
        ``kind-N``), in order of first appearance; no two names share an alias."""
        out = cls(kind)
        ordered = list(dict.fromkeys(names))
        taken = {n.strip().lower() for n in ordered if is_safe(n.strip())}
        number = 0
        for name in ordered:
            bare = name.strip()
            if is_safe(bare):
                shown = bare
            else:
                shown = plain_form(bare)
                while not shown or shown.lower() in taken:
                    number += 1
                    shown = f"{kind}-{number}"
                taken.add(shown.lower())
                out.aliases[shown] = name
            out.shown[name] = shown
            out.back.setdefault(shown, name)
            out.by_key.setdefault(normalize_agent(name), shown)
        return out

    def show(self, name: str) -> str:
        """`name` as a prompt may print it outside a fence: as the trace spells it (a safe name is
        itself), or another spelling of one of its names (``Coder (thought)``); an unknown unsafe
        name is never shown."""
        shown = self.shown.get(name)
        if shown is None:
            stripped = name.strip()
            shown = stripped if is_safe(stripped) else self.by_key.get(normalize_agent(name), f"{self.kind}-?")
        return shown

    def original(self, shown: str) -> str:
        """The trace's spelling of a name as shown (an alias, or a safe name); `shown` when unknown."""
        return self.back.get(shown, shown)

    @property
    def legend(self) -> str:
        """The fenced originals of every alias, introduced in one line ("" when there is none)."""
        if not self.aliases:
            return ""
        blocks = "\n".join(fence(name, LABEL.format(alias=alias)) for alias, name in self.aliases.items())
        return f"{LEGEND_INTRO}\n{blocks}\n"


def with_legend(text: str, names: ShownNames) -> str:
    """`text` followed by the names' legend (`text` itself when no name needs an alias)."""
    legend = names.legend
    return f"{text}\n\n{legend.rstrip()}" if legend else text


def aliases_in_prompt(text: str) -> dict[str, str]:
    """{alias: the name its block holds} for every alias block in `text` (as fenced: `defuse`d)."""
    out: dict[str, str] = {}
    for label, body in fenced_blocks(text):
        m = _ALIAS_LABEL.fullmatch(label)
        if m:
            out[m.group(1)] = body
    return out


_CACHE: "OrderedDict[int, tuple[Trace, ShownNames]]" = OrderedDict()
CACHE_MAX = 64


def agent_names(trace: Trace) -> ShownNames:
    """The trace's agent names (its steps' and its declared agents', in order of first
    appearance) as prompts show them; made once per trace."""
    hit = _CACHE.get(id(trace))
    if hit is not None and hit[0] is trace:
        _CACHE.move_to_end(id(trace))
        return hit[1]
    names = ShownNames.of([*(s.agent for s in trace.steps), *(a.name for a in trace.agents)], "agent")
    _CACHE[id(trace)] = (trace, names)  # the trace is held, so its id names no other object
    while len(_CACHE) > CACHE_MAX:
        _CACHE.popitem(last=False)
    return names

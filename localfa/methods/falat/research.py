"""Stage 4 (paper §2.4): local re-search around t̂, one call.

The window is steps max(0, t̂-2) .. min(T-1, t̂+2). For each of its steps the model weighs
arguments for and against and gives one of four roles; then it ranks the window's steps that may
be an answer (a permutation the grammar enforces: an observation or a human turn is argued about
but never ranked; a step a window judged passive is ranked, since that judgement can be wrong).
The top-ranked step confirms t̂ or replaces it. The prompt carries the verification's caution
when the expected output cannot tell right from wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Mapping

from localfa.engine.types import Request
from localfa.grammars.falat import RESEARCH_RADIUS, research_grammar, research_max_tokens
from localfa.methods.falat.candidates import neighbourhood
from localfa.methods.falat.ground import Ground
from localfa.methods.falat.ranking import LinkIndex
from localfa.methods.falat.verify import Evidence
from localfa.methods.falat.windows import StepSummary
from localfa.templates import render


@dataclass(frozen=True)
class Research:
    window: tuple[int, int]
    roles: dict[int, dict[str, str]]  # step -> {"for", "against", "role"}
    ranking: tuple[int, ...]

    @property
    def top(self) -> int:
        return self.ranking[0]

    def as_dict(self) -> dict[str, Any]:
        return {"window": list(self.window), "ranking": list(self.ranking), "roles": {str(k): v for k, v in self.roles.items()}}


def research_window(t_hat: int, n_steps: int) -> range:
    return neighbourhood(t_hat, n_steps, RESEARCH_RADIUS)


def research_request(
    g: Ground,
    t_hat: int,
    links: LinkIndex,
    mids: Mapping[int, StepSummary],
    answerable: Collection[int],
    same_as_wrong: bool,
    evidence: Evidence,
) -> Request:
    """The re-search on the verification's evidence block (it holds t̂-2..t̂+2)."""
    ctx, view, opts, limits, system, _ = g.unpack()
    steps = research_window(t_hat, view.n)
    missing = [i for i in steps if i not in evidence.steps]
    if missing:
        raise ValueError(f"falat: the evidence block lacks re-search steps {missing}")
    rankable = [i for i in steps if i in answerable or i == t_hat]
    question = render(
        "falat/research.j2",
        limits=limits,
        t_hat=t_hat,
        ids=list(steps),
        rankable=rankable,
        transitions=links.around(list(steps)),
        summaries=[mids[i] for i in steps if i in mids],
        same_as_wrong=same_as_wrong,
    )
    grammar = research_grammar(list(steps), rankable, limits)
    max_tokens = research_max_tokens(len(steps), limits)
    messages = [system, {"role": "user", "content": evidence.head + "\n\n" + question}]
    return ctx.request("falat/research", messages, grammar, opts.sampling(max_tokens, judge=True))


def parse_research(t_hat: int, n_steps: int, value: dict[str, Any]) -> Research:
    steps = research_window(t_hat, n_steps)
    roles = {i: dict(value["steps"][str(i)]) for i in steps}
    return Research((steps.start, steps[-1]), roles, tuple(int(x) for x in value["ranking"]))

"""Stage 4 (paper §2.4): local re-search around t̂, one call.

The window is steps max(0, t̂-2) .. min(T-1, t̂+2). For each of its steps the model weighs
arguments for and against and gives one of four roles; then it ranks the window's steps that may
be an answer (active steps: a permutation the grammar enforces, so a passive neighbour is argued
about but never ranked). The top-ranked step confirms t̂ or replaces it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Mapping

from localfa.engine.types import Request
from localfa.grammars.falat import research_grammar, research_max_tokens
from localfa.methods.falat.ground import Ground
from localfa.methods.falat.transitions import Pair
from localfa.methods.falat.verify import full_steps, neighbourhood
from localfa.methods.falat.windows import StepSummary
from localfa.templates import render

RADIUS = 2


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
    return neighbourhood(t_hat, n_steps, RADIUS)


def research_request(
    g: Ground, t_hat: int, labels: Mapping[Pair, str], mids: Mapping[int, StepSummary], active: Collection[int]
) -> Request:
    ctx, view, opts, limits, system, prior_block = g.unpack()
    steps = research_window(t_hat, view.n)
    rankable = [i for i in steps if i in active or i == t_hat]
    transitions = [{"i": i, "j": j, "label": lab} for (i, j), lab in sorted(labels.items()) if i in steps or j in steps]
    summaries = [mids[i] for i in steps if i in mids]
    max_tokens = research_max_tokens(len(steps), limits)

    def messages(shown: list[dict[str, Any]]) -> list[dict[str, str]]:
        prompt = render(
            "falat/research.j2",
            prior_block=prior_block,
            limits=limits,
            t_hat=t_hat,
            steps=shown,
            ids=list(steps),
            rankable=rankable,
            transitions=transitions,
            summaries=summaries,
        )
        return [system, {"role": "user", "content": prompt}]

    shown = full_steps(g, steps, messages([]), max_tokens)
    grammar = research_grammar(list(steps), rankable, limits)
    return ctx.request("falat/research", messages(shown), grammar, opts.sampling(max_tokens, judge=True))


def parse_research(t_hat: int, n_steps: int, value: dict[str, Any]) -> Research:
    steps = research_window(t_hat, n_steps)
    roles = {i: dict(value["steps"][str(i)]) for i in steps}
    return Research((steps.start, steps[-1]), roles, tuple(int(x) for x in value["ranking"]))

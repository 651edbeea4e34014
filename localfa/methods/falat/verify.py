"""Stage 3b (paper §2.3): counterfactual verification of the top candidates, one batch.

Each call sees the prior, the expected output, the raw steps i-1..i+1 in full (widened to the
candidate's region when that region spans a window boundary; shrunk together only as far as the
model's window requires), and the transitions that involve i. The answer is the analysis first,
then error independence and counterfactual sufficiency, then a verbatim quote. When the expected
output (the prior's estimate) equals the wrong output, the prompt says so. The earliest candidate
passing both is t̂; if none passes, the best-ranked one, and the result says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from localfa.engine.types import Request
from localfa.grammars.falat import verify_grammar, verify_max_tokens
from localfa.methods.falat.ground import Ground
from localfa.methods.falat.ranking import transitions_of
from localfa.methods.falat.text import fit_texts
from localfa.methods.falat.transitions import Pair
from localfa.templates import render


@dataclass(frozen=True)
class Verdict:
    step: int
    analysis: str
    quote: str
    error_independence: bool
    counterfactual_sufficiency: bool

    @property
    def passed(self) -> bool:
        return self.error_independence and self.counterfactual_sufficiency

    def as_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "analysis": self.analysis,
            "error_independence": self.error_independence,
            "counterfactual_sufficiency": self.counterfactual_sufficiency,
            "passed": self.passed,
            "quote": self.quote,
        }


def neighbourhood(step: int, n_steps: int, radius: int) -> range:
    """Steps max(0, step-radius) .. min(n-1, step+radius)."""
    return range(max(0, step - radius), min(n_steps - 1, step + radius) + 1)


def full_steps(g: Ground, steps: Sequence[int], messages_without: list[dict[str, str]], max_tokens: int) -> list[dict[str, Any]]:
    """The raw steps in full, fitted together into what the window leaves free."""
    room = g.room(messages_without, max_tokens) - 24 * len(steps)
    full = [g.view.text(i) for i in steps]
    fitted = fit_texts(full, room, g.view.count)
    g.view.shortened.update(i for i, a, b in zip(steps, full, fitted) if a != b)
    return g.view.shown(steps, fitted)


def verify_requests(g: Ground, spans: Mapping[int, range], labels: Mapping[Pair, str], same_as_wrong: bool) -> list[Request]:
    """One request per candidate (in ranked order), each with its span of raw steps."""
    ctx, view, opts, limits, system, prior_block = g.unpack()
    grammar = verify_grammar(limits)
    max_tokens = verify_max_tokens(limits)
    reqs = []
    for c, span in spans.items():

        def messages(shown: list[dict[str, Any]], c: int = c) -> list[dict[str, str]]:
            prompt = render(
                "falat/verify.j2",
                prior_block=prior_block,
                limits=limits,
                candidate=c,
                agent=view.agent(c),
                steps=shown,
                transitions=transitions_of(c, labels),
                same_as_wrong=same_as_wrong,
            )
            return [system, {"role": "user", "content": prompt}]

        shown = full_steps(g, span, messages([]), max_tokens)
        reqs.append(ctx.request(f"falat/verify/{c}", messages(shown), grammar, opts.sampling(max_tokens, judge=True)))
    return reqs


def parse_verdict(step: int, value: dict[str, Any]) -> Verdict:
    return Verdict(step, value["analysis"], value["quote"], bool(value["error_independence"]), bool(value["counterfactual_sufficiency"]))


def choose(verdicts: Sequence[Verdict]) -> tuple[int, bool]:
    """(t̂, whether it passed): the earliest passing candidate, else the best-ranked (first) one."""
    passing = [v.step for v in verdicts if v.passed]
    if passing:
        return min(passing), True
    return verdicts[0].step, False

"""Stage 3b (paper §2.3): counterfactual verification of the top candidates, one batch.

Each candidate is judged with the paper's local context: the prior, the raw steps i-1..i+1
(widened to its region when that region spans a window boundary), the transitions that involve i
*with their reasons*, and the linked low-level evidence: the raw text of the steps its typed links
connect it to (a follow_up or error_shift source further back than i-2 included), so "inherited
from an earlier step" can be judged against that step's own words.

The top-k calls share one prompt prefix: the prior, then one evidence block holding the union of
their steps and of their re-search neighbourhoods (i-2..i+2: whichever becomes t̂, the re-search
reads this same block from the prefix cache), in order, in full, shrunk together only as far as
the model's window requires; the per-candidate question comes last. The answer is the analysis first, then error independence and
counterfactual sufficiency, then a verbatim quote. When the expected output cannot tell right from
wrong (`Prior.same_as_wrong`), the prompt says so. The earliest candidate passing both is t̂; if
none passes, the best-ranked one, and the result says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from localfa.engine.types import Request
from localfa.grammars.falat import verify_grammar, verify_max_tokens
from localfa.methods.falat.candidates import VERIFY_RADIUS, neighbourhood
from localfa.methods.falat.ground import Ground
from localfa.methods.falat.groups import Group
from localfa.methods.falat.ranking import LinkIndex
from localfa.methods.falat.text import fit_texts
from localfa.templates import render

EVIDENCE_LABELS = frozenset({"follow_up", "error_shift", "correction", "redundancy"})  # links whose other end is evidence


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


def linked_steps(step: int, links: LinkIndex) -> list[int]:
    """The steps `step`'s evidence links connect it to, nearest first."""
    other = {link["i"] if link["j"] == step else link["j"] for link in links.of(step) if link["label"] in EVIDENCE_LABELS}
    return sorted(other - {step}, key=lambda s: (abs(s - step), s))


def full_steps(g: Ground, steps: Sequence[int], messages_without: list[dict[str, str]], max_tokens: int) -> list[dict[str, Any]]:
    """The raw steps in full, fitted together into what the window leaves free."""
    room = g.room(messages_without, max_tokens) - 24 * len(steps)
    full = [g.view.text(i) for i in steps]
    fitted = fit_texts(full, room, g.view.count)
    g.view.shortened.update(i for i, a, b in zip(steps, full, fitted) if a != b)
    return g.view.shown(steps, fitted)


def evidence_for(spans: Mapping[int, range], links: LinkIndex) -> dict[int, list[int]]:
    """Per candidate: its span's steps, then its linked steps outside the span."""
    return {c: list(span) + [s for s in linked_steps(c, links) if s not in span] for c, span in spans.items()}


@dataclass(frozen=True)
class Evidence:
    """The evidence block every verification (and the re-search) opens with, and its steps."""

    head: str
    steps: tuple[int, ...]


def verify_requests(
    g: Ground, spans: Mapping[int, range], links: LinkIndex, same_as_wrong: bool, also: Sequence[int] = (), base: Group | None = None
) -> tuple[list[Request], Evidence]:
    """One request per candidate (in ranked order), all on one evidence block that also holds
    the steps `also` (the re-search neighbourhoods). With `base` (the best candidate's group),
    the block extends that group's prompt, whose cached text of the steps it shows in full is
    not repeated."""
    ctx, view, opts, limits, system, prior_block = g.unpack()
    grammar = verify_grammar(limits)
    max_tokens = verify_max_tokens(limits)
    evidence = evidence_for(spans, links)
    union = sorted({s for steps in evidence.values() for s in steps} | set(also))
    questions = {c: _question(g, c, spans[c], [s for s in evidence[c] if s not in spans[c]], links, same_as_wrong) for c in spans}

    reused = base.whole if base is not None else frozenset()
    opening = base.block if base is not None else prior_block
    new = [s for s in union if s not in reused]

    def block(shown: list[dict[str, Any]]) -> str:
        return render("falat/_evidence.j2", opening=opening, steps=shown, reused=sorted(reused & set(union)))

    longest = max(questions.values(), key=len)
    shown = full_steps(g, new, [system, {"role": "user", "content": block([]) + longest}], max_tokens)
    head = block(shown)
    sampling = opts.sampling(max_tokens, judge=True)
    reqs = [
        ctx.request(f"falat/verify/{c}", [system, {"role": "user", "content": head + "\n\n" + q}], grammar, sampling)
        for c, q in questions.items()
    ]
    return reqs, Evidence(head, tuple(union))


def _question(g: Ground, step: int, span: range, linked: Sequence[int], links: LinkIndex, same_as_wrong: bool) -> str:
    return render(
        "falat/verify.j2",
        limits=g.limits,
        candidate=step,
        agent=g.view.agent(step),
        span=[span.start, span[-1]],
        linked=list(linked),
        transitions=links.of(step),
        same_as_wrong=same_as_wrong,
    )


def confirm_request(g: Ground, step: int, evidence: Evidence, links: LinkIndex, same_as_wrong: bool) -> Request:
    """The counterfactual check of a step the re-search proposes in place of a verified t̂ (the
    paper's output is the *verified* t̃), on the evidence block the re-search read: its span is
    i-1..i+1 as far as that block holds it, its linked steps those the block holds."""
    shown = set(evidence.steps)
    span = [s for s in neighbourhood(step, g.view.n, VERIFY_RADIUS) if s in shown]
    linked = [s for s in linked_steps(step, links) if s in shown and s not in span]
    question = _question(g, step, range(span[0], span[-1] + 1), linked, links, same_as_wrong)
    messages = [g.system, {"role": "user", "content": evidence.head + "\n\n" + question}]
    return g.ctx.request(
        f"falat/verify/{step}", messages, verify_grammar(g.limits), g.opts.sampling(verify_max_tokens(g.limits), judge=True)
    )


def parse_verdict(step: int, value: dict[str, Any]) -> Verdict:
    return Verdict(step, value["analysis"], value["quote"], bool(value["error_independence"]), bool(value["counterfactual_sufficiency"]))


def choose(verdicts: Sequence[Verdict]) -> tuple[int, bool]:
    """(t̂, whether it passed): the earliest passing candidate, else the best-ranked (first) one."""
    passing = [v.step for v in verdicts if v.passed]
    if passing:
        return min(passing), True
    return verdicts[0].step, False

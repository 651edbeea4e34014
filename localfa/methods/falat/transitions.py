"""Stage 2 (paper §2.2): typed transitions between candidates, and the pruning they license.

Every candidate gets its own quota of pairs: its `quota` nearest earlier and `quota` nearest later
candidates (so a long trace's late candidates are typed as well as its early ones). All pairs of a
trace go out in one batch; each prompt is the shared part (prior, stage summaries, candidate
summaries) then the pair, and the answer is a short reason, then the label. A pair left out by
the quotas is *unknown*: never evidence for any rule, and recorded per candidate.

Pruning (`prune`); a candidate is *suspect* when it has an inconsistency of its own (prior or
execution, from its window) or is the source of an error_shift pair. The first rule that applies
decides:

1. an endpoint of an ``error_shift`` pair is kept: it may be an error source;
2. ``correction`` (i, j): i was corrected by j        -> prune i;
3. ``redundancy`` (i, j): j repeats what i did         -> prune j;
4. ``dead_end`` (i, j): nothing downstream builds on i -> prune i, only when every pair leaving i
   was typed and none of them is follow_up or error_shift;
5. ``no_influence``: every pair leaving i was typed and says so -> prune i;
6. ``follow_up`` (i, j) with i suspect: j is a downstream carrier -> prune j, unless j has an
   inconsistency of its own; its attribution is traced back along such links to the source.
   A follow_up from a step that is not suspect marks no carrier (paper: "follow_up from a
   corrupted step marks a downstream carrier").

Rules 2-5 spare a candidate with an inconsistency of its own (it deviates on its own). If every
candidate is pruned, the full candidate set goes on, and the result says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Mapping, Sequence

from localfa.engine.types import Request
from localfa.grammars.falat import transition_grammar, transition_max_tokens
from localfa.methods.falat.ground import Ground
from localfa.methods.falat.options import TOKENS_PER_PAIR
from localfa.templates import render

Pair = tuple[int, int]


def pair_quota(option: int | None, window_tokens: int) -> int:
    """Pairs per candidate in each direction: the option, else one per 4,096 tokens of window."""
    return option if option is not None else max(1, window_tokens // TOKENS_PER_PAIR)


@dataclass(frozen=True)
class PairPlan:
    """The pairs to type and, per candidate, the earlier / later candidates left untyped."""

    pairs: list[Pair]
    cut: dict[int, dict[str, list[int]]]  # candidate -> {"earlier": [...], "later": [...]} (only candidates with a cut)

    @property
    def unknown(self) -> set[Pair]:
        return {(e, c) for c, sides in self.cut.items() for e in sides["earlier"]} | {
            (c, later) for c, sides in self.cut.items() for later in sides["later"]
        }


def candidate_pairs(candidates: Sequence[int], quota: int) -> PairPlan:
    """Each candidate's `quota` nearest earlier and later candidates; pairs nearest first."""
    c = sorted(set(candidates))
    pairs = sorted(((a, b) for k, a in enumerate(c) for b in c[k + 1 : k + 1 + quota]), key=lambda p: (p[1] - p[0], p[0]))
    cut: dict[int, dict[str, list[int]]] = {}
    for k, s in enumerate(c):
        earlier, later = c[: max(0, k - quota)], c[k + 1 + quota :]
        if earlier or later:
            cut[s] = {"earlier": earlier, "later": later}
    return PairPlan(pairs, cut)


def transition_requests(g: Ground, shared: str, pairs: Sequence[Pair]) -> list[Request]:
    grammar = transition_grammar(g.limits)
    sampling = g.opts.sampling(transition_max_tokens(g.limits), judge=True)
    reqs = []
    for i, j in pairs:
        shown = g.view.shown((i, j), [g.view.clipped(k, g.opts.pair_step_tokens) for k in (i, j)])
        prompt = shared + "\n\n" + render("falat/transition_pair.j2", first=shown[0], second=shown[1], limits=g.limits)
        reqs.append(g.ctx.request(f"falat/pair/{i}/{j}", [g.system, {"role": "user", "content": prompt}], grammar, sampling))
    return reqs


@dataclass
class Pruning:
    kept: list[int]
    pruned: dict[int, str] = field(default_factory=dict)  # step -> why
    spared: dict[int, str] = field(default_factory=dict)  # step -> the rule its own inconsistency overrode
    sources: dict[int, int] = field(default_factory=dict)  # follow_up carrier -> source of its chain
    held_by_unknown: dict[int, str] = field(default_factory=dict)  # step -> the rule an untyped pair blocked
    fallback: bool = False  # every candidate was pruned: the full set went on


def suspects(candidates: Collection[int], labels: Mapping[Pair, str], inconsistent: Mapping[int, bool]) -> set[int]:
    """Candidates with an inconsistency of their own, or that start an error_shift pair."""
    shifted = {i for (i, _), lab in labels.items() if lab == "error_shift"}
    return {c for c in candidates if inconsistent.get(c, False) or c in shifted}


def carrier_links(labels: Mapping[Pair, str], suspect: Collection[int], inconsistent: Mapping[int, bool]) -> dict[int, list[int]]:
    """j -> the suspect steps i whose follow_up (i, j) makes j a carrier (j has no inconsistency
    of its own)."""
    links: dict[int, list[int]] = {}
    for (i, j), lab in sorted(labels.items()):
        if lab == "follow_up" and i in suspect and not inconsistent.get(j, False):
            links.setdefault(j, []).append(i)
    return links


def follow_up_source(step: int, links: Mapping[int, Sequence[int]]) -> int:
    """Walk carrier links backwards (to the earliest parent each time) to the chain's source."""
    seen = {step}
    while True:
        parents = sorted(links.get(step, ()))
        if not parents or parents[0] in seen:
            return step
        step = parents[0]
        seen.add(step)


def prune(
    candidates: Sequence[int], labels: Mapping[Pair, str], inconsistent: Mapping[int, bool], unknown: Collection[Pair] = ()
) -> Pruning:
    """The refined set C' from the pair labels (rules in the module docstring).

    `inconsistent`: candidate -> it has a prior or execution inconsistency of its own.
    `unknown`: pairs the quotas left untyped (never evidence).
    """
    out: dict[int, list[str]] = {c: [] for c in candidates}  # labels of pairs leaving c
    inc: dict[int, list[tuple[int, str]]] = {c: [] for c in candidates}  # (i, label) of pairs entering c
    for (i, j), lab in labels.items():
        out.setdefault(i, []).append(lab)
        inc.setdefault(j, []).append((i, lab))
    untyped_out = {i for i, _ in unknown}
    suspect = suspects(candidates, labels, inconsistent)
    links = carrier_links(labels, suspect, inconsistent)
    result = Pruning(kept=[])
    for c in sorted(candidates):
        leaving, entering = out[c], inc[c]
        if "error_shift" in leaving or any(lab == "error_shift" for _, lab in entering):
            result.kept.append(c)
            continue
        why = None
        if "correction" in leaving:
            why = "corrected"
        elif any(lab == "redundancy" for _, lab in entering):
            why = "redundant"
        elif "dead_end" in leaving and "follow_up" not in leaving:
            why = "dead_end"
        elif leaving and all(lab == "no_influence" for lab in leaving):
            why = "no_influence"
        if why in ("dead_end", "no_influence") and c in untyped_out:
            result.held_by_unknown[c] = why
            why = None
        if why is not None and inconsistent.get(c, False):
            result.spared[c] = why
            why = None
        if why is None and c in links:
            source = follow_up_source(c, links)
            result.sources[c] = source
            why = f"follow_up carrier of step {source}"
        if why is None:
            result.kept.append(c)
        else:
            result.pruned[c] = why
    if not result.kept:
        result.kept = sorted(candidates)
        result.fallback = True
    return result

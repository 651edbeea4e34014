"""Stage 2 (paper §2.2): typed transitions between candidates, and the pruning they license.

Every ordered pair i < j of candidates gets one of six labels, all pairs of a trace in one batch;
each prompt is the shared part (prior, stage summaries, candidate summaries) then the pair. The
pair cap keeps the nearest pairs (then the earliest) and records the rest.

Pruning (`prune`), one rule per label; the first rule that applies to a candidate decides:

1. an endpoint of an ``error_shift`` pair is kept: it may be an error source;
2. ``correction`` (i, j): i was corrected by j        -> prune i;
3. ``redundancy`` (i, j): j repeats what i did         -> prune j;
4. ``dead_end`` (i, j): nothing downstream builds on i -> prune i (unless i also has an
   outgoing follow_up or error_shift);
5. ``no_influence``: every labelled pair leaving i says so -> prune i;
6. ``follow_up`` (i, j): j carries i's output forward   -> prune j, its attribution traced back
   along follow_up links to the chain's source.

Rules 2-5 spare a candidate that deviates from the prior on its own (its prior_inconsistency
signal). If every candidate is pruned, the full candidate set goes on, and the result says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from localfa.engine.types import Request
from localfa.grammars.falat import TRANSITION_MAX_TOKENS, transition_grammar
from localfa.methods.base import MethodContext
from localfa.methods.falat.options import FalatOptions
from localfa.methods.falat.text import TraceText
from localfa.templates import render

Pair = tuple[int, int]


def candidate_pairs(candidates: Sequence[int], cap: int) -> tuple[list[Pair], list[Pair]]:
    """(kept, cut): all i < j pairs, nearest first (ties: earliest first), the first `cap` kept."""
    c = sorted(set(candidates))
    pairs = sorted(((a, b) for k, a in enumerate(c) for b in c[k + 1 :]), key=lambda p: (p[1] - p[0], p[0]))
    return pairs[:cap], pairs[cap:]


def transition_requests(
    ctx: MethodContext, view: TraceText, opts: FalatOptions, system: dict[str, str], shared: str, pairs: Sequence[Pair]
) -> list[Request]:
    grammar = transition_grammar()
    reqs = []
    for i, j in pairs:
        shown = view.shown((i, j), [view.clipped(k, opts.pair_step_tokens) for k in (i, j)])
        prompt = shared + "\n\n" + render("falat/transition_pair.j2", first=shown[0], second=shown[1])
        reqs.append(
            ctx.request(f"falat/pair/{i}/{j}", [system, {"role": "user", "content": prompt}], grammar, opts.sampling(TRANSITION_MAX_TOKENS))
        )
    return reqs


@dataclass
class Pruning:
    kept: list[int]
    pruned: dict[int, str] = field(default_factory=dict)  # step -> why
    spared: dict[int, str] = field(default_factory=dict)  # step -> the rule its own deviation overrode
    sources: dict[int, int] = field(default_factory=dict)  # follow_up carrier -> source of its chain
    fallback: bool = False  # every candidate was pruned: the full set went on


def follow_up_source(step: int, labels: dict[Pair, str]) -> int:
    """Walk follow_up links backwards (to the earliest parent each time) to the chain's source."""
    seen = {step}
    while True:
        parents = sorted(i for (i, j), lab in labels.items() if j == step and lab == "follow_up")
        if not parents or parents[0] in seen:
            return step
        step = parents[0]
        seen.add(step)


def prune(candidates: Sequence[int], labels: dict[Pair, str], deviates: dict[int, bool]) -> Pruning:
    """The refined set C' from the pair labels (rules in the module docstring)."""
    out: dict[int, list[str]] = {c: [] for c in candidates}  # labels of pairs leaving c
    inc: dict[int, list[tuple[int, str]]] = {c: [] for c in candidates}  # (i, label) of pairs entering c
    for (i, j), lab in labels.items():
        out.setdefault(i, []).append(lab)
        inc.setdefault(j, []).append((i, lab))
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
        if why is not None and deviates.get(c, False):
            result.spared[c] = why
            why = None
        if why is None and any(lab == "follow_up" for _, lab in entering):
            source = follow_up_source(c, labels)
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

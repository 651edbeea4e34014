"""Stage 2 (paper §2.2): typed transitions between candidates, and the pruning they license.

Each candidate's links to its next `quota` candidates are typed (a chain of follow_up links is
traced transitively, so a short reach still finds a long chain's source). The links go out in
groups that share one prompt prefix (`groups.py`): one request per group types all its members'
links, reason first, then the label. A candidate's links to candidates further away are not
typed; they are never evidence for a rule, and only their count is recorded.

Pruning (`prune`); a candidate is *suspect* when it has an inconsistency of its own (prior or
execution, from its window) or is the source of an error_shift pair; it is *corrupted* when it is
suspect or a carrier. Candidates are taken in order and the first rule that applies decides:

1. an endpoint of an ``error_shift`` pair is kept: it may be an error source;
2. ``follow_up`` (i, j) with i corrupted: j is a downstream carrier -> prune j, and j counts as
   corrupted for the next hop; its attribution is traced back along such links to the source. A
   follow_up from a clean step marks nothing (paper: "follow_up from a corrupted step marks a
   downstream carrier"). The paper's exception (issue 52): a carrier with an inconsistency of
   its own (`CARRIER_EXCEPTION`) is not pruned: it stays, recorded in `spared` and `sources`,
   ranked below an equal candidate (`ranking.CARRIER_PENALTY`), and verification decides. An
   early false flag on i must not take the real fault j out of the search (algorithm-generated/83
   was lost so: step 8 pruned as a carrier of a falsely flagged step 5);
3. ``correction`` (i, j): i was corrected by j        -> prune i;
4. ``redundancy`` (i, j): j repeats what i did         -> prune j;
5. ``dead_end`` (i, j): nothing downstream builds on i -> prune i, only when i has no untyped
   later link and none of its links is follow_up;
6. ``no_influence``: i has no untyped later link and every link says so -> prune i.

Rules 3-6 spare a candidate with an inconsistency of its own (it deviates on its own). If every
candidate is pruned, the full candidate set goes on, and the result says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Mapping, Sequence

from localfa.engine.types import Request
from localfa.grammars.falat import links_grammar, links_max_tokens, pair_key
from localfa.methods.falat.ground import Ground
from localfa.methods.falat.groups import Group, group_pairs
from localfa.templates import render

Pair = tuple[int, int]
CARRIER_EXCEPTION = True  # a carrier with an inconsistency of its own is kept (rule 2)


def reach_cut(candidates: Sequence[int], quota: int) -> dict[str, int]:
    """How many candidate pairs the reach left untyped, and how many candidates have some."""
    n = len(set(candidates))
    typed = sum(min(quota, n - 1 - k) for k in range(n))
    untyped = n * (n - 1) // 2 - typed
    return {"pairs_untyped": untyped, "candidates_with_untyped": sum(1 for k in range(n) if n - 1 - k > quota or k > quota)}


def untyped_later(candidates: Sequence[int], quota: int) -> set[int]:
    """Candidates with a later candidate beyond their reach (rules 5-6 cannot apply to them)."""
    c = sorted(set(candidates))
    return {s for k, s in enumerate(c) if len(c) - 1 - k > quota}


def links_requests(g: Ground, groups: Sequence[Group], candidates: Sequence[int], quota: int) -> tuple[list[Request], list[list[Pair]]]:
    """One request per group with links to type: every pair of its members' reach, in order."""
    reqs, planned = [], []
    for group in groups:
        pairs = group_pairs(group.members, candidates, quota)
        if not pairs:
            continue
        question = render("falat/transition.j2", keys=[pair_key(i, j) for i, j in pairs], limits=g.limits)
        messages = [g.system, {"role": "user", "content": group.block + "\n\n" + question}]
        sampling = g.opts.sampling(links_max_tokens(len(pairs), g.limits), judge=True)
        reqs.append(g.ctx.request(f"falat/links/{group.key}", messages, links_grammar(pairs, g.limits), sampling))
        planned.append(pairs)
    return reqs, planned


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


def carrier_links(candidates: Sequence[int], labels: Mapping[Pair, str], suspect: Collection[int]) -> dict[int, list[int]]:
    """j -> the corrupted steps i whose follow_up (i, j) makes j a carrier, traced in order so a
    carrier is corrupted for the next hop; an error_shift endpoint is never a carrier."""
    shifted = {k for (i, j), lab in labels.items() if lab == "error_shift" for k in (i, j)}
    parents: dict[int, list[int]] = {}
    for (i, j), lab in labels.items():
        if lab == "follow_up":
            parents.setdefault(j, []).append(i)
    corrupted = set(suspect)
    links: dict[int, list[int]] = {}
    for j in sorted(candidates):
        hit = sorted(i for i in parents.get(j, ()) if i in corrupted)
        if hit and j not in shifted:
            links[j] = hit
            corrupted.add(j)
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
    candidates: Sequence[int], labels: Mapping[Pair, str], inconsistent: Mapping[int, bool], untyped: Collection[int] = ()
) -> Pruning:
    """The refined set C' from the pair labels (rules in the module docstring).

    `inconsistent`: candidate -> it has a prior or execution inconsistency of its own.
    `untyped`: candidates with a later candidate beyond their reach (never evidence)."""
    out: dict[int, list[str]] = {c: [] for c in candidates}  # labels of pairs leaving c
    entering: dict[int, list[str]] = {c: [] for c in candidates}
    for (i, j), lab in labels.items():
        out.setdefault(i, []).append(lab)
        entering.setdefault(j, []).append(lab)
    links = carrier_links(candidates, labels, suspects(candidates, labels, inconsistent))
    result = Pruning(kept=[])
    for c in sorted(candidates):
        leaving = out[c]
        if "error_shift" in leaving or "error_shift" in entering[c]:
            result.kept.append(c)
            continue
        if c in links:
            source = follow_up_source(c, links)
            result.sources[c] = source
            if CARRIER_EXCEPTION and inconsistent.get(c, False):
                result.spared[c] = f"follow_up carrier of step {source}"
                result.kept.append(c)
            else:
                result.pruned[c] = f"follow_up carrier of step {source}"
            continue
        why = None
        if "correction" in leaving:
            why = "corrected"
        elif "redundancy" in entering[c]:
            why = "redundant"
        elif "dead_end" in leaving and "follow_up" not in leaving:
            why = "dead_end"
        elif leaving and all(lab == "no_influence" for lab in leaving):
            why = "no_influence"
        if why in ("dead_end", "no_influence") and c in untyped:
            result.held_by_unknown[c] = why
            why = None
        if why is not None and inconsistent.get(c, False):
            result.spared[c] = why
            why = None
        if why is None:
            result.kept.append(c)
        else:
            result.pruned[c] = why
    if not result.kept:
        result.kept = sorted(candidates)
        result.fallback = True
    return result

"""Stage 2-3 layout: candidates in groups that share one prompt prefix (issue 34, point 5).

Typing every pair in its own request made FALAT quadratic (a 1,000-step run: 9,315 calls, 204M
prompt tokens). Here the candidates, in order, are cut into groups of at most `group_size`; a
group's prompt shows the shared context (prior, stage summaries, suspects by region), then the
raw text of its *view*: its members and the `quota` candidates after its last member, so each
member's links to its next `quota` candidates are all in view. One request types all of a group's
links; after pruning, one request per group rates its surviving members, on the same prefix
(`block`), so the rating call reads the group's text from the prefix cache. Calls grow with the
candidates / `group_size`, prompt tokens with the candidates' text: linear in the trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from localfa.methods.falat.ground import Ground
from localfa.methods.falat.text import MESSAGE_OVERHEAD, fit_texts
from localfa.templates import render

INSTRUCTION_TOKENS = 700  # the links or rating question after the block (generous)


@dataclass(frozen=True)
class Group:
    members: tuple[int, ...]  # candidates whose links start here (and are rated here)
    view: tuple[int, ...]  # candidates whose raw text the prompt shows: members + lookahead
    block: str  # the shared context, then the view's text: the prefix every call of the group shares
    whole: frozenset[int] = frozenset()  # view steps shown in full (the verification may reuse them)
    run_start: int | None = None  # the block opens with the run's steps from here on (`RunPrefix`)

    def shows(self, step: int) -> bool:
        """Does the block show `step`'s text?"""
        return step in self.view or (self.run_start is not None and step >= self.run_start)

    @property
    def key(self) -> int:
        return self.members[0]


def plan_groups(candidates: Sequence[int], group_size: int, quota: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(members, view) per group: consecutive candidates, `group_size` at a time; the view adds
    the `quota` candidates after the last member."""
    c = sorted(set(candidates))
    out = []
    for k in range(0, len(c), group_size):
        members = tuple(c[k : k + group_size])
        out.append((members, tuple(c[k : k + group_size + quota])))
    return out


def group_pairs(members: Sequence[int], candidates: Sequence[int], quota: int) -> list[tuple[int, int]]:
    """Each member's links to its next `quota` candidates (in order)."""
    c = sorted(set(candidates))
    at = {s: k for k, s in enumerate(c)}
    return [(i, j) for i in members for j in c[at[i] + 1 : at[i] + 1 + quota]]


@dataclass(frozen=True)
class RunPrefix:
    """The prefix the last window's prompt filled (prior, then the run's steps from `start` on):
    a group whose view lies in it and that fits opens with it, so its links, ratings and the
    verifications read the steps from the prefix cache instead of a second copy (issue 52)."""

    start: int
    text: str
    whole: frozenset[int]  # steps it shows in full
    cap: int  # the token cap of the steps it shows cut

    def holds(self, g: Ground, view: Sequence[int], members: Sequence[int]) -> bool:
        """Does it show each of `view`'s steps at least as fully as the group's own view would?"""
        caps = {i: g.opts.rank_step_tokens if i in members else g.opts.pair_step_tokens for i in view}
        return all(i >= self.start and (i in self.whole or self.cap >= caps[i]) for i in view)


def build_groups(
    g: Ground,
    shared: tuple[str, str],
    candidates: Sequence[int],
    group_size: int,
    quota: int,
    answer_tokens: int,
    run: RunPrefix | None = None,
) -> tuple[list[Group], list[int]]:
    """The groups with their rendered blocks (a member's text within `rank_step_tokens`, a
    lookahead step's within `pair_step_tokens`), and the steps whose text was cut further so a
    group's view fits the model's window. `shared`: the prior block and the suspects by region;
    a group opens with `run` instead of the prior block when its view lies in it and it fits."""
    prior_block, suspects = shared
    groups, shortened = [], []
    on_run = run is not None and _fits(g, run.text + "\n\n" + suspects, answer_tokens)
    head = [g.system, {"role": "user", "content": prior_block + "\n\n" + suspects}]
    room = g.room(head, answer_tokens) - INSTRUCTION_TOKENS - MESSAGE_OVERHEAD
    for members, view in plan_groups(candidates, group_size, quota):
        if run is not None and on_run and run.holds(g, view, members):
            groups.append(Group(members, view, run.text + "\n\n" + suspects, run.whole, run.start))
            continue
        clipped = [g.view.clipped(i, g.opts.rank_step_tokens if i in members else g.opts.pair_step_tokens) for i in view]
        fitted = fit_texts(clipped, room - 24 * len(view), g.view.count)
        shortened += [i for i, a, b in zip(view, clipped, fitted) if a != b]
        body = render("falat/_group_view.j2", steps=g.view.shown(view, fitted))
        whole = frozenset(i for i, b in zip(view, fitted) if b == g.view.text(i))
        groups.append(Group(members, view, prior_block + "\n\n" + suspects + "\n\n" + body, whole))
    return groups, sorted(set(shortened))


def _fits(g: Ground, block: str, answer_tokens: int) -> bool:
    return g.room([g.system, {"role": "user", "content": block}], answer_tokens) >= INSTRUCTION_TOKENS + MESSAGE_OVERHEAD

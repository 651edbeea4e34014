"""A claim's evidence packet (issue 51): what the support checks read of one claim, and what the
tracer reads where the whole run does not fit, bounded by a token budget the engine's tokenizer
measures, so a packet's size never grows with the run.

A packet is the claim's own spans (the spans that introduce it, commit it and use it, in that
order) whole, then the passages of the rest of the run that mention its names and values (its
`terms`), most terms first. Both are shown as the run shows spans (``Span 3 (step 3):`` and fenced
blocks), so the reader knows the span ids it may name. The spans that introduce and commit the
claim (its *defining* spans) may have room of their own beside the packet's budget (`whole_tokens`:
the authors show a claim's spans uncut, and a fault's step is what the checks must read whole);
uses and passages share the budget. An own step longer than what is left of its room is cut head
and tail (recorded), and its hidden middle is searched like any other text. A step an earlier
packet of the same prompt already showed is named, not shown again.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from localfa.methods.baselines import shorten
from localfa.methods.drift.excerpts import RADIUS, windows
from localfa.methods.drift.ledger import Claim
from localfa.methods.drift.spans import Span, SpanView
from localfa.methods.drift.terms import step_terms, terms
from localfa.methods.fencing import fence, fence_overhead

POSTINGS = 64  # steps a term may place a claim at: the nearest to the claim's introduction
SCAN_STEPS = 32  # steps searched for one claim's passages: those holding the most of its terms
PASSAGE_SHARE = 4  # at least 1/4 of a packet is kept for passages once the claim's own spans are shown
SHRINK_TRIES = 6  # renderings tried before a packet is cut to its token budget
HEADER_CHARS = 60  # a passage's "From step N, characters a-b of T:" line, at most


#: Room for a claim's defining spans where the engine states no window: as much as they need.
WHOLE_WITHOUT_WINDOW = 1 << 30


class PacketBudget(NamedTuple):
    """A prompt's budgets for each of its packets, in tokens: `tokens` for the packet (uses and
    passages, and the defining spans where `whole` cannot hold them), `whole` for its defining spans."""

    tokens: int
    whole: int


@dataclass
class Packet:
    """One claim's packet: its text, its size in tokens, what it shows and what did not fit."""

    claim: str
    text: str
    tokens: int
    own_steps: list[int] = field(default_factory=list)
    own_cut: list[int] = field(default_factory=list)  # own steps shown cut head and tail
    passages: int = 0
    left_out: int = 0  # passages that mention the claim and did not fit

    def as_details(self) -> dict[str, object]:
        return {
            "claim": self.claim,
            "tokens": self.tokens,
            "own_steps": self.own_steps,
            "own_cut": self.own_cut,
            "passages": self.passages,
            "left_out": self.left_out,
        }


class Packer:
    """Builds packets over one trace's spans; `count` is the engine's token counter."""

    def __init__(self, view: SpanView, spans: list[Span], count: Callable[[str], int], chars_per_token: float) -> None:
        self.view = view
        self.spans = spans
        self.count = count
        self.cpt = chars_per_token
        self.span_of = {i: sp for sp in spans for i in sp.steps}
        self._folded: dict[int, str] = {}
        self._index: dict[str, list[int]] | None = None

    def own_steps(self, claim: Claim) -> list[int]:
        """The steps of the spans that introduce, commit and use the claim, in that order."""
        return self._steps_of([claim.introduced, claim.consequential, *claim.uses])

    def defining_steps(self, claim: Claim) -> set[int]:
        """The steps of the spans that introduce and commit the claim."""
        return set(self._steps_of([claim.introduced, claim.consequential]))

    def _steps_of(self, at: list[int | None]) -> list[int]:
        """The steps of the spans `at` names (each span once, in that order; unknown ids left out)."""
        ids = [s for s in dict.fromkeys(a for a in at if a is not None) if 0 <= s < len(self.spans)]
        return [i for s in ids for i in self.spans[s].steps]

    def packet(self, claim: Claim, tokens: int, shown: set[int] | None = None, whole_tokens: int = 0) -> Packet:
        """The claim's packet within `tokens` plus `whole_tokens` for its defining spans (counted by
        the engine's tokenizer); `shown`: steps earlier packets of the same prompt showed whole
        (updated with this packet's)."""
        shown = set() if shown is None else shown
        limit = tokens + whole_tokens
        chars, whole = max(400, int(tokens * self.cpt)), int(whole_tokens * self.cpt)
        for _ in range(SHRINK_TRIES):
            made = self._render(claim, chars, shown, whole)
            made.tokens = int(self.count(made.text)) if made.text else 0
            if made.tokens <= limit or chars <= 400:
                break
            scale = 0.95 * limit / made.tokens
            chars, whole = max(400, int(chars * scale)), int(whole * scale)
        shown.update(i for i in made.own_steps if i not in made.own_cut)
        return made

    def _header(self, step: int) -> str:
        sp = self.span_of[step]
        rng = f"step {sp.first}" if sp.first == sp.last else f"steps {sp.first}-{sp.last}"
        return f"Span {sp.id} ({rng}):"

    def _render(self, claim: Claim, chars: int, shown: set[int], whole: int = 0) -> Packet:
        out = Packet(claim.id, "", 0)
        parts: list[str] = []
        used = 0
        own_room = chars - chars // PASSAGE_SHARE
        defining = self.defining_steps(claim) if whole > 0 else set()
        hidden: dict[int, tuple[int, int]] = {}  # own steps cut: the [start, end) left out
        last_span = -1
        for i in self.own_steps(claim):
            header = self._header(i) if self.span_of[i].id != last_span else ""
            if i in shown:
                parts.append(f"{header}\n[{i}] shown above.".lstrip())
                last_span = self.span_of[i].id
                continue
            text = self.view.texts[i]
            agent = self.view.names.show(self.view.trace.steps[i].agent)
            overhead = len(header) + len(agent) + fence_overhead(f"STEP {i}") + 12
            if i in defining:  # its own room first, then the packet's
                room = whole - overhead + max(0, own_room - used)
            else:
                room = own_room - used - overhead
            if room < 2 * RADIUS:
                if i in defining:
                    continue
                break
            body = text if len(text) <= room else shorten(text, room)
            if len(body) < len(text):
                out.own_cut.append(i)
                head = (len(body) - 30) * 2 // 3
                hidden[i] = (max(0, head), len(text) - max(0, len(body) - 30 - head))
            parts.append(f"{header}\n[{i}] {agent}:\n{fence(body, f'STEP {i}')}".lstrip())
            out.own_steps.append(i)
            if i in defining:
                spent = len(body) + overhead
                used += max(0, spent - whole)  # what its own room did not hold comes from the packet's
                whole = max(0, whole - spent)
            else:
                used += len(body) + overhead
            last_span = self.span_of[i].id
        found = self._passages(claim, chars - used, set(out.own_steps) - set(hidden), hidden, shown)
        parts += found[0]
        out.passages, out.left_out = len(found[0]), found[1]
        out.text = "\n".join(parts)
        return out

    def _candidates(self, claim: Claim, wanted: frozenset[str]) -> list[int]:
        """The steps to search for the claim's passages: those holding the most of its terms (each
        term's `POSTINGS` steps nearest the claim's introduction), at most `SCAN_STEPS`. Found by
        an index of every step's terms built once, so a packet costs the same on any run length."""
        if self._index is None:
            index: dict[str, list[int]] = {}
            for i, text in enumerate(self.view.texts):
                for t in step_terms(text):
                    index.setdefault(t, []).append(i)
            self._index = index
        at = self.spans[claim.introduced].first if 0 <= claim.introduced < len(self.spans) else 0
        counts: dict[int, int] = {}
        for t in wanted:
            steps = self._index.get(t, [])
            if len(steps) > POSTINGS:
                k = bisect_left(steps, at)
                steps = steps[max(0, k - POSTINGS // 2) : k + POSTINGS // 2]
            for i in steps:
                counts[i] = counts.get(i, 0) + 1
        ranked = sorted(counts, key=lambda i: (-counts[i], abs(i - at)))
        return sorted(ranked[:SCAN_STEPS])

    def _fold(self, i: int) -> str:
        text = self._folded.get(i)
        if text is None:
            text = self._folded[i] = self.view.texts[i].casefold()
        return text

    def _passages(
        self, claim: Claim, room: int, whole: set[int], hidden: dict[int, tuple[int, int]], shown: set[int]
    ) -> tuple[list[str], int]:
        """Blocks of the passages that mention the claim's terms outside what the packet (or an
        earlier one) shows whole, best first within `room` characters; and how many did not fit."""
        wanted = terms(claim.text)
        if not wanted or room <= 2 * RADIUS:
            return [], 0
        found: list[tuple[int, int, int, int]] = []  # (-score, step, start, end)
        for i in sorted(set(self._candidates(claim, wanted)) | set(hidden)):  # an own step's hidden middle too
            if i in whole or i in shown:
                continue
            lo, hi = hidden.get(i, (0, len(self.view.texts[i])))
            found += [(-len(t), i, a, b) for a, b, t in windows(self.view.texts[i], lo, hi, wanted, self._fold(i))]
        found.sort()
        chosen: list[tuple[int, int, int]] = []
        used = 0
        for _, i, a, b in found:
            cost = b - a + fence_overhead(f"PASSAGE {i}") + HEADER_CHARS + len(self._header(i))
            if used + cost <= room:
                chosen.append((i, a, b))
                used += cost
        blocks = [
            f"{self._header(i)}\nFrom step {i}, characters {a:,}-{b:,} of {len(self.view.texts[i]):,}:\n"
            + fence(self.view.texts[i][a:b], f"PASSAGE {i}")
            for i, a, b in sorted(chosen)
        ]
        return blocks, len(found) - len(chosen)

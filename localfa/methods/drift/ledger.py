"""The Claim Keeper's ledger: one entry per consequential claim, merged across chunks.

Each entry is the paper's tuple (text, introduced-at span, consequential-at span, later spans that
use it, type, status). The ledger is read chunk by chunk and carried forward; a claim seen again
updates its entry instead of being added twice: by id (an update), by the same words, or by the
same content (a reworded "new" claim naming the same values and nearly the same words,
`terms.same_content`; its wording is kept in `said_as`). A claim recognised late may name any
earlier span as its introduction. Invariants, enforced after every merge: introduced <= consequential <= each use;
`consequential` is set only once the status is consequential or finalized; status never moves
back (a claim once committed stays committed).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

import regex as re

from localfa.grammars.drift import CLAIM_STATUSES
from localfa.methods.drift.terms import same_content
from localfa.methods.fencing import fence

_RANK = {s: k for k, s in enumerate(CLAIM_STATUSES)}
COMMITTED = frozenset({"consequential", "finalized"})
_WORD = re.compile(r"[\p{L}\p{N}]+")


@lru_cache(maxsize=8192)
def claim_key(text: str) -> str:
    """Comparison key of a claim's text: its words, case-folded, punctuation and spacing ignored."""
    return " ".join(w.casefold() for w in _WORD.findall(text))


@dataclass
class Claim:
    """One ledger entry; span fields are span ids."""

    id: str
    text: str
    type: str
    status: str
    introduced: int
    consequential: int | None = None
    uses: list[int] = field(default_factory=list)
    seen_in_chunks: list[int] = field(default_factory=list)
    said_as: list[str] = field(default_factory=list)  # other wordings merged into this entry

    @property
    def committed(self) -> bool:
        return self.status in COMMITTED

    def normalize(self) -> None:
        """Restore the ordering invariants after a merge."""
        if self.committed and self.consequential is None:
            later = [u for u in self.uses if u >= self.introduced]
            self.consequential = min(later) if later else self.introduced
        if not self.committed:
            self.consequential = None
        floor = self.consequential if self.consequential is not None else self.introduced
        self.introduced = min(self.introduced, floor)
        self.uses = sorted({u for u in self.uses if u >= floor})

    def raise_status(self, status: str) -> None:
        if _RANK[status] > _RANK[self.status]:
            self.status = status

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        """The entry on one line, as the Claim Keeper sees the ledger carried forward."""
        relied = self.consequential if self.consequential is not None else "-"
        uses = ",".join(map(str, self.uses)) or "-"
        text = " ".join(self.text.split())
        return f"{self.id} | {self.type}, {self.status} | introduced {self.introduced}, relied on from {relied}, used in {uses} | {text}"


def ledger_block(claims: list[Claim]) -> str:
    """Every entry, one line each, fenced as data (entry texts are model-written)."""
    return fence("\n".join(c.line() for c in claims), "LEDGER")


class Ledger:
    """The ordered list of claims, with the merge rules of the Claim Keeper."""

    def __init__(self) -> None:
        self.claims: list[Claim] = []

    def __len__(self) -> int:
        return len(self.claims)

    def get(self, claim_id: str) -> Claim | None:
        return next((c for c in self.claims if c.id == claim_id), None)

    def find_text(self, text: str) -> Claim | None:
        """The entry saying the same thing: the same words first, else the same content."""
        key = claim_key(text)
        same = next((c for c in self.claims if key and claim_key(c.text) == key), None)
        return same or next((c for c in self.claims if same_content(c.text, text)), None)

    def merge(self, answer: dict[str, Any], chunk: int = 0) -> list[str]:
        """Fold one chunk's answer (grammar `drift_ledger`) into the ledger; ids touched, in order."""
        touched: list[str] = []
        for upd in answer.get("updates") or []:
            claim = self.get(upd["claim"])
            if claim is None:
                continue
            self._update(claim, upd["status"], list(upd["uses"]), None, chunk)
            touched.append(claim.id)
        for new in answer.get("new_claims") or []:
            text = new["text"].strip()
            same = self.find_text(text)
            if same is not None:  # seen again: it updates its entry, never a duplicate
                same.introduced = min(same.introduced, new["introduced"])
                if claim_key(text) != claim_key(same.text) and text not in same.said_as:
                    same.said_as.append(text)
                self._update(same, new["status"], [new["consequential"], *new["uses"]], new["consequential"], chunk)
                touched.append(same.id)
                continue
            claim = Claim(
                id=f"C{len(self.claims) + 1}",
                text=text,
                type=new["type"],
                status=new["status"],
                introduced=new["introduced"],
                consequential=new["consequential"] if new["status"] in COMMITTED else None,
                uses=list(new["uses"]),
                seen_in_chunks=[chunk],
            )
            claim.normalize()
            self.claims.append(claim)
            touched.append(claim.id)
        return touched

    @staticmethod
    def _update(claim: Claim, status: str, uses: list[int], consequential: int | None, chunk: int) -> None:
        was_committed = claim.committed
        claim.raise_status(status)
        claim.uses = sorted(set(claim.uses) | set(uses))
        if claim.committed and not was_committed:
            # it becomes consequential here: at the named span, else its first use in this chunk
            claim.consequential = consequential if consequential is not None else (min(uses) if uses else None)
        elif claim.committed and consequential is not None and claim.consequential is not None:
            claim.consequential = min(claim.consequential, consequential)
        if chunk not in claim.seen_in_chunks:
            claim.seen_in_chunks.append(chunk)
        claim.normalize()

    def committed(self) -> list[Claim]:
        """Claims the Support Seeker checks, the riskiest first: finalized claims, then decisions
        (the paper finds the decision and finalization stages the riskiest), then ledger order."""
        return sorted((c for c in self.claims if c.committed), key=lambda c: (c.status != "finalized", c.type != "decision"))

    def as_list(self) -> list[dict[str, Any]]:
        return [c.as_dict() for c in self.claims]

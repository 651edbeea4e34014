"""The Claim Keeper's ledger: one entry per consequential claim, merged across chunks.

Each entry is the paper's tuple (text, introduced-at span, consequential-at span, later spans that
use it, type, status). The ledger is read chunk by chunk and carried forward; a claim seen again
(by id, or as a "new" claim whose text matches an entry) updates that entry instead of being
added twice. Invariants, enforced after every merge: introduced <= consequential <= each use;
`consequential` is set only once the status is consequential or finalized; status never moves
back (a claim once committed stays committed).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import regex as re

from localfa.grammars.drift import CLAIM_STATUSES

_RANK = {s: k for k, s in enumerate(CLAIM_STATUSES)}
COMMITTED = frozenset({"consequential", "finalized"})
_WORD = re.compile(r"[\p{L}\p{N}]+")


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


class Ledger:
    """The ordered list of claims, with the merge rules of the Claim Keeper."""

    def __init__(self) -> None:
        self.claims: list[Claim] = []

    def __len__(self) -> int:
        return len(self.claims)

    def get(self, claim_id: str) -> Claim | None:
        return next((c for c in self.claims if c.id == claim_id), None)

    def find_text(self, text: str) -> Claim | None:
        key = claim_key(text)
        return next((c for c in self.claims if key and claim_key(c.text) == key), None)

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
            at = new["at"]
            spans = [at["introduced"], at["consequential"], *at["uses"]]
            same = self.find_text(new["text"])
            if same is not None:  # seen again: it updates its entry, never a duplicate
                same.introduced = min(same.introduced, at["introduced"])
                self._update(same, new["status"], spans[1:], at["consequential"], chunk)
                touched.append(same.id)
                continue
            claim = Claim(
                id=f"C{len(self.claims) + 1}",
                text=new["text"].strip(),
                type=new["type"],
                status=new["status"],
                introduced=at["introduced"],
                consequential=at["consequential"] if new["status"] in COMMITTED else None,
                uses=list(at["uses"]),
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
        """Claims the Support Seeker checks: consequential or finalized, in ledger order."""
        return [c for c in self.claims if c.committed]

    def as_list(self) -> list[dict[str, Any]]:
        return [c.as_dict() for c in self.claims]

"""Shards for schedulers other than Ray (a Slurm array, Kubernetes Jobs): `--shard I/N`.

Shard I of N runs the work units whose stable hash falls in bucket I, and writes them to its own
file, RUN_DIR/results.shard-I-of-N.jsonl, so two shards never write the same file. The hash is a
sha256 of the unit key (trace id, method label, budget label, seed), not Python's `hash` (salted
per process), so every shard of every host agrees on the split without talking to the others.
Report, view and resume read every results file of the run (`localfa.bench.store.results_files`).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from localfa.results import Key

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count`, 1-based as schedulers number array tasks (1/2 and 2/2)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 1 <= self.index <= self.count:
            raise ValueError(f"shard {self.index}/{self.count}: use I/N with 1 <= I <= N")

    @classmethod
    def parse(cls, text: str) -> "Shard":
        """``I/N`` (e.g. ``2/8``; with Slurm: ``$((SLURM_ARRAY_TASK_ID))/$SLURM_ARRAY_TASK_COUNT``)."""
        m = _SPEC.match(text or "")
        if not m:
            raise ValueError(f"shard {text!r}: use I/N, e.g. 1/4 (shard I of N, 1-based)")
        return cls(int(m.group(1)), int(m.group(2)))

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def results_name(self) -> str:
        """This shard's results file name inside the run directory."""
        return f"results.shard-{self.index}-of-{self.count}.jsonl"

    def owns(self, key: Key) -> bool:
        """Whether the unit with this key belongs to this shard."""
        return bucket(key, self.count) == self.index - 1


def bucket(key: Key, count: int) -> int:
    """0-based bucket of a unit key among `count`, the same on every host and Python process."""
    text = json.dumps([str(key[0]), str(key[1]), str(key[2]), int(key[3])], separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") % count

"""SAFARI's short-term memory: four fields the model edits sparsely, plus the harness's call log.

The model outputs only the keys that changed; fault entries are matched by step id (a new id is
appended, a known id replaces that entry only). `past_tool_calls` is kept by the harness and is
read-only to the model. The STM is rendered at the end of every call, in the newest message,
which is then kept as sent (`History.seal`): no earlier message is rewritten to remove an older
STM, so the history stays append-only and prefix-cacheable.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterator


@dataclass
class FaultNote:
    step_id: int
    reason: str
    evidence: str

    def as_dict(self) -> dict[str, Any]:
        return {"step_id": self.step_id, "reason": self.reason, "evidence": self.evidence}


@dataclass
class ShortTermMemory:
    task_goal: str = ""
    final_output: str = ""
    faults: list[FaultNote] = field(default_factory=list)
    still_need: list[str] = field(default_factory=list)
    past_tool_calls: list[str] = field(default_factory=list)  # part of the STM, shown read-only
    max_faults: int | None = None  # bound on `faults` (stated in the prompt); None: unbounded
    dropped_faults: list[int] = field(default_factory=list)  # step ids dropped at the bound, in order
    _shown: tuple[dict[str, Any], str] | None = field(default=None, init=False, repr=False, compare=False)

    def merge(self, update: dict[str, Any] | None) -> list[str]:
        """Apply a sparse update; return the keys it changed."""
        if not update:
            return []
        changed: list[str] = []
        for key in ("task_goal", "final_output"):
            if key in update and update[key] is not None:
                setattr(self, key, str(update[key]))
                changed.append(key)
        if "still_need" in update and update["still_need"] is not None:
            self.still_need = [str(x) for x in update["still_need"]]
            changed.append("still_need")
        for entry in update.get("faults_identified_so_far") or []:
            note = FaultNote(int(entry["step_id"]), str(entry.get("reason", "")), str(entry.get("evidence", "")))
            for i, old in enumerate(self.faults):
                if old.step_id == note.step_id:
                    self.faults[i] = note
                    break
            else:
                self.faults.append(note)
            if self.max_faults is not None and len(self.faults) > self.max_faults:
                latest = max(self.faults, key=lambda f: f.step_id)  # the earliest fault is the answer
                self.faults.remove(latest)
                self.dropped_faults.append(latest.step_id)
            changed.append("faults_identified_so_far")
        return changed

    def fault(self, step_id: int) -> FaultNote | None:
        return next((f for f in self.faults if f.step_id == step_id), None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "task_goal": self.task_goal,
            "final_output": self.final_output,
            "faults_identified_so_far": [f.as_dict() for f in self.faults],
            "still_need": list(self.still_need),
        }

    def render_json(self) -> str:
        """The STM as the prompt shows it; rendered again only when it changed (it is shown every
        turn, and an indented dump runs json's pure-Python encoder)."""
        now = self.as_dict()
        if self._shown is None or self._shown[0] != now:
            self._shown = (now, json.dumps(now, ensure_ascii=False, indent=1))
        return self._shown[1]

    def shrinking_json(self) -> Iterator[str]:
        """The STM as JSON, then ever smaller versions of it (for a final prompt that must fit a
        budget): without still_need, with the last 3 faults, the last one, none, then empty."""
        full = self.as_dict()
        yield self.render_json()
        smaller = dict(full, still_need=[])
        for keep in (3, 1, 0):
            smaller = dict(smaller, faults_identified_so_far=full["faults_identified_so_far"][-keep:] if keep else [])
            yield json.dumps(smaller, ensure_ascii=False, indent=1)
        yield json.dumps({}, ensure_ascii=False)

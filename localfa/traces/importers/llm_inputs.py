"""What an LLM call newly received, without repeating the history it was sent again.

Agent frameworks send the whole conversation to the model on every call, so span logs repeat
the history once per call (the reason TRAIL traces reach millions of tokens). A step keeps only
the input messages that extend the agent's previous call, less the agent's own earlier outputs
(already steps of their own); when the history was rewritten (summarised, re-planned) the full
non-system input is kept. System messages become the agent's system prompt instead of step text.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Msg:
    """A chat message reduced to what matters for reading a trace."""

    role: str
    text: str
    name: str | None = None


def render(msgs: list[Msg]) -> str:
    """Messages as ``[role] text`` blocks (``[role name]`` when the message has a name)."""
    out = []
    for m in msgs:
        who = f"{m.role} {m.name}" if m.name else m.role
        out.append(f"[{who}] {m.text}")
    return "\n\n".join(out)


class InputTracker:
    """Per-agent memory of the last input-message list, to cut the repeated prefix."""

    def __init__(self) -> None:
        self._last: dict[str, list[Msg]] = {}
        self._outputs: dict[str, set[str]] = {}
        self.system_prompts: dict[str, str] = {}

    def note_output(self, agent_key: str, text: str) -> None:
        """Remember what the agent said, so it is not repeated as the next call's input."""
        if text.strip():
            self._outputs.setdefault(agent_key, set()).add(text.strip())

    def new_input(self, agent_key: str, msgs: list[Msg]) -> str | None:
        """Rendered messages not already sent in `agent_key`'s previous call (None if none)."""
        for m in msgs:
            if m.role == "system" and m.text.strip():
                self.system_prompts.setdefault(agent_key, m.text)
                break
        msgs = [m for m in msgs if m.role != "system"]  # some layers send it, some keep it apart
        prev = self._last.get(agent_key)
        self._last[agent_key] = msgs
        if prev is not None and len(prev) <= len(msgs) and msgs[: len(prev)] == prev:
            fresh = msgs[len(prev) :]
        else:
            fresh = msgs
        said = self._outputs.get(agent_key, set())
        fresh = [m for m in fresh if m.role != "system" and m.text.strip() and not (m.role == "assistant" and m.text.strip() in said)]
        return render(fresh) if fresh else None

"""Limits that protect the host from hostile or runaway traces, in one place, with safe defaults.

- ``max_step_chars`` ($LOCALFA_MAX_STEP_CHARS, default 20000): the most characters of one step a
  prompt shows; longer text keeps its head and tail around a ``[... N chars cut ...]`` marker.
- ``max_steps`` ($LOCALFA_MAX_STEPS, default 5000): the most steps a method expands per call
  (shows in one prompt, or asks about one call each): a longer trace is judged on its first
  ``max_steps`` steps.
- ``max_trace_bytes`` ($LOCALFA_MAX_TRACE_BYTES, default 256 MiB): larger trace files are refused
  when read (`localfa.traces.load`).

A limit that is hit is reported in the diagnosis (``details["limits_hit"]``), never a crash.
This module is a leaf (it imports nothing of localfa), so anything may use it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

DEFAULT_MAX_STEP_CHARS = 20_000
DEFAULT_MAX_STEPS = 5_000
DEFAULT_MAX_TRACE_BYTES = 256 * 1024 * 1024
ENV = {"max_step_chars": "LOCALFA_MAX_STEP_CHARS", "max_steps": "LOCALFA_MAX_STEPS", "max_trace_bytes": "LOCALFA_MAX_TRACE_BYTES"}
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]i?b?)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def shorten(text: str, cap: int) -> str:
    """`text` cut to about `cap` characters, keeping its head and tail around a marker."""
    if len(text) <= cap:
        return text
    cut = len(text) - cap
    marker = f" [... {cut} chars cut ...] "
    keep = max(0, cap - len(marker))
    head = (keep * 2 + 2) // 3
    tail = keep - head
    return text[:head] + marker + (text[len(text) - tail :] if tail > 0 else "")


def max_trace_bytes_from_env() -> int:
    """$LOCALFA_MAX_TRACE_BYTES (bytes, or with a K/M/G suffix), else 256 MiB; ValueError if unreadable."""
    name = ENV["max_trace_bytes"]
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return DEFAULT_MAX_TRACE_BYTES
    m = _SIZE.match(raw)
    if not m:
        raise ValueError(f"{name}={raw!r} is not a size (bytes, or e.g. 512M)")
    return int(m.group(1)) * _UNITS[(m.group(2) or "")[:1].lower()]


def _env_int(name: str, default: int, minimum: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a whole number") from None
    if value < minimum:
        raise ValueError(f"{name}={value} is below the minimum {minimum}")
    return value


@dataclass(frozen=True)
class Limits:
    """The host-protecting limits; `from_env()` reads the environment variables above."""

    max_step_chars: int = DEFAULT_MAX_STEP_CHARS
    max_steps: int = DEFAULT_MAX_STEPS

    def __post_init__(self) -> None:
        if self.max_step_chars < 64:
            raise ValueError("max_step_chars must be at least 64")
        if self.max_steps < 1:
            raise ValueError("max_steps must be at least 1")

    @classmethod
    def from_env(cls) -> "Limits":
        return cls(_env_int(ENV["max_step_chars"], DEFAULT_MAX_STEP_CHARS, 64), _env_int(ENV["max_steps"], DEFAULT_MAX_STEPS, 1))

    @property
    def max_trace_bytes(self) -> int:
        return max_trace_bytes_from_env()


@dataclass
class LimitsHit:
    """What a method run cut, for ``details["limits_hit"]`` (empty: nothing was cut)."""

    limits: Limits
    hits: dict[str, Any] = field(default_factory=dict)
    _cut: set[int] = field(default_factory=set)

    def steps(self, n_steps: int) -> int:
        """How many steps to expand: all of them, or `max_steps` (noted)."""
        if n_steps <= self.limits.max_steps:
            return n_steps
        self.hits["max_steps"] = {"limit": self.limits.max_steps, "trace_steps": n_steps}
        return self.limits.max_steps

    def step_text(self, index: int, text: str) -> str:
        """One step's text within `max_step_chars` (head and tail around a cut marker; noted).

        Idempotent per step: a prompt rebuilt while fitting the window notes each cut once.
        """
        if len(text) <= self.limits.max_step_chars:
            return text
        self._cut.add(index)
        return shorten(text, self.limits.max_step_chars)

    def as_details(self) -> dict[str, Any]:
        """``{"max_steps": {...}, "max_step_chars": {...}}`` for what was hit; {} when nothing was."""
        out = dict(self.hits)
        if self._cut:
            out["max_step_chars"] = {"limit": self.limits.max_step_chars, "steps_cut": len(self._cut), "first": sorted(self._cut)[:10]}
        return out

"""Ensemble member specs: which methods run, with what options, how many samples each.

A member is ``NAME``, ``NAME*N`` (N samples: the same method under N derived seeds) or
``NAME(key=value;key=value)*N`` (the member's own options; ``;`` because ``:`` and ``,`` already
separate a spec's options and a list of specs). Members join with ``+`` in a vote and stages with
``>`` in a cascade: ``all-at-once*3>falat>safari(max_turns=10)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from localfa.methods.base import BaseMethod
from localfa.methods.registry import MethodOptionError, MethodSpec, get_method

_MEMBER = re.compile(r"^\s*(?P<name>[A-Za-z][\w.-]*)\s*(?:\((?P<opts>[^()]*)\))?\s*(?:\*\s*(?P<n>\d+))?\s*$")
MAX_SAMPLES = 32


@dataclass(frozen=True)
class Member:
    """One method an ensemble runs, `samples` times (each under its own derived seeds)."""

    spec: MethodSpec
    samples: int = 1

    @property
    def label(self) -> str:
        return self.spec.label + (f"*{self.samples}" if self.samples > 1 else "")

    def build(self) -> BaseMethod:
        return get_method(self.spec)


def parse_member(text: str, owner: str) -> Member:
    """One member from its text; `owner` names the ensemble in error messages."""
    m = _MEMBER.match(text)
    if not m:
        raise MethodOptionError(f"{owner}: member {text!r} is not NAME, NAME*N or NAME(key=value;...)*N")
    opts = ":".join(p.strip() for p in (m.group("opts") or "").split(";") if p.strip())
    spec = MethodSpec.parse(m.group("name") + (":" + opts if opts else ""))
    if spec.name in ("vote", "cascade"):
        raise MethodOptionError(f"{owner}: member {text!r} is itself an ensemble (not supported)")
    samples = int(m.group("n") or 1)
    if not 1 <= samples <= MAX_SAMPLES:
        raise MethodOptionError(f"{owner}: member {text!r} asks for {samples} samples (1..{MAX_SAMPLES})")
    get_method(spec)  # unknown names or options fail here, with the registry's message
    return Member(spec, samples)


def parse_members(text: str, sep: str, owner: str) -> list[Member]:
    """Members separated by `sep` (``+`` or ``>``); at least one."""
    parts = [p for p in str(text).split(sep) if p.strip()]
    if not parts:
        raise MethodOptionError(f"{owner}: no members given")
    return [parse_member(p, owner) for p in parts]

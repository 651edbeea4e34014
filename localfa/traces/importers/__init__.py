"""One importer per log format, and the detection that picks one.

Each importer module has ``NAME``, ``sniff(data) -> bool`` (a cheap structural check on the
parsed JSON) and ``parse(data, path, source) -> Trace`` (raises TraceError naming what is wrong
and where); one whose files hold several runs also has ``parse_many(...) -> list[Trace]``. Detection tries them in `ORDER`: the most specific shapes first, the generic
message list last.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from localfa.traces.errors import TraceError
from localfa.traces.importers import (
    atif,
    claude_code,
    codex,
    inspect_ai,
    messages,
    mini_swe_agent,
    openhands,
    openinference,
    otel_genai,
    swe_agent,
    telbench,
    vercel_ai,
    whowhen,
)
from localfa.traces.model import Trace

# Coding-agent formats first: a SWE-agent .traj has a `history` array (Who&When's key), a
# mini-swe-agent trajectory a `messages` array (the generic chat log's), an OpenHands evaluation
# record a `history` of events; agent logs (Claude Code, Codex, OpenHands, inspect_ai) before the
# generic shapes they could be mistaken for; AI SDK spans before OTel GenAI (they carry gen_ai.*
# attributes too, but their content is in ai.*).
ORDER: tuple[ModuleType, ...] = (
    atif,
    swe_agent,
    mini_swe_agent,
    claude_code,
    codex,
    openhands,
    inspect_ai,
    whowhen,
    telbench,
    vercel_ai,
    openinference,
    otel_genai,
    messages,
)
IMPORTERS: dict[str, ModuleType] = {m.NAME: m for m in ORDER}
FORMATS: tuple[str, ...] = tuple(IMPORTERS)


def detect(data: Any) -> str | None:
    """The first format whose importer recognises `data`, or None."""
    for mod in ORDER:
        try:
            if mod.sniff(data):
                return mod.NAME
        except (TraceError, ValueError, TypeError, KeyError, AttributeError, IndexError):
            continue  # a guess that trips on the data is a "no"; parse() will say what is wrong
    return None


def parse(fmt: str, data: Any, path: Path, source: str) -> Trace:
    """Run the importer for `fmt`."""
    return IMPORTERS[fmt].parse(data, path, source)


def parse_many(fmt: str, data: Any, path: Path, source: str) -> list[Trace]:
    """The runs `data` holds: an importer of files that hold several (an inspect_ai log, one run
    per sample) has ``parse_many``; for the others the file is one run."""
    mod = IMPORTERS[fmt]
    many = getattr(mod, "parse_many", None)
    return list(many(data, path, source)) if many is not None else [mod.parse(data, path, source)]

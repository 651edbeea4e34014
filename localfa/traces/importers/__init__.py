"""One importer per log format, and the detection that picks one.

Each importer module has ``NAME``, ``sniff(data) -> bool`` (a cheap structural check on the
parsed JSON) and ``parse(data, path, source) -> Trace`` (raises TraceError naming what is wrong
and where). Detection tries them in `ORDER`: the most specific shapes first, the generic
message list last.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from localfa.traces.errors import TraceError
from localfa.traces.importers import atif, messages, mini_swe_agent, openinference, otel_genai, swe_agent, whowhen
from localfa.traces.model import Trace

# Coding-agent formats first: a SWE-agent .traj has a `history` array (Who&When's key) and a
# mini-swe-agent trajectory a `messages` array (the generic chat log's).
ORDER: tuple[ModuleType, ...] = (atif, swe_agent, mini_swe_agent, whowhen, openinference, otel_genai, messages)
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

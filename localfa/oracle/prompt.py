"""Reading a request's prompt as a model reads it: which steps it shows, with which text and agent.

Every display format the methods use is read here, and nowhere else in the oracle:

- fenced blocks ``<<<STEP i>>>`` (every method) and ``<<<PASSAGE i>>>`` (DRIFT's passages of cut
  steps), each under a header line ``[i] agent:`` where the prompt gives one;
- SAFARI's numbered line view (``  541 (step 71)| {"step_id": 71, "agent": ...``): each step's
  consecutive lines in one result are one piece of its JSON record;
- ids a prompt names without showing text: DRIFT's span headers (``Span 3 (steps 4-5):``), its
  ledger and claim headers, the step ids SAFARI's memory block notes.

A `Unit` is one id with the text the prompt shows next to it; `units` gives one per id (every
piece of it, in prompt order). The id an oracle answer names is the id a unit shows beside the
text it recognised.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache

from localfa.methods.fencing import fenced_blocks

_SHOWN_BLOCK = re.compile(r"(STEP|PASSAGE) (\d+)")
_HEADER = re.compile(r"^\[(\d+)\] (.*?)(?: \(observation\))?:$", re.M)
_LINE = re.compile(r"^\s*(\d+) \(step (\d+)\)\| ", re.M)
_RECORD_AGENT = re.compile(r'"step_id": ?(\d+), ?"agent": ?"((?:[^"\\]|\\.)*)"')
_SPAN_HEADER = re.compile(r"^Span (\d+) \(steps? (\d+)(?:-(\d+))?\):$", re.M)
_CLAIM_HEADER = re.compile(r"introduced in span (\d+), relied on from span (\d+|-), used in spans ([\d, ]+|none recorded)")
_LEDGER_LINE = re.compile(r"\| introduced (\d+), relied on from (\d+|-), used in ([\d,]+|-) \|")
_STM_STEP = re.compile(r'"step_id": ?(\d+)')
_INT = re.compile(r"\d+")


@dataclass(frozen=True)
class Unit:
    """One id the prompt shows with text: `text` is every piece of it shown, in prompt order."""

    id: int
    text: str
    kind: str  # "block" (fenced step or passage) or "lines" (SAFARI's line view)


def numbered_lines(text: str) -> list[tuple[int, int, str]]:
    """(line number, step, text) of every numbered line `text` shows, in order."""
    out = []
    for m in _LINE.finditer(text):
        end = text.find("\n", m.end())
        out.append((int(m.group(1)), int(m.group(2)), text[m.end() : end if end >= 0 else len(text)]))
    return out


def _line_pieces(text: str) -> list[tuple[int, str]]:
    """(step, its consecutive lines joined) for every run of one step's lines in `text`: the
    line view cuts a step's one-line record into lines, so joining them gives the record back."""
    pieces: list[tuple[int, str]] = []
    last_line = None
    for line, step, body in numbered_lines(text):
        if pieces and pieces[-1][0] == step and last_line is not None and line == last_line + 1:
            pieces[-1] = (step, pieces[-1][1] + body)
        else:
            pieces.append((step, body))
        last_line = line
    return pieces


@lru_cache(maxsize=256)
def units(text: str) -> tuple[Unit, ...]:
    """One `Unit` per step id the prompt shows text of, in order of first appearance."""
    found: dict[int, list[str]] = {}
    kinds: dict[int, str] = {}
    for label, body in fenced_blocks(text):
        m = _SHOWN_BLOCK.fullmatch(label)
        if m:
            i = int(m.group(2))
            found.setdefault(i, []).append(body)
            kinds.setdefault(i, "block")
    for step, body in _line_pieces(text):
        found.setdefault(step, []).append(body)
        kinds.setdefault(step, "lines")
    return tuple(Unit(i, "\n".join(parts), kinds[i]) for i, parts in found.items())


@lru_cache(maxsize=256)
def agents_shown(text: str) -> dict[int, str]:
    """Step id -> the agent the prompt shows for it (``[i] agent:`` headers, line-view records)."""
    out: dict[int, str] = {}
    for m in _HEADER.finditer(text):
        out.setdefault(int(m.group(1)), m.group(2))
    for m in _RECORD_AGENT.finditer(text):
        try:
            out.setdefault(int(m.group(1)), json.loads(f'"{m.group(2)}"'))
        except json.JSONDecodeError:
            out.setdefault(int(m.group(1)), m.group(2))
    return out


@lru_cache(maxsize=256)
def shown_ids(text: str) -> frozenset[int]:
    """Every step or span id the prompt shows, in any display format (module doc): the only ids
    an honest answer may name. Step and span ids share one set."""
    ids: set[int] = {u.id for u in units(text)}
    for label, body in fenced_blocks(text):
        if label == "STM":
            ids.update(int(x) for x in _STM_STEP.findall(body))
        elif label == "LEDGER":
            for intro, relied, uses in _LEDGER_LINE.findall(body):
                ids.update(int(x) for x in _INT.findall(f"{intro} {relied} {uses}"))
    for span, first, last in _SPAN_HEADER.findall(text):
        ids.add(int(span))
        ids.update(range(int(first), int(last or first) + 1))
    for intro, relied, uses in _CLAIM_HEADER.findall(text):
        ids.update(int(x) for x in _INT.findall(f"{intro} {relied} {uses}"))
    return frozenset(ids)


def fenced(text: str, label: str) -> str:
    """The text of the prompt's first block `label` (``TASK``, ``RESULT``, ``ANSWER``), or ''."""
    return next((body for name, body in fenced_blocks(text) if name == label), "")

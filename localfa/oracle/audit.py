"""No clairvoyance: an honest oracle answer names only ids its request shows, and recognises the
fault only where the request carries its words.

A rule sees no labels (`localfa.oracle.policy`), so by construction it cannot aim at a step the
prompt hides; the audit checks that this holds for every honest answer of every oracle run (it is
always on: `OracleEngine(audit=False)` exists only for the audit's own test):

- every id the fault was recognised at (`Ask.recognitions`) is one whose text, as the request
  shows it in any of its messages, carries the fault's fingerprint (checked afresh here);
- every step id the answer names is one the request shows (`Ask.shown_step_ids()`):

- JSON answers: every integer under a key that names steps or spans (`STEP_KEYS`, or any key with
  ``step`` or ``span`` in it: ``step``, ``step_id``, ``focus_step``, ``steps``, ``start``, ``end``,
  ``span``, DRIFT's ``introduced``/``consequential``/``uses``, FALAT's ``ranking``), inside lists
  and nested objects too, and the numeric keys of an object under such a key (FALAT's
  ``{"steps": {"3": ...}}``);
- regex answers made only of comma-separated integers (DRIFT's span starts): each integer.

Wrong answers are not audited: a model that errs may name any id its grammar admits.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from localfa.oracle import prompt as prompt_reader
from localfa.oracle.policy import Ask, PolicyError

STEP_KEYS = frozenset({"start", "end", "introduced", "consequential", "uses", "ranking"})
_ID_LIST = re.compile(r"\d+(,\d+)*")


class ClairvoyantAnswer(PolicyError):
    """An honest answer named a step id its prompt does not show, or recognised a fault the prompt
    does not carry."""


def names_steps(key: str) -> bool:
    """Whether a JSON key holds step (or span) ids."""
    low = key.lower()
    return low in STEP_KEYS or "step" in low or "span" in low


def _ints(value: Any, path: str) -> Iterator[tuple[str, int]]:
    """The ids a step field holds: its integers (in lists too), the numeric keys of an object
    (whose values are read as any answer is: ``{"3": {"significance": 2}}`` names step 3 only)."""
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        yield path, value
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _ints(v, f"{path}[{i}]")
    elif isinstance(value, dict):
        for k, v in value.items():
            if str(k).isdigit():
                yield f"{path} key {k!r}", int(k)
            yield from named_ids(v, f"{path}.{k}")


def named_ids(value: Any, path: str = "answer") -> Iterator[tuple[str, int]]:
    """(where, id) for every step id an answer names (see module doc for which fields)."""
    if isinstance(value, dict):
        for k, v in value.items():
            where = f"{path}.{k}"
            if names_steps(str(k)):
                yield from _ints(v, where)
            else:
                yield from named_ids(v, where)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from named_ids(v, f"{path}[{i}]")


def answer_ids(ask: Ask, value: Any) -> list[tuple[str, int]]:
    """The step ids an answer names: JSON fields, or a plain list of ids as text."""
    if isinstance(value, str):
        text = value.strip()
        if ask.grammar.kind == "regex" and _ID_LIST.fullmatch(text):
            return [(f"answer[{i}]", int(x)) for i, x in enumerate(text.split(","))]
        return []
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    return list(named_ids(value))


def audit_recognitions(ask: Ask) -> None:
    """Raise `ClairvoyantAnswer` where the rule recognised the fault at an id whose shown text does
    not carry it (recomputed from every message of the request)."""
    if not ask.recognitions:
        return
    shown = prompt_reader.units(ask.text)
    texts = {u.id: u.text for u in shown}
    for i in dict.fromkeys(ask.recognitions):
        if not ask.carries_fault(texts.get(i, "")):
            raise ClairvoyantAnswer(
                f"request {ask.key!r}: the fault was recognised at id {i}, whose text the request does not show carrying it"
            )


def audit_answer(ask: Ask, value: Any) -> None:
    """Raise `ClairvoyantAnswer` naming the field when `value` names an id the prompt hides, or the
    rule recognised a fault the prompt does not carry."""
    audit_recognitions(ask)
    shown = ask.shown_step_ids()
    hidden = [(where, i) for where, i in answer_ids(ask, value) if i not in shown]
    if hidden:
        where, i = hidden[0]
        more = f" (and {len(hidden) - 1} more)" if len(hidden) > 1 else ""
        raise ClairvoyantAnswer(
            f"{where} names step {i}, which request {ask.key!r} does not show{more}; shown ids: {_ranges(sorted(shown)) or 'none'}"
        )


def _ranges(ids: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2,5`` (short error messages for long traces)."""
    out: list[str] = []
    for i in ids:
        if out and out[-1].split("-")[-1] == str(i - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ",".join(out)

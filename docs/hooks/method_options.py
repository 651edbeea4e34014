"""MkDocs hook: a method page's options table, drawn from the code.

`<!-- method-options: NAME -->` on a page becomes a table of every option of method NAME with its
default (the method's `Options` dataclass: sized for a strong model) and the value each serving
profile (`serving/profiles/*.toml`, `[methods.NAME]`) sets for its model, so the page cannot
drift from the defaults the code runs with.
"""

from __future__ import annotations

import dataclasses
import html
import re
from typing import Any

from localfa.engine.settings import list_profiles, load_profile
from localfa.methods.registry import method_class

MARKER = re.compile(r"^<!-- method-options: ([\w-]+) -->$", re.M)  # alone on its line: a mention in text stays


def _flat(prefix: str, value: Any) -> dict[str, Any]:
    """Nested option values (a dataclass or a table) as `name.sub` entries."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: v for key, sub in value.items() for k, v in _flat(f"{prefix}.{key}", sub).items()}
    return {prefix: value}


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return html.escape(str(value))


def options_table(name: str) -> str:
    """Markdown table: option, default, and one column per profile that sets any of them."""
    options = method_class(name).Options
    if not dataclasses.is_dataclass(options):
        return f"`{name}` takes no options."
    instance = options()
    defaults: dict[str, Any] = {}
    for f in dataclasses.fields(options):
        defaults.update(_flat(f.name, getattr(instance, f.name)))
    profiles = {
        p: {k: v for key, val in load_profile(p).methods.get(name, {}).items() for k, v in _flat(key, val).items()} for p in list_profiles()
    }
    profiles = {p: table for p, table in profiles.items() if table}

    def row(cells: list[str]) -> str:
        return "| " + " | ".join(cells) + " |"

    head = row(["option", "default", *(f"`{p}` profile" for p in profiles)])
    rule = row(["---"] * (2 + len(profiles)))
    rows = [row([f"`{k}`", _shown(v), *(_shown(t[k]) if k in t else "" for t in profiles.values())]) for k, v in defaults.items()]
    return "\n".join([head, rule, *rows])


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return MARKER.sub(lambda m: options_table(m.group(1)), markdown)

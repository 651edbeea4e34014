"""Failure taxonomies: a name, its source and licence, and categories with one-line definitions.

localfa ships three (`trail`, `mast`, `agentrx`, in `taxonomies/`); a user's own taxonomy is a
TOML file of the same shape::

    name = "ours"
    title = "Our failure modes"
    source = "team wiki, 2026"
    [[category]]
    name = "Wrong API version"
    definition = "The agent called an endpoint the service no longer offers."

A category may carry a `group` (MAST's and TRAIL's upper levels). Names must be distinct and
non-empty, since they become the grammar's choices.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from localfa.errors import LocatedError

BUILTIN = ("agentrx", "mast", "trail")
MAX_NAME = 80
MAX_DEFINITION = 400


class TaxonomyError(LocatedError):
    """A taxonomy that cannot be used; str = "path: message"."""


@dataclass(frozen=True)
class Category:
    name: str
    definition: str
    group: str | None = None


@dataclass(frozen=True)
class Taxonomy:
    name: str
    title: str
    source: str
    licence: str
    categories: tuple[Category, ...]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.categories]

    def group_of(self, category: str) -> str | None:
        return next((c.group for c in self.categories if c.name == category), None)


def _one_line(value: object, where: str, field: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise TaxonomyError(where, f"{field}: a non-empty string is required")
    text = " ".join(value.split())
    if len(text) > limit:
        raise TaxonomyError(where, f"{field}: at most {limit} characters, got {len(text)}")
    return text


def parse_taxonomy(data: dict[str, object], where: str) -> Taxonomy:
    """A `Taxonomy` from a parsed TOML table, with errors naming the file and the field."""
    rows = data.get("category")
    if not isinstance(rows, list) or not rows:
        raise TaxonomyError(where, "category: at least one [[category]] table is required")
    cats: list[Category] = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise TaxonomyError(where, f"category[{i}]: a table is required")
        name = _one_line(row.get("name"), where, f"category[{i}].name", MAX_NAME)
        definition = _one_line(row.get("definition"), where, f"category[{i}].definition", MAX_DEFINITION)
        group = row.get("group")
        cats.append(Category(name, definition, _one_line(group, where, f"category[{i}].group", MAX_NAME) if group is not None else None))
    names = [c.name for c in cats]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise TaxonomyError(where, f"category.name: names repeat: {', '.join(dupes)}")
    name = _one_line(data.get("name", Path(where).stem), where, "name", MAX_NAME)
    return Taxonomy(
        name=name,
        title=str(data.get("title") or name),
        source=str(data.get("source") or "unstated"),
        licence=str(data.get("licence") or "unstated"),
        categories=tuple(cats),
    )


def load_taxonomy(spec: str) -> Taxonomy:
    """A built-in taxonomy by name (`trail`, `mast`, `agentrx`) or a TOML file by path."""
    if spec.lower() in BUILTIN:
        text = resources.files("localfa.insights").joinpath("taxonomies", f"{spec.lower()}.toml").read_text(encoding="utf-8")
        where = f"<built-in taxonomy {spec.lower()}>"
    else:
        path = Path(spec)
        if not path.is_file():
            raise TaxonomyError(spec, f"not a built-in taxonomy ({', '.join(BUILTIN)}) nor a TOML file")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TaxonomyError(spec, f"cannot be read: {exc}") from None
        where = str(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TaxonomyError(where, f"not valid TOML: {exc}") from None
    return parse_taxonomy(data, where)

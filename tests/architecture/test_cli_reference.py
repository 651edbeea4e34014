"""The CLI reference page (docs/cli.md) says what the parsers parse (issue 39.2).

The page is generated from the click objects `localfa` parses with (`localfa.cli.reference`); these
tests fail when an option, argument or command exists in a parser and not on the committed page,
or when anything else on the page has drifted from what the generator writes now.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from localfa.cli.reference import command_tree, render

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _sections(page: str) -> dict[str, str]:
    """Command name -> the text of its section on the page."""
    parts = page.split("\n## localfa ")[1:]
    return {part.split("\n", 1)[0].strip(): part for part in parts}


def missing_from_page(group: Any, page: str) -> list[str]:
    """Every command, argument and option the parsers know that the page's section for it lacks."""
    sections = _sections(page)
    missing = []
    for name in group.list_commands(typer.Context(group, info_name="localfa")):
        section = sections.get(name)
        if section is None:
            missing.append(f"localfa {name} (the whole command)")
            continue
        for param in group.commands[name].params:
            if param.hidden or param.name == "help":
                continue
            # an argument is shown by its metavar (TRACE) where it has one, else by its name
            names = [*param.opts, *param.secondary_opts] if param.param_type_name == "option" else [param.metavar or param.name]
            missing += [f"localfa {name} {flag}" for flag in names if f"`{flag}" not in section and f", {flag}" not in section]
    return missing


def test_every_option_of_every_parser_is_on_the_page():
    missing = missing_from_page(command_tree(), PAGE.read_text(encoding="utf-8"))
    assert missing == [], f"not in {PAGE.name}: {', '.join(missing)}; run python -m localfa.cli.reference --write docs/cli.md"


def test_the_page_is_what_the_parsers_generate_now():
    assert PAGE.read_text(encoding="utf-8") == render(), "docs/cli.md is out of date: python -m localfa.cli.reference --write docs/cli.md"


def _new_option() -> Any:
    """An option as Typer builds one from a command's signature, the way a real edit would add it."""
    app = typer.Typer()

    @app.command("probe")
    def probe(brand_new_option: int = typer.Option(0, "--brand-new-option", help="added by the test")) -> None: ...

    @app.command("other")
    def other() -> None: ...

    return typer.main.get_command(app).commands["probe"].params[0]


def test_an_option_added_to_a_parser_and_not_to_the_page_is_caught(monkeypatch):
    group = command_tree()
    page = render(scripts=False)
    assert missing_from_page(group, page) == []
    diagnose = group.commands["diagnose"]
    diagnose.params.append(_new_option())
    assert missing_from_page(group, page) == ["localfa diagnose --brand-new-option"]
    from localfa.cli import reference

    monkeypatch.setattr(reference, "command_tree", lambda: group)
    assert "`--brand-new-option <int>`" in _sections(reference.render(scripts=False))["diagnose"]  # the generator writes it

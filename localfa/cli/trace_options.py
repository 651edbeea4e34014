"""Options about which traces a command reads, declared once for every command that takes them."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

FailedOnlyOpt = Annotated[
    bool,
    typer.Option(
        "--failed-only",
        help="Harness runs (a Harbor job folder, a SWE-bench run): only the trials the harness marked failed "
        "(reward 0, resolved: false); says how many it skipped and why",
    ),
]
FollowLinksOpt = Annotated[
    bool,
    typer.Option(
        "--follow-links",
        help="Read symbolic links inside the folders given even when they point outside them (skipped, with a warning, by default)",
    ),
]
AllowNoneOpt = Annotated[
    Optional[bool],
    typer.Option(
        "--allow-none/--no-allow-none",
        help="May a method answer 'no decisive error' instead of a step (sets allow_none on every method)? "
        "Default: only on runs nobody labelled that their harness marked passed; give --allow-none to score "
        "labelled no-error runs (TELBench), --no-allow-none to always name a step",
    ),
]


def with_allow_none(specs: list, allow_none: bool | None) -> list:
    """`specs` (MethodSpecs) with ``allow_none`` set on each where the flag was given."""
    from localfa.methods.registry import MethodSpec

    if allow_none is None:
        return specs
    return [MethodSpec.of(s.name, **{**s.options_dict, "allow_none": allow_none}) for s in specs]

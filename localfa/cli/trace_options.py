"""Options about which traces a command reads, declared once for every command that takes them."""

from __future__ import annotations

from typing import Annotated

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

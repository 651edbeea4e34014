"""The `localfa` command line: one module per command, each a thin wrapper over the Python API.

Commands are added here, explicitly; importing a command module registers nothing by itself.
"""

from __future__ import annotations

import typer

from localfa import offline

offline.enforce()


def build_app() -> typer.Typer:
    """The app with every command; command modules import their heavy parts lazily."""
    from localfa.cli import bench, diagnose, inspect, report, serve, summarize, view

    app = typer.Typer(
        add_completion=False, no_args_is_help=True, help="Find who broke a failed LLM-agent run, and when, on your own hardware."
    )
    app.command("inspect")(inspect.inspect)
    app.command("diagnose")(diagnose.diagnose)
    app.command("bench")(bench.bench)
    app.command("report")(report.report)
    app.command("serve")(serve.serve)
    app.command("view")(view.view)
    app.command("summarize")(summarize.summarize)
    return app


def main(argv: list[str] | None = None) -> int:
    try:
        build_app()(args=argv, standalone_mode=True)
    except SystemExit as exc:  # typer exits through SystemExit
        return int(exc.code or 0)
    return 0

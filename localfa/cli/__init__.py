"""The `localfa` command line: one module per command, each a thin wrapper over the Python API.

Commands are added here, explicitly; importing a command module registers nothing by itself.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from localfa import offline

offline.enforce()


EXAMPLES = (
    "localfa inspect run.json                     # what localfa reads in it",
    "localfa diagnose run.json --engine scripted  # no model: try it out",
    "localfa diagnose run.json --out d.jsonl --html d.html",
    "localfa bench traces/ --methods safari,drift --out runs/a",
    "localfa report runs/a",
    "localfa view runs/a                          # runs/a/view.html",
    "localfa summarize runs/a",
)
# (name, one line for `localfa -h`)
COMMANDS = (
    ("inspect", "What a trace file holds, as the methods will see it"),
    ("diagnose", "Name the decisive faulty step and agent of each trace"),
    ("bench", "Run methods over many traces, resumably, into a run directory"),
    ("report", "Score a run: accuracy per method; report.html"),
    ("serve", "Start a vLLM server from a profile"),
    ("view", "The trace view: an index of every diagnosis, a page per trace"),
    ("summarize", "What failed across a sweep, or how two sweeps differ"),
)


def _version(value: bool) -> None:
    if value:
        from localfa.version import __version__

        typer.echo(f"localfa {__version__}")
        raise typer.Exit()


def build_app() -> typer.Typer:
    """The app with every command; command modules import their heavy parts lazily."""
    from localfa.cli import bench, diagnose, help, inspect, report, serve, summarize, view

    app = typer.Typer(
        add_completion=False,
        no_args_is_help=True,
        help="Find who broke a failed LLM-agent run, and when, on your own hardware.",
        epilog=help.examples(EXAMPLES),
        cls=help.Group,
        rich_markup_mode=None,
        context_settings={"help_option_names": help.HELP_OPTIONS},
    )

    @app.callback()
    def main(
        version: Annotated[
            bool, typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit")
        ] = False,
    ) -> None:
        """Find who broke a failed LLM-agent run, and when, on your own hardware."""

    functions: dict[str, Any] = {
        "inspect": inspect.inspect,
        "diagnose": diagnose.diagnose,
        "bench": bench.bench,
        "report": report.report,
        "serve": serve.serve,
        "view": view.view,
        "summarize": summarize.summarize,
    }
    for name, short in COMMANDS:
        app.command(name, cls=help.Command, short_help=short)(functions[name])
    return app


def main(argv: list[str] | None = None) -> int:
    try:
        build_app()(args=argv, standalone_mode=True)
    except SystemExit as exc:  # typer exits through SystemExit
        return int(exc.code or 0)
    return 0

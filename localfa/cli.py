"""The `localfa` command line: each sub-command lives in the module that owns its job."""

from __future__ import annotations

import sys

import typer

from localfa import offline

offline.enforce()

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Find who broke a failed LLM-agent run, and when, on your own hardware.",
)


def _register() -> None:
    # Each module adds its own command(s) to `app`; imports stay light (engines load lazily).
    from localfa import diagnose_cmd, serve_cmd  # noqa: F401
    from localfa.traces import inspect_cmd  # noqa: F401
    from localfa.bench import bench_cmd  # noqa: F401
    from localfa.bench import report_cmd  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    _register()
    try:
        app(args=argv, standalone_mode=True)
    except SystemExit as exc:  # typer exits through SystemExit
        return int(exc.code or 0)
    return 0


if __name__ == "__main__":
    # Run through the importable module so commands register on the same `app` object.
    from localfa.cli import main as _main

    sys.exit(_main())

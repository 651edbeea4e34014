"""`localfa report RUN_DIR`: a short table on stdout (100 columns) and RUN_DIR/report.html.

Works on a run that is still going or was killed (it reads the finished records only). A sweep
without labels says so and shows what is known without them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from localfa.cli.errors import fail
from localfa.cli.outputs import cannot_write, check_output_file
from localfa.terminal import terminal_safe


def report(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="A run directory written by `localfa bench --out`")],
    html_out: Annotated[Optional[Path], typer.Option("--html", help="Where to write the HTML (default: RUN_DIR/report.html)")] = None,
    substring: Annotated[
        bool,
        typer.Option(
            "--substring",
            help="Also print step accuracy under Who&When's reference scorer (substring match, "
            "'7' matches '17'), only to compare with published tables",
        ),
    ] = False,
    bootstrap: Annotated[int, typer.Option("--bootstrap", min=0, help="Bootstrap resamples for the 95% intervals")] = 1000,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Also write the metrics as JSON here")] = None,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the full table (every metric and cost column) as markdown instead")
    ] = False,
) -> None:
    """Print agent and step accuracy per method and subset (95% intervals, tokens, errors) in 100
    columns; write report.html with everything else. Without labels: what is known without them."""
    from localfa.bench.report import ReportError, load_run
    from localfa.bench.report_dir import is_p_parent, write_any_report
    from localfa.bench.report_text import terminal_report

    for path, option in ((html_out, "--html"), (json_out, "--json")):
        if path is not None:
            check_output_file(path, option)

    try:
        md, path = write_any_report(run_dir, html_out, substring=substring, n_boot=bootstrap)
    except ReportError as exc:
        fail(exc.path, exc.message)
    except OSError as exc:
        fail(str(html_out or run_dir), f"cannot write the report: {exc.strerror or exc}")
    if markdown or is_p_parent(run_dir):
        typer.echo(terminal_safe(md), nl=False)
    else:
        records, manifest = load_run(run_dir)
        typer.echo(terminal_safe(terminal_report(records, manifest, str(run_dir), path, n_boot=bootstrap, substring=substring)), nl=False)
    if json_out:
        import json

        from localfa.bench.metrics import summarize

        records, manifest = load_run(run_dir)
        groups = summarize(records, n_boot=bootstrap, method_order=list((manifest or {}).get("methods") or {}))
        try:
            json_out.write_text(json.dumps([g.as_dict() for g in groups], indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            cannot_write(json_out, exc)
    typer.echo(f"wrote {path}", err=True)

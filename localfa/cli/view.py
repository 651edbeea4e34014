"""`localfa view RESULTS.jsonl|RUN_DIR`: self-contained HTML pages to look at diagnoses.

Each trace is shown as a timeline with the decisive step highlighted and every evidence quote
marked where it occurs, beside each method's verdict and the path it took to get there. Many
traces get an index (one row per diagnosis, sortable and filterable) and one page per trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from localfa.cli.errors import fail, fail_located
from localfa.errors import one_line


def view(
    results: Annotated[Path, typer.Argument(metavar="RESULTS", help="A results file (diagnose --out, results.jsonl) or a run directory")],
    out: Annotated[Optional[Path], typer.Option("--out", help="Where to write the page (default: beside the input, .html)")] = None,
    trace: Annotated[Optional[list[str]], typer.Option("--trace", help="Only traces whose id contains this (repeatable)")] = None,
    method: Annotated[Optional[list[str]], typer.Option("--method", help="Only this method label (repeatable)")] = None,
    traces: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--traces",
            help="A folder whose trace files the page may read (repeatable); without it only the run's own trace files "
            "(as its manifest lists them, holding the content its records were made on) are read, never a path a record names",
        ),
    ] = None,
    one_page: Annotated[
        bool, typer.Option("--one-page", help="All traces on one page, no index (a few traces to send as one file)")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace --out even when it is not a page localfa view wrote")] = False,
) -> None:
    """Write the trace view (no network, everything inline): for several traces an index of
    every diagnosis, sortable and filterable, each row opening its trace's own page.

    \b
    Examples:
      localfa view runs/week48                   # runs/week48/view.html
      localfa view diag.jsonl --out diag.html
      localfa view runs/week48 --method drift --trace hand-crafted
    """
    from localfa.view import write_browsable
    from localfa.view.records import TraceFiles, ViewError, read_results, results_path

    for folder in traces or ():
        if not folder.is_dir():
            fail(str(folder), "--traces: not a folder")
    try:
        path = results_path(results)
        records = read_results(path)
    except ViewError as exc:
        fail_located(exc)
    if trace:
        records = [r for r in records if any(t in str(r.get("trace")) for t in trace)]
    if method:
        wanted = {method_key(m) for m in method}
        labels = sorted({str(r.get("method")) for r in records})
        records = [r for r in records if method_key(str(r.get("method"))) in wanted]
        if not records:
            fail(str(results), f"no record has method {', '.join(method)}; the methods in this file: {', '.join(labels)}")
    if not records:
        fail(str(results), "no record matches --trace/--method")
    target = out or default_output(results)
    readable = TraceFiles.of_run(path, traces or ())
    try:
        done = write_browsable(
            records,
            target,
            readable=readable,
            title=f"localfa — {results.name}",
            force=force,
            one_page=one_page,
            warn=lambda note: typer.echo(f"warning: {one_line(note)}", err=True),
        )
    except ViewError as exc:
        fail_located(exc)
    except OSError as exc:
        fail(str(exc.filename or target), f"cannot write the page: {exc.strerror or exc}")
    typer.echo(written_line(done), err=True)


def written_line(done) -> str:
    """``wrote PAGE (N diagnoses of T traces...)``: what a view writer left and where."""
    what = f"{done.diagnoses} diagnos{'is' if done.diagnoses == 1 else 'es'} of {done.traces} trace{'' if done.traces == 1 else 's'}"
    if done.pages is not None:
        what += f"; one page per trace in {done.pages}/"
    return f"wrote {done.page} ({what})"


def method_key(text: str) -> str:
    """A method spec in its canonical form (options sorted by key), so ``--method`` matches however
    its options are ordered; a spec that does not parse is compared as written."""
    from localfa.methods.registry import MethodOptionError, MethodSpec

    try:
        return MethodSpec.parse(text).label
    except MethodOptionError:
        return text.strip()


def default_output(results: Path) -> Path:
    """RUN_DIR/view.html for a run directory, else the results file with .html."""
    return results / "view.html" if results.is_dir() else results.with_suffix(".html")

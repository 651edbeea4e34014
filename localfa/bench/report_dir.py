"""The report for whatever a run directory holds: one sweep, or a parent of runs made at several
oracle p (`scripts/bench_ceiling.py`). `localfa report DIR` takes either; the two writers below it
(`localfa.bench.report`, `localfa.bench.ceiling`) each know one shape.
"""

from __future__ import annotations

from pathlib import Path

from localfa.bench.ceiling import p_runs, write_p_report
from localfa.bench.report import write_report
from localfa.bench.store import results_files


def is_p_parent(run_dir: str | Path) -> bool:
    """A folder of runs made at several oracle p, not a run itself."""
    return Path(run_dir).is_dir() and not results_files(Path(run_dir)) and bool(p_runs(run_dir))


def write_any_report(
    run_dir: str | Path, html_path: str | Path | None = None, *, substring: bool = False, n_boot: int = 1000
) -> tuple[str, Path]:
    """(markdown text, path of the HTML written): the p-runs' report for a parent of p-runs, else the run's own."""
    if is_p_parent(run_dir):
        return write_p_report(run_dir, html_path, n_boot=n_boot)
    return write_report(run_dir, html_path, substring=substring, n_boot=n_boot)

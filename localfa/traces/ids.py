"""Trace ids that name one file and never move, whatever other files are read beside it.

Results are keyed by trace id; both the loader of harness folders (`localfa.traces.runs`) and a
sweep's error records for unreadable files (`localfa.bench.units`) name files this one way.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from pathlib import Path

from localfa.traces.errors import TraceError
from localfa.traces.importers.coding import harbor_trial_folder
from localfa.traces.importers.common import file_stem
from localfa.traces.model import Trace

KEEPS_OWN_ID = {"whowhen"}  # formats whose importer names a trace by its place in a benchmark tree
WHOWHEN_TREE = "whowhen/"  # the importer's id of a file in a recognised subset folder (whowhen/hand-crafted/12)
_SUFFIXES = (".traj",)  # SWE-agent / mini-swe-agent: astropy__astropy-13977.traj.json -> astropy__astropy-13977


def file_trace_id(root: Path, path: Path) -> str:
    """The id of the run in file `path` under dataset `root` (also the id of a file that cannot
    be read, for its error record): the run's path under the root, without its suffixes. The run
    of a Harbor trial (``<trial>/agent/trajectory.json``, or the agent's own log there) is the
    trial folder."""
    run = harbor_trial_folder(path) or path
    if run == path and _strip(file_stem(path)) == path.parent.name:  # <run>/<instance>/<instance>.traj: the instance folder
        run = path.parent
    try:
        run.relative_to(root)
        inside = run != root
    except ValueError:
        inside = run.resolve() != root.resolve() and run.resolve().is_relative_to(root.resolve())
    if not inside:  # the trajectory file was given by itself: the trial's (or the file's) own name
        return unicodedata.normalize("NFC", run.name if run != path else _strip(file_stem(path)))
    return _path_id(run, root, folder=run != path)


def _strip(stem: str) -> str:
    for suffix in _SUFFIXES:
        if stem.lower().endswith(suffix) and len(stem) > len(suffix):
            return stem[: -len(suffix)]
    return stem


def _path_id(path: Path, base: Path, folder: bool = False) -> str:
    """`path` under `base`, '/'-separated, a file without its trace suffixes (a/1.json -> a/1,
    a/x.traj.json -> a/x), a folder as it is named."""
    try:
        rel = path.relative_to(base)
    except ValueError:
        rel = path.resolve().relative_to(base.resolve())
    name = rel.name if folder else _strip(file_stem(rel))
    return unicodedata.normalize("NFC", "/".join([*rel.parts[:-1], name]))  # one spelling of "café" (NFD on macOS)


def distinct_ids(loaded: list[tuple[Path, Path, Trace]], recorded: dict[str, str] | None = None) -> list[Trace]:
    """The traces of (root, file, trace) triples, each with an id that never moves.

    Results are keyed by trace id, so an id must name one run, and the same run the same way on
    every run of localfa, whatever other files are added beside it. One rule for every file in a
    folder: the id is the run's path under its dataset root (the folder given; for a file given by
    itself, its folder), without suffixes: ``ds/run1/astropy__astropy-13977.traj.json`` run as
    ``ds`` is ``run1/astropy__astropy-13977``, so two runs of one instance are two traces; a file
    named after its folder (``<instance>/<instance>.traj``) and a Harbor trial's trajectory are
    named by that folder. What a
    file says of itself (an ``instance_id``) stays in its metadata, never its id. A file holding
    several runs (inspect_ai samples, TELBench cases) gives ``<file id>/<sample>``, the sample named
    by the importer. Only Who&When inside a recognised Who&When tree keeps its importer's id
    (``whowhen/hand-crafted/12``: the benchmark's own names); a Who&When file elsewhere follows the
    path rule. `recorded` (resolved file -> id, a run's manifest ``trace_ids``) keeps the id a run
    already gave a file, so a rule changed since cannot move it. Two runs with one id (given from
    two roots) are a TraceError naming both, never renamed.
    """
    owner: dict[str, Trace] = {}
    out: list[Trace] = []
    runs_in = Counter(f for _, f, _ in loaded)
    kept = recorded or {}
    for root, f, t in loaded:
        if runs_in[f] == 1 and kept.get(str(f.resolve())):
            new = kept[str(f.resolve())]
        elif t.format in KEEPS_OWN_ID and t.id.startswith(WHOWHEN_TREE):
            new = unicodedata.normalize("NFC", t.id)
        else:
            sample = t.metadata.get("log_sample")
            if not isinstance(sample, str) and runs_in[f] > 1:  # one of several runs in a file (TELBench cases)
                sample = t.id.rsplit("/", 1)[-1]
            new = file_trace_id(root, f) + (f"/{sample}" if isinstance(sample, str) else "")
        trace = t if new == t.id else t.model_copy(update={"id": new})
        if new in owner:
            raise TraceError(
                trace.source,
                f"trace id {new!r} is also the id of {owner[new].source}; results are keyed by trace id, so ids must be "
                "distinct: give the folder that holds both files (ids are paths under the folder given)",
            )
        owner[new] = trace
        out.append(trace)
    return out

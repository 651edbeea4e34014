"""Sweeps: traces x methods x budgets x seeds, one durable record each, resumable after a kill.

- Records (`localfa.results.ResultRecord`) are keyed by (trace id, method label, budget label,
  seed) and appended to ``RUN_DIR/results.jsonl`` as soon as each is done (see
  `localfa.bench.store`). Re-running the same command skips finished keys, except records that
  failed on an engine error (timeout, connection refused, HTTP 5xx): those run again, and with
  ``retry_errors`` every error record does. A sweep killed with SIGKILL loses at most the records
  that were in flight (and with the response cache, which `localfa bench` keeps in RUN_DIR/cache
  by default, even their finished model calls are replayed, not recomputed).
- Trace ids are distinct per file (`localfa.traces.load.distinct_ids`); a key already in the run
  for a different trace (another file with the same id) is an error naming both files.
- ``RUN_DIR/manifest.json`` is written at the start. On resume everything that changes answers
  (`localfa.manifest.comparable`: model, backend, prompts, grammars, engine settings such as max
  model length, dtype, structured-outputs backend and vLLM version, chat template, sampling
  defaults) and the options of every method already in the run must match, else the sweep
  refuses (``force=True`` continues anyway and notes it in the manifest). Adding seeds, budgets,
  methods or traces to an existing run is allowed: that only adds records.
- Every trace runs concurrently through `run_jobs`, so the engine sees full batches.
- Each record carries the trace's labels (``label``), so metrics never need the trace files.
- The running accuracy shown while it runs comes from the report's scorer (`score_record`).

Methods are given as ``NAME`` or ``NAME:key=value:key=value`` (e.g.
``all-at-once:with_ground_truth=true``); the canonical spec is the record's `method` label.
Budgets: ``none``, ``25k`` (tokens), ``100000c`` (characters) or ``scale:2`` (SAFARI's fixed
scaling factor: budget = token position of the labelled fault / 2, resolved per trace by the
method from ``ctx.budget``).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from localfa.bench.metrics import score_record
from localfa.bench.store import ResultStore
from localfa.diagnosis import Diagnosis
from localfa.errors import LocatedError
from localfa.methods.base import MethodContext
from localfa.methods.budget import parse_budget
from localfa.methods.registry import MethodOptionError, MethodSpec, get_method, parse_methods  # noqa: F401
from localfa.methods.runner import Job, method_job
from localfa.results import ResultRecord, trace_digest
from localfa.traces.errors import TraceError
from localfa.traces.model import Trace

MANIFEST = "manifest.json"
TIMING_FIELDS = ("wall_s", "finished_at")


class SweepError(LocatedError):
    """Bad sweep input or a run directory that cannot be resumed; str = "path: message"."""


# ---- parsing the command line's lists ----------------------------------------------------------


def parse_seeds(text: str) -> list[int]:
    """``0,1,2`` or ``0-4`` (inclusive) or a mix."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            if "-" in part[1:]:
                a, b = part.split("-", 1) if not part.startswith("-") else (part, "")
                lo, hi = int(a), int(b)
                if hi < lo:
                    raise ValueError
                seeds.extend(range(lo, hi + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise ValueError(f"seeds {text!r}: use whole numbers such as 0,1,2 or 0-4") from None
    if not seeds:
        raise ValueError("no seeds given")
    return list(dict.fromkeys(seeds))


def parse_budgets(text: str | None) -> list[str]:
    """Canonical budget labels (``none``, ``25000``, ``100000c``, ``scale:2``), in order, distinct."""
    if text is None or not text.strip():
        return ["none"]
    out = [parse_budget(p.strip()).label for p in text.split(",") if p.strip()]
    return list(dict.fromkeys(out)) or ["none"]


# ---- traces ------------------------------------------------------------------------------------


def load_traces(
    paths: Sequence[str | Path], limit: int | None = None, skip_bad: bool = False, warn: Callable[[str], None] | None = None
) -> list[Trace]:
    """Traces under `paths` in a stable (natural) order, ids distinct per file; `limit` = first N per subset.

    A "subset" is the trace's own subset (Who&When: algorithm-generated, hand-crafted, whatever
    the folders' case) or else the folder the file sits in, counted separately for each path
    given. Ids are made distinct over every file found before `limit` applies, so a trace keeps
    its id whatever the limit. Bad files raise `TraceError`, or are reported through `warn` and
    skipped with `skip_bad`.
    """
    from localfa.traces.load import distinct_ids, load_trace, trace_files_with_roots

    if limit is not None and limit < 1:
        raise SweepError(None, f"--limit must be at least 1, got {limit}")
    loaded: list[tuple[Path, Path, Trace]] = []
    for root, f in trace_files_with_roots(list(paths)):
        try:
            loaded.append((root, f, load_trace(f)))
        except TraceError as exc:
            if not skip_bad:
                raise
            (warn or _stderr)(f"warning: skipping {exc}")
    counts: dict[tuple[str, str], int] = {}
    out: list[Trace] = []
    for (root, f, _), trace in zip(loaded, distinct_ids(loaded)):
        group = (str(root), trace.subset or str(f.parent))
        if limit is not None and counts.get(group, 0) >= limit:
            continue
        counts[group] = counts.get(group, 0) + 1
        out.append(trace)
    return out


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---- manifest ----------------------------------------------------------------------------------


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=False, default=str)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def manifest_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between two manifests in the parts that fix the results.

    Model, backend, prompt and grammar hashes and the answer settings (max model length, dtype,
    structured-outputs backend, vLLM version, chat template, sampling defaults) must be equal;
    methods are compared only where both runs have them (a new method, seed, budget or trace
    extends a run).
    """
    from localfa.manifest import ANSWER_SETTINGS, comparable

    a, b = comparable(old), comparable(new)
    diffs: list[str] = []
    keys = set(a) | set(b)
    keys -= {k for k in ANSWER_SETTINGS if k not in a or k not in b}  # a manifest from before they were recorded
    for key in sorted(keys):
        if key == "methods":
            ma, mb = a.get(key) or {}, b.get(key) or {}
            for name in sorted(set(ma) & set(mb)):
                if ma[name] != mb[name]:
                    diffs.append(f"method {name}: {json.dumps(ma[name], sort_keys=True)} -> {json.dumps(mb[name], sort_keys=True)}")
            continue
        if a.get(key) != b.get(key):
            if isinstance(a.get(key), dict) and isinstance(b.get(key), dict):
                sub = sorted(k for k in set(a[key]) | set(b[key]) if a[key].get(k) != b[key].get(k))
                diffs.append(f"{key}: {', '.join(sub[:6])}{' ...' if len(sub) > 6 else ''} differ")
            else:
                diffs.append(f"{key}: {a.get(key)!r} -> {b.get(key)!r}")
    return diffs


def _merge_list(a: Any, b: Any) -> list[Any]:
    out = list(a or [])
    for x in b or []:
        if x not in out:
            out.append(x)
    return out


def prepare_manifest(run_dir: Path, new: dict[str, Any], force: bool) -> dict[str, Any]:
    """Write (first run) or check and extend (resume) RUN_DIR/manifest.json; return what is on disk."""
    path = run_dir / MANIFEST
    if not path.exists():
        _write_json_atomic(path, new)
        return new
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SweepError(path, f"cannot read the run's manifest ({exc}); use a new --out") from None
    diffs = manifest_differences(old, new)
    if diffs and not force:
        raise SweepError(
            path,
            "this run directory was made with different settings ("
            + "; ".join(diffs)
            + "); use a new --out, or --force to add to it anyway",
        )
    merged = dict(old)
    merged["methods"] = {**(old.get("methods") or {}), **(new.get("methods") or {})}
    for key in ("seeds", "budgets", "trace_files"):
        merged[key] = _merge_list(old.get(key), new.get(key))
    resumes = list(old.get("resumed") or [])
    entry: dict[str, Any] = {"at": new.get("created"), "command": new.get("command"), "git_revision": new.get("git_revision")}
    if diffs:
        entry["forced_differences"] = diffs
    resumes.append(entry)
    merged["resumed"] = resumes
    _write_json_atomic(path, merged)
    return merged


# ---- the sweep ---------------------------------------------------------------------------------


@dataclass
class SweepResult:
    run_dir: Path
    planned: int = 0
    skipped: int = 0
    written: int = 0
    errors: int = 0
    retried: int = 0
    repaired_bytes: int = 0
    wall_s: float = 0.0
    records: list[ResultRecord] = field(default_factory=list)


@dataclass
class _Unit:
    trace: Trace
    spec: MethodSpec
    budget: str
    seed: int

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.trace.id, self.spec.label, self.budget, self.seed)


def make_record(diag: Diagnosis, unit: _Unit, digest: str | None = None) -> ResultRecord:
    """The results.jsonl line: the Diagnosis, its sweep identity, and the trace's label."""
    return ResultRecord.from_diagnosis(
        diag, unit.trace, method=unit.spec.label, method_name=unit.spec.name, budget=unit.budget, seed=unit.seed, digest=digest
    )


def _collision(unit: _Unit, old: ResultRecord, digest: str) -> str | None:
    """Why `old` (already in the run under `unit`'s key) is not a record of `unit`'s trace, or None."""
    if old.trace_sha256 is None or old.trace_sha256 == digest:
        return None
    same = old.source == unit.trace.source
    what = "was changed since" if same else f"{unit.trace.source} has the same id as {old.source}, whose"
    return f"trace id {unit.trace.id!r}: {what} records were written into this run (different content); use a new --out" + (
        "" if same else ", or give the two files distinct names"
    )


def run_sweep(
    run_dir: str | Path,
    traces: list[Trace],
    methods: list[MethodSpec],
    seeds: list[int],
    engine: Any,
    budgets: list[str] | None = None,
    **options: Any,
) -> SweepResult:
    """Run every (trace, method, budget, seed) without a final record in RUN_DIR/results.jsonl.

    A record that failed on an engine error is not final (it runs again); with `retry_errors`
    no error record is. This process's engine runs the units, on the same driver a Ray sweep or a
    shard uses, so all of them resume and record alike; `options` are that driver's keywords
    (`concurrency`, `force`, `retry_errors`, `progress`, `manifest_extra`, `say`: see
    `localfa.cluster.driver.run_units_sweep`).
    """
    from localfa.cluster.driver import LocalExecutor, run_units_sweep

    return run_units_sweep(run_dir, traces, methods, seeds, LocalExecutor(engine, methods), budgets, **options)


# ---- the pieces of a sweep (one process here; localfa.cluster runs the same ones on Ray) --------


def check_sweep_args(budgets: list[str] | None, concurrency: int) -> list[str]:
    """The budgets' canonical labels (default: none), distinct; bad budgets or concurrency refused."""
    try:
        labels = list(dict.fromkeys(parse_budget(b).label for b in (budgets or ["none"])))
    except ValueError as exc:
        raise SweepError(None, str(exc)) from None
    if concurrency < 1:
        raise SweepError(None, f"concurrency must be at least 1, got {concurrency}")
    return labels


def build_methods(specs: Iterable[MethodSpec]) -> dict[str, Any]:
    """label -> configured method; a bad option is a `SweepError`."""
    built: dict[str, Any] = {}
    for spec in specs:
        try:
            built[spec.label] = get_method(spec)
        except MethodOptionError as exc:
            raise SweepError(None, str(exc)) from None
    return built


def plan_units(traces: list[Trace], specs: list[MethodSpec], budgets: list[str], seeds: list[int]) -> list[_Unit]:
    """Every (trace, method, budget, seed), trace-major, so a trace's units sit together."""
    return [_Unit(t, s, b, seed) for t in traces for s in specs for b in budgets for seed in seeds]


def select_todo(units: list[_Unit], store: ResultStore, *, force: bool, retry_errors: bool) -> tuple[list[_Unit], int]:
    """(units to run, how many of them re-run a failed record); a unit whose id now names
    another trace than its stored record is refused unless `force`."""
    digests = {u.trace.id: trace_digest(u.trace) for u in units}
    todo: list[_Unit] = []
    retried = 0
    for u in units:
        old = store.get(u.key)
        if old is None:
            todo.append(u)
            continue
        clash = _collision(u, old, digests[u.trace.id])
        if clash and not force:
            raise SweepError(store.run_dir, clash)
        if not old.is_final(retry_errors):
            todo.append(u)
            retried += 1
    return todo, retried


def sweep_manifest(
    engine: Any,
    specs: list[MethodSpec],
    built: dict[str, Any],
    seeds: list[int],
    budgets: list[str],
    traces: list[Trace],
    extra: dict[str, Any],
) -> dict[str, Any]:
    """The run's manifest: engine, methods with their resolved options, seeds, budgets, traces."""
    from localfa.manifest import build_manifest

    return build_manifest(
        engine,
        seeds=list(seeds),
        methods={s.label: {"name": s.name, "options": s.options_dict, "resolved": built[s.label].for_model(engine.method_defaults).describe()} for s in specs},
        extra={"budgets": list(budgets), "trace_files": sorted({t.source for t in traces}), **extra},
    )


def unit_job(engine: Any, method: Any, unit: _Unit, key: str) -> Job:
    """The unit's method program, seeded from (run seed, trace id, call key) wherever it runs."""
    ctx = MethodContext(
        trace=unit.trace, seed=unit.seed, budget=None if unit.budget == "none" else unit.budget, options=unit.spec.options_dict
    )
    return method_job(engine, method, ctx, key=key, label=unit.spec.label)


class _Progress:
    """A rich progress bar with ETA and running step accuracy (silent when disabled)."""

    def __init__(self, enabled: bool, total: int, done: int, records: list[ResultRecord]) -> None:
        self.enabled = enabled
        self.total = total
        self.done = done
        self.n = self.errors = 0
        self.hits = 0.0
        for r in records:
            self._count(r)
        self._progress: Any = None
        self._task: Any = None

    def _count(self, r: ResultRecord) -> None:
        step = score_record(r)["step"]
        if step is not None:
            self.n += 1
            self.hits += step
        self.errors += int(bool(r.error))

    def _acc_text(self) -> str:
        text = "step acc —" if not self.n else f"step acc {self.hits / self.n:.3f} (n={self.n})"
        return text + (f", {self.errors} errors" if self.errors else "")

    def __enter__(self) -> "_Progress":
        if not self.enabled:
            return self
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self._progress = Progress(
            TextColumn("[bold]bench[/]"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[acc]}"),
            console=Console(stderr=True),
            transient=False,
        )
        self._progress.__enter__()
        self._task = self._progress.add_task("bench", total=self.total, completed=self.done, acc=self._acc_text())
        return self

    def advance(self, record: ResultRecord) -> None:
        self._count(record)
        if self._progress is not None:
            self._progress.update(self._task, advance=1, acc=self._acc_text())

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)

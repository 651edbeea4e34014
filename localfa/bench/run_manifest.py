"""RUN_DIR/manifest.json: written by the first run, checked and extended by every resume.

On resume everything that changes answers (`localfa.manifest.comparable`: model, backend,
prompts, grammars, engine settings such as max model length, dtype, structured-outputs backend
and vLLM version, chat template, sampling defaults), the options of every method already in the
run and the ids of the trace files already in the run must match, else the sweep refuses
(``force=True`` continues anyway and notes it in the manifest). Adding seeds, budgets, methods or
traces to an existing run is allowed: that only adds records.
"""

from __future__ import annotations

import fcntl
import json
from pathlib import Path
from typing import Any, Sequence

from localfa.bench.units import SweepError
from localfa.durable import replace_durably
from localfa.methods.registry import MethodSpec
from localfa.traces.model import Trace

MANIFEST = "manifest.json"


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """The manifest as indented JSON, replacing the old one whole (`localfa.durable`)."""
    replace_durably(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def manifest_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between two manifests in the parts that fix the results.

    Model, backend, prompt and grammar hashes and the answer settings (max model length, dtype,
    structured-outputs backend, vLLM version, chat template, sampling defaults) must be equal;
    methods are compared only where both runs have them (a new method, seed, budget or trace
    extends a run).
    """
    from localfa.engine.identity import ANSWER_SETTINGS
    from localfa.manifest import comparable

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
        write_json_atomic(path, new)
        return new
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SweepError(path, f"cannot read the run's manifest ({exc}); use a new --out") from None
    moved = id_changes(old, new)
    if moved and not force:
        raise SweepError(
            path,
            "trace ids changed since this run was made ("
            + "; ".join(moved)
            + "): results are keyed by trace id, so resuming would run those traces again as new ones; "
            "give the same dataset folder(s) as before (ids are paths under the folder given)",
        )
    diffs = manifest_differences(old, new) + moved
    if diffs and not force:
        raise SweepError(
            path,
            "this run directory was made with different settings ("
            + "; ".join(diffs)
            + "); use a new --out, or --force to add to it anyway",
        )
    merged = dict(old)
    merged["methods"] = {**(old.get("methods") or {}), **(new.get("methods") or {})}
    merged["trace_ids"] = {**(old.get("trace_ids") or {}), **(new.get("trace_ids") or {})}
    for key in ("seeds", "budgets", "trace_files"):
        merged[key] = _merge_list(old.get(key), new.get(key))
    resumes = list(old.get("resumed") or [])
    entry: dict[str, Any] = {"at": new.get("created"), "command": new.get("command"), "git_revision": new.get("git_revision")}
    if diffs:
        entry["forced_differences"] = diffs
    resumes.append(entry)
    merged["resumed"] = resumes
    write_json_atomic(path, merged)
    return merged


def id_changes(old: dict[str, Any], new: dict[str, Any], shown: int = 3) -> list[str]:
    """Trace files of both manifests whose id differs (`trace_ids`: resolved path -> id), named."""
    a, b = old.get("trace_ids") or {}, new.get("trace_ids") or {}
    moved = [f"{path} was {a[path]!r}, now {b[path]!r}" for path in sorted(set(a) & set(b)) if a[path] != b[path]]
    if len(moved) > shown:
        moved = moved[:shown] + [f"{len(moved) - shown} more"]
    return moved


def recorded_trace_ids(run_dir: Path | None) -> dict[str, str]:
    """The ids a run already gave its trace files (resolved path -> id, its manifest's
    ``trace_ids``), so a resume names them as before; {} where there is no readable manifest."""
    if run_dir is None:
        return {}
    try:
        data = json.loads((run_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return {}
    ids = data.get("trace_ids") if isinstance(data, dict) else None
    return {k: v for k, v in ids.items() if isinstance(k, str) and isinstance(v, str) and v} if isinstance(ids, dict) else {}


def trace_ids(traces: list[Trace]) -> dict[str, str]:
    """Resolved trace file -> trace id, what a resume compares (`id_changes`)."""
    return {str(Path(t.source).resolve()): t.id for t in traces if t.source}


def sweep_manifest(
    engine: Any,
    specs: list[MethodSpec],
    built: dict[str, Any],
    seeds: list[int],
    budgets: list[str],
    traces: list[Trace],
    extra: dict[str, Any],
    unreadable: Sequence[str] = (),
) -> dict[str, Any]:
    """The run's manifest: engine, methods with their resolved options, seeds, budgets, traces and
    their ids. `unreadable` files are among its trace files, but have no id yet (theirs is known
    once they read: a repaired file is not an id change)."""
    from localfa.manifest import build_manifest

    files = sorted({t.source for t in traces} | set(unreadable))
    return build_manifest(
        engine,
        seeds=list(seeds),
        methods={s.label: {"name": s.name, "options": s.options_dict, "resolved": built[s.label].describe()} for s in specs},
        extra={"budgets": list(budgets), "trace_files": files, "trace_ids": trace_ids(traces), **extra},
    )


class ManifestLock:
    """Shards of one run start together (a Slurm array): one at a time reads and extends the manifest."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / ".manifest.lock"
        self._fh: Any = None

    def __enter__(self) -> "ManifestLock":
        self._fh = open(self.path, "a+")
        fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._fh.close()

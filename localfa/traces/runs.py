"""Runs of a harness, as they come: a Harbor job directory or a SWE-bench run, with the harness's
own verdict on each trial, so that `--failed-only` diagnoses only the trials it marked failed.

- Harbor (Terminal-Bench): ``<job>/<trial>/agent/trajectory.json`` (ATIF), or where the agent
  wrote none its own log (`localfa.traces.importers.coding.HARBOR_AGENT_LOGS`: Claude Code's
  ``claude-code.txt``, a session or rollout under ``agent/sessions``), beside
  ``<job>/<trial>/result.json``, whose ``verifier_result.rewards`` (``{"reward": 0.0}``) is the
  verdict; without one, ``<trial>/verifier/reward.txt`` or ``reward.json``. A trial fails with
  reward 0; a trial the verifier never scored (``exception_info``) has no verdict.
- SWE-bench: agent trajectories (``*.traj.json`` from mini-swe-agent, ``*.traj`` from SWE-agent)
  and the evaluation's reports anywhere under the run folder: per instance ``report.json``
  (``{instance_id: {"resolved": false, ...}}``, in a folder named after the instance),
  ``<instance_id>.report.json`` (``{"resolved": ...}``), or a run summary listing
  ``resolved_ids`` / ``unresolved_ids`` / ``error_ids`` / ``empty_patch_ids``, or the older
  ``results/results.json`` summary (``{"resolved": [...], "applied": [...], "generated": [...],
  ...}``: an instance in any list but ``resolved`` failed). A trial fails when ``resolved`` is
  false.
- inspect_ai: each sample's scores, read by the importer (`localfa.traces.importers.inspect_ai`).

Inside such a folder only the trajectories are traces (configs, logs, predictions and reports are
not). The verdict goes into each trace's ``metadata["harness"]``, the verifier's evidence (the
tests' output, the report's failed tests) into ``Trace.outcome`` and the trace's last step
(`with_harness`, `localfa.traces.outcome`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from localfa.traces import outcome
from localfa.traces.errors import TraceError
from localfa.traces.ids import distinct_ids
from localfa.traces.importers.coding import HARBOR_AGENT_LOGS, harbor_log_pattern, harbor_trial_folder
from localfa.traces.model import Step, Trace

TRAJECTORY = ("agent", "trajectory.json")
HARBOR_JOB_FILES = frozenset({"config.json", "result.json"})  # a job's own files beside its trials: not traces
SWE_SUFFIXES = (".traj.json", ".traj")
MAX_REPORT_BYTES = 16 * 1024 * 1024
_FAILED_LISTS = {"unresolved_ids": "unresolved", "error_ids": "evaluation error", "empty_patch_ids": "empty patch"}


@dataclass(frozen=True)
class Verdict:
    """What the harness said of one trial: failed, passed, or nothing (`failed` None)."""

    harness: str  # "harbor" | "swe-bench"
    failed: bool | None
    why: str  # "reward 0.0", "resolved: false", "no verifier reward", ...
    reward: float | None = None
    evidence: str | None = None  # what the evaluation reported beyond the verdict (SWE-bench: failed tests, test output)

    def as_metadata(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None and k != "evidence"}


def _read_json(path: Path) -> Any:
    try:
        if path.stat().st_size > MAX_REPORT_BYTES:
            return None
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None


# ---- Harbor ----------------------------------------------------------------------------------------


def trial_trajectory(trial: Path) -> Path:
    return trial.joinpath(*TRAJECTORY)


def trial_trace_file(trial: Path) -> Path | None:
    """The file a trial is read from: ``agent/trajectory.json``, else the agent's own log (the
    first of `HARBOR_AGENT_LOGS` there), else None."""
    if trial_trajectory(trial).is_file():
        return trial_trajectory(trial)
    agent = trial / TRAJECTORY[0]
    if not agent.is_dir():
        return None
    for pattern in HARBOR_AGENT_LOGS:
        head = pattern.split("/", 1)[0]
        found = [agent / pattern] if "*" not in pattern else sorted((agent / head).rglob("*") if "/" in pattern else agent.glob(pattern))
        logs = [f for f in found if f.is_file() and harbor_log_pattern(f.relative_to(agent).as_posix())]
        if logs:
            return logs[0]
    return None


def is_harbor_trial(d: Path) -> bool:
    """A Harbor trial folder: it holds agent/trajectory.json, or a result.json naming the trial."""
    if trial_trajectory(d).is_file():
        return True
    result = _read_json(d / "result.json") if (d / "result.json").is_file() else None
    return isinstance(result, dict) and "trial_name" in result and "task_name" in result


def harbor_trials(d: Path, depth: int = 3) -> list[Path] | None:
    """The Harbor trial folders at or below `d` (a trial, a job, a folder of jobs), else None.

    Beside a trial, a folder holding a ``result.json`` (whatever it holds) or an ``agent/``
    folder is a trial of the same job too: one whose agent wrote no trajectory."""
    if is_harbor_trial(d):
        return [d]
    if depth == 0:
        return None
    found: list[Path] = []
    children = sorted(c for c in d.iterdir() if c.is_dir() and not c.name.startswith("."))
    for c in children:
        found += harbor_trials(c, depth - 1) or []
    if any(t.parent == d for t in found):
        found += [c for c in children if c not in found and ((c / "result.json").is_file() or (c / TRAJECTORY[0]).is_dir())]
        found.sort()
    return found or None


def _reward(rewards: Any) -> float | None:
    if isinstance(rewards, bool):
        return None
    if isinstance(rewards, (int, float)):
        return float(rewards)
    if isinstance(rewards, dict):
        if "reward" in rewards:
            return _reward(rewards["reward"])
        values = [r for r in (_reward(v) for v in rewards.values()) if r is not None]
        return min(values) if values else None
    return None


def _reward_file(trial: Path) -> float | None:
    txt = trial / "verifier" / "reward.txt"
    if txt.is_file():
        try:
            return float(txt.read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
            return None
    js = trial / "verifier" / "reward.json"
    return _reward(_read_json(js)) if js.is_file() else None


def harbor_verdict(trial: Path) -> Verdict:
    """The trial's verifier reward: failed at 0 (or below), passed above."""
    result = _read_json(trial / "result.json")
    result = result if isinstance(result, dict) else {}
    vr = result.get("verifier_result")
    reward = _reward(vr.get("rewards", vr.get("reward"))) if isinstance(vr, dict) else None
    where = "result.json"
    if reward is None:
        reward, where = _reward_file(trial), "verifier/reward file"
    if reward is None:
        exc = result.get("exception_info")
        kind = exc.get("exception_type") if isinstance(exc, dict) else None
        return Verdict("harbor", None, f"no verifier reward{f' (exception {kind})' if kind else ''}")
    return Verdict("harbor", reward <= 0, f"reward {reward:g} in {where}", reward)


# ---- SWE-bench -------------------------------------------------------------------------------------


def is_swe_trajectory(path: Path) -> bool:
    name = path.name.lower()
    return path.is_file() and not name.startswith(".") and name.endswith(SWE_SUFFIXES)


def instance_of(path: Path) -> str:
    """The SWE-bench instance a trajectory file is for: its name without ``.traj(.json)``."""
    name = path.name
    for suffix in SWE_SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def visible_files(d: Path, keep: Callable[[Path], bool]) -> list[Path]:
    """Files under `d` that `keep` accepts, none inside a hidden (dot) folder or hidden itself."""
    return [f for f in d.rglob("*") if keep(f) and not any(part.startswith(".") for part in f.relative_to(d).parts)]


def swe_trajectories(d: Path) -> list[Path] | None:
    """The agent trajectories of a SWE-bench run folder (trajectories with an evaluation report or
    a ``preds.json``), else None: a folder of traces that only includes some trajectories is read
    as any other folder."""
    found = sorted(visible_files(d, is_swe_trajectory))
    if not found or not (swe_reports(d.resolve()) or any(d.rglob("preds.json"))):
        return None
    return found


def _report_entries(path: Path, data: Any) -> dict[str, Verdict]:
    """instance id -> verdict, for every shape of SWE-bench evaluation report."""
    out: dict[str, Verdict] = {}
    if not isinstance(data, dict):
        return out
    if isinstance(data.get("resolved"), bool):  # <iid>.report.json, or a report.json in the iid folder
        iid = path.name[: -len(".report.json")] if path.name.endswith(".report.json") else path.parent.name
        out[iid] = _resolved(data["resolved"], path, data)
        return out
    if isinstance(data.get("resolved"), list):  # results/results.json: {"resolved": [...], "applied": [...], ...}
        for iid in data["resolved"]:
            out[str(iid)] = Verdict("swe-bench", False, f"resolved in {path.name}")
        for key, ids in data.items():
            if key != "resolved" and isinstance(ids, list):
                for iid in ids:
                    out.setdefault(str(iid), Verdict("swe-bench", True, f"not resolved in {path.name} (listed as {key})"))
        return out
    if any(isinstance(data.get(k), list) for k in ("resolved_ids", *_FAILED_LISTS)):  # a run summary
        for iid in data.get("resolved_ids") or []:
            out[str(iid)] = Verdict("swe-bench", False, f"resolved in {path.name}")
        for key, what in _FAILED_LISTS.items():
            for iid in data.get(key) or []:
                out.setdefault(str(iid), Verdict("swe-bench", True, f"{what} in {path.name}"))
        return out
    for iid, entry in data.items():  # {instance_id: {"resolved": ...}}
        if isinstance(entry, dict) and isinstance(entry.get("resolved"), bool):
            out[str(iid)] = _resolved(entry["resolved"], path, entry)
    return out


def _resolved(resolved: bool, path: Path, entry: dict[str, Any]) -> Verdict:
    """A per-instance report's verdict, with its evidence (failed tests, the test output beside it)."""
    why = f"resolved: {'true' if resolved else 'false'} in {path.name}"
    return Verdict("swe-bench", not resolved, why, evidence=outcome.swe_outcome(path, entry, why))


@lru_cache(maxsize=64)
def swe_reports(folder: Path) -> dict[str, Verdict]:
    """Every instance's verdict in the evaluation reports under `folder` (a failed verdict wins)."""
    out: dict[str, Verdict] = {}
    for path in sorted(folder.rglob("*.json")):
        if is_swe_trajectory(path) or path.name == "trajectory.json":
            continue
        for iid, verdict in _report_entries(path, _read_json(path)).items():
            if iid not in out or (verdict.failed and not out[iid].failed):
                out[iid] = verdict
            elif verdict.failed == out[iid].failed and verdict.evidence and not out[iid].evidence:
                out[iid] = replace(out[iid], evidence=verdict.evidence)  # a summary's verdict, the per-instance report's evidence
    return out


# ---- one entry point ---------------------------------------------------------------------------------


def harness_trace_files(d: Path, is_trace_file: Callable[[Path], bool]) -> list[Path] | None:
    """The trace files of a folder holding harness runs, else None (no run in it).

    Of a Harbor job only the trials' trajectories count (not the trials' or the job's configs,
    results, logs); trace files elsewhere in the folder, beside the trials too, count as usual
    (`is_trace_file`). Of a SWE-bench run folder only the agents' trajectories count.
    """
    trials = harbor_trials(d)
    if trials is None:
        return swe_trajectories(d)
    jobs = {t.parent for t in trials if t != d}
    rest = [
        f
        for f in visible_files(d, is_trace_file)
        if not any(f.is_relative_to(t) for t in trials) and not (f.parent in jobs and f.name in HARBOR_JOB_FILES)
    ]
    return [f for f in map(trial_trace_file, trials) if f is not None] + rest


def trials_without_log(d: Path) -> list[Path]:
    """Harbor trials under `d` whose agent wrote neither a trajectory nor a log localfa reads
    (nothing to diagnose)."""
    return [t for t in harbor_trials(d) or [] if trial_trace_file(t) is None]


def harbor_trial_of(path: Path) -> Path | None:
    """The Harbor trial (a folder with ``result.json`` or ``verifier/``) whose agent wrote `path`."""
    trial = harbor_trial_folder(path)
    if trial is not None and ((trial / "result.json").is_file() or (trial / "verifier").is_dir()):
        return trial
    return None


def verdict_of(root: Path, path: Path) -> Verdict | None:
    """The harness's verdict on the trial `path` belongs to (found under `root`), or None."""
    trial = harbor_trial_of(path)
    if trial is not None:
        return harbor_verdict(trial)
    if harbor_trial_folder(path) is not None:
        return None
    if is_swe_trajectory(path):
        iid = instance_of(path)
        reports = {**swe_reports(path.parent.resolve()), **swe_reports(root.resolve())}
        if not reports:
            return None  # a trajectory outside any evaluated run
        return reports.get(iid) or Verdict("swe-bench", None, "no evaluation report for this instance")
    return None


def with_harness(trace: Trace, root: Path, path: Path, read: outcome.ReadLog | None = None) -> Trace:
    """`trace` as its harness saw it: the verdict in ``metadata["harness"]``, the verifier's
    evidence (`localfa.traces.outcome`) in ``Trace.outcome`` and as a last step (an observation
    of the ``verifier``: every method reads it, none answers it), and, for a Harbor agent log
    that holds no task, the task from the trial's files (a sibling log read with `read`: a
    trace file reader such as `localfa.traces.load.load_traces`). Unchanged outside a harness run, or where the format carries its
    own verdict (inspect_ai scores)."""
    verdict = verdict_of(root, path)
    if verdict is None or isinstance(trace.metadata.get("harness"), dict):
        return trace
    metadata = {**trace.metadata, "harness": verdict.as_metadata()}
    update: dict[str, Any] = {"metadata": metadata}
    trial = harbor_trial_of(path)
    told = verdict.evidence
    if trial is not None:
        told = outcome.harbor_outcome(trial, verdict.why)
        if not trace.task.strip():
            found = outcome.harbor_task(trial, path, read)
            if found is not None:
                update["task"], metadata["task_source"] = found
    if told:
        step = Step(index=len(trace.steps), agent=outcome.VERIFIER, role="tool", content=told, name=outcome.VERIFIER, kind="observation")
        update.update(outcome=told, steps=[*trace.steps, step])
    return trace.model_copy(update=update)


def harness_traces(
    found: Iterable[tuple[Path, Path]],
    load: Callable[[Path], Trace | list[Trace]],
    on_error: Callable[[Path, Path, TraceError], None],
    roots: Sequence[Path],
    failed_only: bool,
    say: Callable[[str], None],
    recorded: dict[str, str] | None = None,
) -> list[tuple[Path, Path, Trace]]:
    """(root, file, trace) for the (root, file) pairs `found`, in their order: the one way `diagnose`
    and `bench` read the files they are given.

    Each file is read by `load` and gets its harness's verdict and evidence (`with_harness`); ids are made
    distinct over every file read (`localfa.traces.ids.distinct_ids`: a TraceError names two
    files with one id; a file keeps the id `recorded` gives it, a resumed run's); with `failed_only` only the trials the harness marked failed are kept
    (`keep_failed`, which says through `say` what it skipped). A file `load` cannot read goes to
    `on_error(root, file, exc)`, the caller's choice: raise it, warn and skip it, or keep it for an
    error record.
    """
    loaded: list[tuple[Path, Path, Trace]] = []

    def read_sibling(path: Path) -> list[Trace]:
        got = load(path)
        return got if isinstance(got, list) else [got]

    for root, f in found:
        try:
            got = load(f)
        except TraceError as exc:
            on_error(root, f, exc)
            continue
        for trace in got if isinstance(got, list) else [got]:  # a file may hold several runs (inspect_ai samples)
            loaded.append((root, f, with_harness(trace, root, f, read_sibling)))
    traces = distinct_ids(loaded, recorded)
    if not failed_only or not traces:
        return [(root, f, t) for (root, f, _), t in zip(loaded, traces)]
    kept = {id(t) for t in keep_failed(traces, list(roots), say)}
    return [(root, f, t) for (root, f, _), t in zip(loaded, traces) if id(t) in kept]


def kept_as_failed(judged: bool, failed: object) -> bool:
    """`--failed-only`'s rule: a trial its harness marked failed, or a run no harness judged."""
    return not judged or failed is True


def keep_failed(traces: list[Trace], roots: list[Path], say: Callable[[str], None]) -> list[Trace]:
    """The traces the harness marked failed; says how many were skipped, and why.

    A trace from outside any harness run (a Who&When file, a chat log) has no verdict and is kept:
    localfa takes the runs it is given as failed ones.
    """
    kept: list[Trace] = []
    passed: list[str] = []
    unknown: dict[str, int] = {}
    for t in traces:
        h = t.metadata.get("harness")
        verdict: dict[str, Any] = h if isinstance(h, dict) else {}
        if kept_as_failed(isinstance(h, dict), verdict.get("failed")):
            kept.append(t)
        elif verdict.get("failed") is False:
            passed.append(str(verdict.get("why", "")))
        else:
            unknown[str(verdict.get("why"))] = unknown.get(str(verdict.get("why")), 0) + 1
    missing = sum(len(trials_without_log(r)) for r in roots if r.is_dir())
    judged = sum(1 for t in traces if isinstance(t.metadata.get("harness"), dict))
    without = (
        f"; {missing} trial{'s' if missing != 1 else ''} without an agent log (agent/trajectory.json, agent/claude-code.txt, agent/sessions/)"
        if missing
        else ""
    )
    if judged == 0 and traces:
        say(
            f"--failed-only: no harness verdict (Harbor result.json, SWE-bench report or results.json, inspect_ai scores) "
            f"was found; all {len(traces)} traces are kept{without}"
        )
        return kept
    parts = [f"{len(passed)} skipped as passed ({_passed_why(passed)})"] if passed else ["0 skipped as passed"]
    parts += [f"{n} skipped with no verdict ({why})" for why, n in sorted(unknown.items())]
    say(f"--failed-only: {len(kept)} of {len(traces)} trials kept as failed by the harness; " + "; ".join(parts) + without)
    return kept


def _passed_why(whys: list[str]) -> str:
    if any(w.startswith("reward") for w in whys):
        return "reward > 0"
    if any(w.startswith("score") for w in whys):
        return "full score"
    return "resolved: true"

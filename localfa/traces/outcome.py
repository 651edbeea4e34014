"""What a harness says of a run besides its verdict: the task it set, and what its verifier saw.

A person reading a failed trial looks first at the verifier's output (which tests failed, and
how) and the reward; the methods should read it too. `harbor_outcome` and `swe_outcome` give that
evidence as one text (the tests' output cut to its last `OUTCOME_TAIL_CHARS` characters, where
the failures are summarised), which `localfa.traces.runs.with_harness` puts on the trace as
``Trace.outcome`` and as its last step, an observation of the verifier.

A Harbor trial whose agent wrote no ATIF trajectory is read from the agent's own log, and a
Claude Code stream-json log has no task line: `harbor_task` finds the instruction in the trial's
own files (see its docstring). Every file here is read with a size cap and never followed
outside the trial, except the task folder its ``config.json`` names (only its ``instruction.md``).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Callable

from localfa.traces.model import Trace

OUTCOME_TAIL_CHARS = 3000
MAX_READ_BYTES = 4 * 1024 * 1024
VERIFIER = "verifier"  # the agent name of the outcome step
_PROMPT_FLAGS = ("-p", "--print", "--prompt", "--")


def read_capped(path: Path, limit: int = MAX_READ_BYTES) -> str | None:
    """The text of `path` (its last `limit` bytes when larger), or None when it cannot be read."""
    try:
        if not path.is_file():
            return None
        with path.open("rb") as fh:
            size = path.stat().st_size
            if size > limit:
                fh.seek(size - limit)
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return None


def _json(path: Path) -> Any:
    text = read_capped(path)
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def tail(text: str, limit: int = OUTCOME_TAIL_CHARS) -> str:
    """`text` cut to its last `limit` characters, from a line start, saying how much was cut."""
    text = text.strip("\n")
    if len(text) <= limit:
        return text
    cut = text[-limit:]
    start = cut.find("\n")
    kept = cut[start + 1 :] if 0 <= start < limit // 2 else cut
    return f"[... first {len(text) - len(kept):,} of {len(text):,} characters cut ...]\n{kept}"


# ---- Harbor ----------------------------------------------------------------------------------------


def _exception(result: Any) -> str | None:
    exc = result.get("exception_info") if isinstance(result, dict) else None
    if not isinstance(exc, dict):
        return None
    kind, message = exc.get("exception_type"), exc.get("exception_message")
    if not kind and not message:
        return None
    return f"The trial stopped with {kind or 'an exception'}: {str(message or '').strip()}".rstrip(": ")


def harbor_outcome(trial: Path, why: str) -> str:
    """The verifier's account of a Harbor trial: the verdict (`why`, e.g. ``reward 0 in
    result.json``), the exception that stopped the trial, and the tail of the tests' output
    (``verifier/test-stdout.txt``, else ``test-stderr.txt``)."""
    lines = [f"Harbor verifier: {why}."]
    exc = _exception(_json(trial / "result.json"))
    if exc:
        lines.append(exc)
    for name in ("test-stdout.txt", "test-stderr.txt"):
        text = read_capped(trial / "verifier" / name)
        if text and text.strip():
            lines.append(f"verifier/{name}:\n{tail(text)}")
            break
    return "\n".join(lines)


def instruction_from_command(command: str) -> str | None:
    """The prompt in an agent's command line (``claude ... -p 'TASK'``, ``codex exec -- 'TASK'``),
    or None: the argument after ``-p``/``--print``/``--prompt``/``--`` that is no option. Harbor
    writes each command it ran to ``agent/command-N/command.txt``; newer versions pass the
    prompt through an environment variable, and then the command holds none."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for i, word in enumerate(words[:-1]):
        nxt = words[i + 1]
        if word in _PROMPT_FLAGS and nxt.strip() and not nxt.startswith("-") and " " in nxt.strip():
            return nxt.strip()
    return None


def _session_task(agent_dir: Path, own: Path, read: ReadLog | None) -> str | None:
    """The task of another log of the same agent run (a Claude Code session or Codex rollout
    under ``agent/sessions``): its first user message."""
    from localfa.traces.importers.coding import harbor_log_pattern

    sessions = agent_dir / "sessions"
    if read is None or not sessions.is_dir():
        return None
    for f in sorted(sessions.rglob("*.jsonl")):
        if f == own or not harbor_log_pattern(f.relative_to(agent_dir).as_posix()):
            continue
        try:
            runs = read(f)
        except Exception:  # noqa: BLE001 - a sibling log that cannot be read gives no task, nothing more
            continue
        task = next((t.task for t in runs if t.task.strip()), None)
        if task:
            return task
    return None


def _command_task(agent_dir: Path) -> str | None:
    for f in sorted(agent_dir.glob("command-*/command.txt")):
        text = read_capped(f, 1024 * 1024)
        task = instruction_from_command(text) if text else None
        if task:
            return task
    return None


def _task_folder_instruction(trial: Path) -> str | None:
    """``instruction.md`` of the task folder the trial's ``config.json`` (``task.path``) or
    ``result.json`` (``task_id.path``) names, relative to the job folder or absolute."""
    for name, keys in (("config.json", ("task", "path")), ("result.json", ("task_id", "path"))):
        data = _json(trial / name)
        where = data.get(keys[0]) if isinstance(data, dict) else None
        folder = where.get(keys[1]) if isinstance(where, dict) else None
        if not isinstance(folder, str) or not folder.strip():
            continue
        bases = (
            [Path(folder)] if Path(folder).is_absolute() else [base / folder for base in (trial.parent, trial.parent.parent, Path.cwd())]
        )
        for base in bases:
            text = read_capped(base / "instruction.md", 1024 * 1024)
            if text and text.strip():
                return text.strip()
    return None


ReadLog = Callable[[Path], list[Trace]]  # reads a trace file (the loader's `load_traces`, passed in: it imports this module)


def harbor_task(trial: Path, own: Path, read: ReadLog | None = None) -> tuple[str, str] | None:
    """(task, where it came from) for a trial's agent log that holds none (`own`), or None.

    In order: another log of the same run under ``agent/sessions`` (its first user message), the
    prompt in a command Harbor ran (``agent/command-N/command.txt``), the task folder's
    ``instruction.md`` (``config.json`` ``task.path``). Without any of them the task's name
    (``result.json`` ``task_name``) stands in, and says that it is only a name. Sibling logs are
    read with `read` (none read without it)."""
    agent_dir = trial / "agent"
    for where, find in (
        ("agent/sessions", lambda: _session_task(agent_dir, own, read)),
        ("agent/command-N/command.txt", lambda: _command_task(agent_dir)),
        ("the task's instruction.md", lambda: _task_folder_instruction(trial)),
    ):
        task = find()
        if task:
            return task, where
    result = _json(trial / "result.json")
    name = result.get("task_name") if isinstance(result, dict) else None
    if isinstance(name, str) and name.strip():
        return f"Harbor task {name.strip()} (its instruction is not in the trial folder; only its name is known)", "result.json task_name"
    return None


# ---- SWE-bench -------------------------------------------------------------------------------------


def _failed_tests(status: Any) -> list[str]:
    """``tests_status`` of a SWE-bench report: one line per group with failed tests."""
    out: list[str] = []
    if not isinstance(status, dict):
        return out
    for group, result in status.items():
        failed = result.get("failure") if isinstance(result, dict) else None
        if isinstance(failed, list) and failed:
            shown = ", ".join(str(t) for t in failed[:20]) + (f" and {len(failed) - 20} more" if len(failed) > 20 else "")
            out.append(f"{group} failed ({len(failed)}): {shown}")
    return out


def swe_outcome(report: Path, entry: dict[str, Any], why: str) -> str:
    """The evaluation's account of one SWE-bench instance: the verdict, the tests that failed
    (the report's ``tests_status``), and the tail of ``test_output.txt`` beside the report."""
    lines = [f"SWE-bench evaluation: {why}."]
    for key in ("patch_is_None", "patch_exists", "patch_successfully_applied"):
        if key in entry:
            lines.append(f"{key}: {str(entry[key]).lower()}")
    lines += _failed_tests(entry.get("tests_status"))
    text = read_capped(report.parent / "test_output.txt")
    if text and text.strip():
        lines.append(f"test_output.txt:\n{tail(text)}")
    return "\n".join(lines)

"""The run manifest: everything needed to say what produced a set of results, and to redo it."""

from __future__ import annotations

import hashlib
import platform
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

from localfa.engine.identity import ANSWER_SETTINGS, answer_settings, package_version
from localfa.redact import mask_argv
from localfa.templates import template_hashes
from localfa.version import __version__


def git_revision() -> str | None:
    """The git revision of the localfa source tree, when it is a checkout."""
    src = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        if out.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def grammar_hashes() -> dict[str, str]:
    """Content hash of every grammar source (the per-trace grammars are built from these)."""
    root = resources.files("localfa.grammars")
    return {
        c.name: hashlib.sha256(c.read_bytes()).hexdigest()[:16]
        for c in sorted(root.iterdir(), key=lambda c: c.name)
        if c.name.endswith((".py", ".lark")) and c.name != "__init__.py"
    }


def backend_packages() -> list[str]:
    """The distributions every registered backend depends on (each backend lists its own)."""
    from localfa.engine.factory import ENGINES, engine_class

    names: dict[str, None] = {}
    for backend in ENGINES:
        names.update(dict.fromkeys(engine_class(backend).packages))
    return list(names)


def build_manifest(
    engine: Any, *, seeds: list[int], methods: dict[str, dict[str, Any]], extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Manifest for a run on `engine` with these methods (name -> options incl. sampling)."""
    described = engine.describe()
    model_info = engine.model_info
    return {
        "localfa_version": __version__,
        "git_revision": git_revision(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": mask_argv(sys.argv),
        "python": platform.python_version(),
        "packages": {d: package_version(d) for d in backend_packages()},
        "model": model_info,
        "engine": described,
        "answer_settings": answer_settings(described, model_info),
        "prompts": template_hashes(),
        "grammars": grammar_hashes(),
        "methods": methods,
        "seeds": seeds,
        "seed_derivation": "sha256(run_seed, trace_id, call_key) -> 31-bit request seed",
        **(extra or {}),
    }


def comparable(manifest: dict[str, Any]) -> dict[str, Any]:
    """The parts of a manifest that must match for a resumed run to continue the same run.

    Each answer setting is its own entry, so a refusal names it (``dtype: 'bfloat16' ->
    'float16'``). A manifest written before answer settings were recorded has none to compare.
    """
    out = {k: manifest.get(k) for k in ("model", "prompts", "grammars", "methods")} | {
        "backend": (manifest.get("engine") or {}).get("backend")
    }
    settings = manifest.get("answer_settings")
    if isinstance(settings, dict):
        out |= {k: settings[k] for k in ANSWER_SETTINGS if k in settings}  # a setting added later: not compared with older runs
    return out

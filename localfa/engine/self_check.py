"""The engine checks itself at start, loudly: localfa relies on engine behaviour that can vanish
silently in another vLLM version or setup (synchronous grammar compilation through a private
attribute, the in-process engine, cached-token reporting).

Each backend runs its checks and hands the results here: they are recorded in the manifest
(`describe()["self_checks"]`) and a failed one stops the run with a message naming it, unless
`LOCALFA_ALLOW_UNCHECKED=1` turns failures into warnings.
"""

from __future__ import annotations

import os
from typing import Callable

ALLOW_ENV = "LOCALFA_ALLOW_UNCHECKED"
# vLLM versions this code was run against (release prefixes); others get a warning at start.
TESTED_VLLM = ("0.32.",)


def settle(checks: dict[str, tuple[bool, str]], say: Callable[[str], None]) -> dict[str, bool]:
    """`checks`: name -> (passed, what it means when it fails). Raise on a failure unless allowed."""
    from localfa.engine.errors import EngineError

    failed = {name: why for name, (ok, why) in checks.items() if not ok}
    if failed:
        text = "; ".join(f"{name}: {why}" for name, why in failed.items())
        if os.environ.get(ALLOW_ENV) == "1":
            say(f"localfa: warning: engine self-check failed ({text}); continuing because {ALLOW_ENV}=1")
        else:
            raise EngineError(
                f"engine self-check failed: {text}. Set {ALLOW_ENV}=1 to run anyway "
                "(results may then differ between runs or report no cached tokens)"
            )
    return {name: ok for name, (ok, _) in checks.items()}


def vllm_version_note(version: str) -> str | None:
    """A warning when the installed vLLM is not one this code was tested with."""
    if any(version.startswith(p) for p in TESTED_VLLM):
        return None
    return (
        f"localfa: warning: vLLM {version} has not been tested with localfa (tested: "
        f"{', '.join(p + 'x' for p in TESTED_VLLM)}); the engine self-checks below still run"
    )

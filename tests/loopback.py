"""Run a command as on an air-gapped host: in a network namespace with only loopback up, no default
route (`unshare -n`). Where this host does not allow such a namespace the command runs as it is."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from functools import lru_cache

_BRING_UP_LOOPBACK = "ip link set lo up"


@lru_cache(maxsize=1)
def namespaces_allowed() -> bool:
    """Whether `unshare -n` with loopback brought up works here (a container may forbid it)."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = subprocess.run(["unshare", "-n", "sh", "-c", _BRING_UP_LOOPBACK], capture_output=True, timeout=30)
    return probe.returncode == 0


def loopback_only(cmd: list[str]) -> list[str]:
    """`cmd` wrapped to run with only loopback, where namespaces are allowed; else `cmd` itself."""
    if not namespaces_allowed():
        return cmd
    return ["unshare", "-n", "sh", "-c", f"{_BRING_UP_LOOPBACK} && exec {shlex.join(cmd)}"]

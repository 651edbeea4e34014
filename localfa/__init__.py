"""localfa: find who broke a failed LLM-agent run, and when, on your own hardware.

The Python API (see `localfa.api`): `load_trace`, `diagnose`, `bench`, `make_engine`, `Trace`,
`Diagnosis`; loaded on first use so that `import localfa` stays light.
"""

from typing import Any

from localfa import offline as _offline
from localfa.version import __version__ as __version__

_offline.enforce()

__all__ = ["Diagnosis", "Trace", "bench", "diagnose", "load_trace", "make_engine"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from localfa import api

        return getattr(api, name)
    raise AttributeError(f"module 'localfa' has no attribute {name!r}")

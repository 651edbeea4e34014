"""localfa: find who broke a failed LLM-agent run, and when, on your own hardware."""

from localfa import offline as _offline

_offline.enforce()

__version__ = "0.1.0"

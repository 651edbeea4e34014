"""Traces: every method reads failed runs through this package.

`load_trace` turns a log file (Who&When, message lists, OpenInference, OTel GenAI, ATIF,
mini-swe-agent and SWE-agent trajectories) into a
`Trace`; `LineView` serialises it into numbered lines with read/search tools.
"""

from localfa.traces.errors import TraceError
from localfa.traces.lineview import LineView, SearchResult
from localfa.traces.load import DEFAULT_MAX_BYTES, FORMATS, iter_trace_files, load_trace
from localfa.traces.model import AgentInfo, Labels, Step, Trace, normalize_agent

__all__ = [
    "AgentInfo",
    "DEFAULT_MAX_BYTES",
    "FORMATS",
    "Labels",
    "LineView",
    "SearchResult",
    "Step",
    "Trace",
    "TraceError",
    "iter_trace_files",
    "load_trace",
    "normalize_agent",
]

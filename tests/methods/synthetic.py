"""A small synthetic run for the methods' logic tests: three agents taking turns, a labelled fault."""

from __future__ import annotations

from localfa.traces.model import Labels, Step, Trace

AGENTS = ["Planner", "Coder", "Terminal"]


def synthetic_trace(n: int, tid: str, say: str, long: int = 0, gt: str | None = "8", labels: Labels | None = None) -> Trace:
    """`n` steps whose text is `say.format(i=i)` plus `long` filler words; the fault at step 4."""
    steps = [Step(index=i, agent=AGENTS[i % 3], role="assistant", content=say.format(i=i) + ("lorem ipsum " * long)) for i in range(n)]
    return Trace(
        id=tid,
        source=f"{tid}.json",
        format="messages",
        task="Count the even addresses.",
        steps=steps,
        final_output="4",
        ground_truth=gt,
        labels=labels or Labels(mistake_agent="Coder", mistake_step=min(4, n - 1)),
    )

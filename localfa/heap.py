"""Keeping the garbage collector's full scans off the engine's path.

CPython's cyclic collector now and then scans every tracked object in the process. In a sweep
that is the loaded traces, the plan, the engine (an in-process vLLM holds millions of objects)
and every cache: one full scan took ~4 ms on a 60-trace run beside the latency engine and
grows with the heap, and it runs in the harness's time, between two engine steps, while the
engine stands still. Objects alive when a run starts live for the whole run, so they are frozen
(`gc.freeze`: moved to a generation the collector never scans) for its length; what the run
itself allocates is collected as before. The run's end unfreezes them, so nothing frozen
outlives the run uncollectable.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

_lock = threading.Lock()
_depth = 0  # runs in this process holding the heap frozen (a Ray worker's, nested calls)
_thaw = False  # whether the outermost run froze a heap nobody had frozen, so thaws it


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Freeze what is alive now for the block. No collection first (`gc.freeze` and
    `gc.unfreeze` cost nothing; a full collection of a loaded engine's heap would cost each
    `diagnose` call): garbage frozen with the rest is collected after the run.

    A heap someone else froze is left as it is: vLLM freezes its startup heap (the bulk of
    ours) when its engine is built, after a collection, and thaws it when the engine shuts
    down; `gc.unfreeze` would thaw all of it, and freezing again at each run would keep the
    garbage of the runs between uncollected until then."""
    global _depth, _thaw
    with _lock:
        if _depth == 0:
            _thaw = gc.get_freeze_count() == 0
            if _thaw:
                gc.freeze()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _thaw:
                gc.unfreeze()

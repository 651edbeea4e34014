"""The sweep pieces a distributed run needs: the very functions `run_sweep` uses (sweep.py).

A Ray sweep and a shard run the same units, build the same method contexts and write the same
records as a single-process sweep, because they call the same code.
"""

from __future__ import annotations

from localfa.bench.sweep import SweepError, _collision, _Unit, build_methods, make_record, plan_units, select_todo, sweep_manifest, unit_job  # noqa: F401 (re-exported for the cluster modules)

Unit = _Unit

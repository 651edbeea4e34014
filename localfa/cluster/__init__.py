"""Sweeps past one host: engine workers on a Ray cluster (`ray_driver`), or shards (`shard`).

The driver (`driver.run_units_sweep`) owns the run directory whatever runs the units; see the
README section "Sweeps across hosts".
"""

from localfa.cluster.driver import LocalExecutor, run_units_sweep
from localfa.cluster.shard import Shard

__all__ = ["LocalExecutor", "Shard", "run_units_sweep"]

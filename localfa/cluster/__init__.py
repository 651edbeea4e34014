"""What running engines on a Ray cluster needs: connecting (`runtime`) and the engine worker actor
(`worker`). The sweep itself (its driver, and the local, shard and Ray executors) lives in
`localfa.bench`; nothing here imports it. See the README section "Sweeps across hosts".
"""

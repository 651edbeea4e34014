"""Offline means offline: switch off every phone-home path before any engine library is imported.

Air-gapped users run localfa on private traces; Hugging Face and vLLM both reach the network by
default (hub look-ups, usage statistics). Importing `localfa` sets these variables first.
"""

from __future__ import annotations

import os

OFFLINE_ENV: dict[str, str] = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
    "DO_NOT_TRACK": "1",
    # Ray (sweeps across hosts, localfa.cluster) reports usage statistics unless told not to.
    "RAY_USAGE_STATS_ENABLED": "0",
    # ...and joins clusters without authentication unless told; read when Ray is imported.
    "RAY_AUTH_MODE": "token",
    "TOKENIZERS_PARALLELISM": "false",
    # vLLM looks up a routable host address for its workers unless told; air-gapped hosts often
    # have no default route, so pin it to loopback.
    "VLLM_HOST_IP": "127.0.0.1",
}


def enforce() -> None:
    """Set the offline variables (a value the user already set for VLLM_HOST_IP is kept)."""
    for key, value in OFFLINE_ENV.items():
        if key == "VLLM_HOST_IP" and os.environ.get(key):
            continue
        os.environ[key] = value

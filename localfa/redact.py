"""Keep secrets (API keys) out of what localfa writes: manifests, logs, error lines.

A run's manifest records the command line, and people share run directories; `--api-key sk-...`
must not travel with them. Every place that writes a command line or a server's error text
passes it through here.
"""

from __future__ import annotations

import os
from typing import Iterable, Sequence

MASK = "***"
SECRET_OPTIONS = ("--api-key",)
SECRET_ENV = ("LOCALFA_API_KEY", "VLLM_API_KEY")


def mask_argv(argv: Sequence[str]) -> list[str]:
    """`argv` with the value of every secret option masked (`--api-key K` and `--api-key=K`)."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        name, eq, _ = arg.partition("=")
        if name in SECRET_OPTIONS:
            if eq:
                out.append(f"{name}={MASK}")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(arg)
    return [redact(a) for a in out]


def known_secrets(extra: Iterable[str | None] = ()) -> list[str]:
    """The keys this process knows of: the ones given, and those in the key variables."""
    found = [s for s in (*extra, *(os.environ.get(v) for v in SECRET_ENV)) if s]
    return sorted(set(found), key=len, reverse=True)  # longest first: a key inside another


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` with every known key replaced by ***."""
    for secret in known_secrets(secrets):
        if len(secret) >= 4:  # a one-letter "key" would mask half the text
            text = text.replace(secret, MASK)
    return text

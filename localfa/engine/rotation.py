"""Which of several servers take requests now, and how a server that left comes back.

A server that refuses connections or fails leaves the rotation; it is probed again after a
delay that doubles on every failed probe (1 s, 2 s, 4 s, ... up to a minute) and re-admitted as
soon as a probe finds it healthy and serving the same model. Probes run on whichever request
thread asks for the live servers first once one is due, one probe per server at a time, so no
background thread outlives the engine.

Every reason a server is out (given to `take_out`, returned by a probe, or the text of a probe
that raised) and every line said passes through the rotation's `mask` (`localfa.redact`) once,
here: reasons come from server errors, which can carry a URL with a key or an Authorization
header, and they end up in manifests (`servers_down`), error messages and the log.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from localfa.redact import redact

Probe = Callable[[str], "str | None"]  # url -> None when healthy, else why not


class Rotation:
    """The servers of one engine: live ones in their given order, the others with why and when
    they are probed next. `readmitted` counts servers that came back."""

    def __init__(
        self,
        urls: list[str],
        probe: Probe,
        say: Callable[[str], None],
        first_probe_s: float = 1.0,
        max_probe_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        mask: Callable[[str], str] = redact,
    ) -> None:
        self.urls = list(urls)
        self.down: dict[str, str] = {}  # url -> why it is out of rotation (masked)
        self.readmitted = 0
        self._probe, self._clock, self._mask = probe, clock, mask
        self._say = lambda msg: say(mask(msg))
        self._first, self._max = first_probe_s, max_probe_s
        self._next: dict[str, float] = {}  # url -> when to probe it next
        self._delay: dict[str, float] = {}
        self._probing: set[str] = set()
        self._lock = threading.Lock()

    def live(self) -> list[str]:
        """Servers in rotation now (due probes run first)."""
        self._probe_due()
        with self._lock:
            return [u for u in self.urls if u not in self.down]

    def take_out(self, url: str, why: str) -> None:
        """Out of rotation until a probe finds it healthy again."""
        why = self._mask(why)
        with self._lock:
            if url in self.down:
                return
            self.down[url] = why
            self._delay[url] = self._first
            self._next[url] = self._clock() + self._first
        self._say(f"localfa: server {url} taken out of rotation: {why}")

    def next_probe_in(self) -> float | None:
        """Seconds until the earliest probe is due (0 when one is due now); None when all are live."""
        with self._lock:
            if not self.down:
                return None
            return max(0.0, min(self._next[u] for u in self.down) - self._clock())

    def _probe_due(self) -> None:
        now = self._clock()
        with self._lock:
            due = [u for u in self.down if self._next[u] <= now and u not in self._probing]
            self._probing.update(due)
        for url in due:
            try:
                why = self._probe(url)
            except Exception as exc:  # noqa: BLE001 - a probe that fails in any way is a failed probe
                why = f"probe failed ({type(exc).__name__}: {exc})"
            if why is not None:
                why = self._mask(why)
            with self._lock:
                self._probing.discard(url)
                if why is None:
                    del self.down[url]
                    self.readmitted += 1
                else:
                    self.down[url] = why
                    self._delay[url] = min(self._max, self._delay[url] * 2)
                    self._next[url] = self._clock() + self._delay[url]
            if why is None:
                self._say(f"localfa: server {url} is back in rotation")

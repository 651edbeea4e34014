"""A content-addressed response cache: a re-run replays exactly, a killed sweep loses nothing.

Keys hash everything that determines an answer (model identity and answer settings, backend,
messages, grammar, sampling with its seed). An entry that no longer validates against its
grammar (or is damaged) is a miss: asked again and overwritten, never a crash. Stored in SQLite (WAL), so concurrent processes and SIGKILL are safe.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from localfa.engine.errors import CacheError, EngineError
from localfa.engine.types import Request, Response, Usage
from localfa.engine.wrapper import EngineWrapper
from localfa.redact import redact

if TYPE_CHECKING:
    from localfa.engine.cache_files import CacheFiles


def request_key(identity: str, req: Request) -> str:
    s = req.sampling
    fields: dict[str, Any] = {
        "id": identity,
        "messages": list(req.messages),
        "grammar": req.grammar.fingerprint,
        "sampling": [s.temperature, s.top_p, s.max_tokens, s.seed],
    }
    if req.score is not None:  # a scored prompt: its segments and layers change the answer
        fields["score"] = req.score.key()
    payload = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


class ResponseCache:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
        self._init_schema()

    def _init_schema(self, attempts: int = 100) -> None:
        """WAL mode and the table. Switching to WAL takes an exclusive lock that SQLite's busy
        timeout does not wait for, so processes opening one cache together (Ray workers) retry."""
        for attempt in range(attempts):
            try:
                if self._db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, body TEXT NOT NULL)")
                self._db.commit()
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == attempts - 1:
                    raise
                time.sleep(0.05 + 0.01 * attempt)

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT body FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put_many(self, items: list[tuple[str, dict[str, Any]]]) -> None:
        with self._lock:
            self._db.executemany(
                "INSERT OR REPLACE INTO responses (key, body) VALUES (?, ?)", [(k, redact(json.dumps(v))) for k, v in items]
            )
            self._db.commit()

    def close(self) -> None:
        with self._lock:
            self._db.close()


class CachingEngine(EngineWrapper):
    """Wraps any engine: hits are replayed (re-validated), misses go to the engine as one batch."""

    def __init__(self, inner: Any, cache: "ResponseCache | CacheFiles", identity: str) -> None:
        super().__init__(inner)
        self.cache = cache
        self.identity = identity
        self.hits = 0
        self.misses = 0
        self.stale = 0  # entries that no longer validated: asked again

    def lookup(self, req: Request, key: str) -> Response | None:
        """The cached answer to `req`, or None: never stored, or stored but no longer valid (its
        grammar changed, or the entry is damaged), which is asked again and overwritten."""
        body = self.cache.get(key)
        if body is None:
            return None
        try:
            return self._replay(req, body)
        except (EngineError, KeyError, TypeError, ValueError):
            self.stale += 1
            return None

    def _replay(self, req: Request, body: dict[str, Any]) -> Response:
        return Response(
            text=body["text"],
            value=req.grammar.parse(body["text"]),
            finish_reason=body["finish_reason"],
            usage=Usage(**body["usage"]),
            latency_s=body["latency_s"],
            key=req.key,
            from_cache=True,
            retried=body.get("retried", False),
        )

    @staticmethod
    def _body(resp: Response) -> dict[str, Any]:
        return {
            "text": resp.text,
            "finish_reason": resp.finish_reason,
            "usage": resp.usage.as_dict(),
            "latency_s": resp.latency_s,
            "retried": resp.retried,
        }

    def session(self) -> "CachingSession":
        return CachingSession(self, self.inner.session())

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        keys = [request_key(self.identity, r) for r in requests]
        out: list[Response | None] = [None] * len(requests)
        missing: list[int] = []
        for i, (req, key) in enumerate(zip(requests, keys)):
            hit = self.lookup(req, key)
            if hit is None:
                missing.append(i)
                continue
            out[i] = hit
        self.hits += len(requests) - len(missing)
        self.misses += len(missing)
        if missing:
            fresh = self.inner.generate([requests[i] for i in missing])
            items = []
            for i, resp in zip(missing, fresh):
                out[i] = resp
                items.append((keys[i], self._body(resp)))
            self.cache.put_many(items)
        return [r for r in out if r is not None]

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d["response_cache"] = str(self.cache.path)
        return d

    def close(self) -> None:
        self.cache.close()
        self.inner.close()


class CachingSession:
    """A session through the cache: hits come back at the next `wait`, misses go to the engine."""

    def __init__(self, owner: CachingEngine, inner: Any) -> None:
        self.owner = owner
        self.inner = inner
        self._next = 0
        self._hits: list[tuple[int, Response | CacheError]] = []
        self._misses: dict[int, tuple[int, str]] = {}  # inner ticket -> (our ticket, cache key)

    def pending(self) -> int:
        return len(self._hits) + len(self._misses)

    def submit(self, requests: Sequence[Request]) -> list[int]:
        ours, to_send, keys = [], [], []
        for req in requests:
            ticket, self._next = self._next, self._next + 1
            ours.append(ticket)
            key = request_key(self.owner.identity, req)
            try:
                hit = self.owner.lookup(req, key)
            except CacheError as exc:  # a cache that cannot be read: this request's error
                self._hits.append((ticket, exc))
                continue
            if hit is not None:
                self._hits.append((ticket, hit))
                self.owner.hits += 1
            else:
                to_send.append(req)
                keys.append((ticket, key))
                self.owner.misses += 1
        for inner_ticket, mapping in zip(self.inner.submit(to_send) if to_send else [], keys):
            self._misses[inner_ticket] = mapping
        return ours

    def wait(self) -> list[tuple[int, Any]]:
        if self._hits:
            ready, self._hits = self._hits, []
            return ready
        out, items = [], []
        for inner_ticket, result in self.inner.wait():
            ticket, key = self._misses.pop(inner_ticket)
            if isinstance(result, Response):
                items.append((key, self.owner._body(result)))
            out.append((ticket, result))
        if items:
            try:
                self.owner.cache.put_many(items)
            except CacheError as exc:  # not kept: those requests' error (a resume asks them again)
                failed = {t for t, r in out if isinstance(r, Response)}
                out = [(t, exc if t in failed else r) for t, r in out]
        return out

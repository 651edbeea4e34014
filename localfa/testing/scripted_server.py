"""An OpenAI-compatible server that answers like `--engine scripted`, with faults on demand: for
the soak (scripts/soak.py) and tests only, never a stand-in for a real model.

It answers every chat completion with a valid example of the grammar in the request body (the
structured-outputs fields vLLM takes, turned back into a `Grammar`), seeded by the request's
seed, and reports usage as vLLM does. Faults a sweep must survive, each logged as one JSON line
in `--events`:

- ``--throttle-at N``: the N-th chat completion gets one 429 with `Retry-After: 1`;
- ``--hold-file F``: while file F exists, every chat completion waits up to `HOLD_STEP_S` (less
  once the file goes): a test slows the work down until an event it waits for has happened (the
  soak's restarted server back in rotation) and releases it then, instead of hoping a fixed delay
  is long enough; requests keep arriving meanwhile, so the client's own probes still run;
- ``--poison TEXT --poison-file F``: the first request whose messages hold TEXT (on any server
  sharing F) becomes the poison request, answered 500 on every try, by every such server;
- the process itself can be killed and started again on its port (the soak does that).

    python -m localfa.testing.scripted_server --port 8001 [--delay 0.01] [--events F] ...
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from localfa.engine.examples import example_text
from localfa.engine.grammar import Grammar

MODEL = "scripted-answers"  # the served model name (a test server, no real model)


def grammar_of(fields: dict[str, Any]) -> Grammar:
    """The grammar a request's `structured_outputs` fields describe."""
    if "json" in fields:
        schema = fields["json"]
        return Grammar.json(json.loads(schema) if isinstance(schema, str) else schema, name="wire")
    if "regex" in fields:
        return Grammar.regex(fields["regex"], name="wire")
    if "choice" in fields:
        return Grammar.choice(list(fields["choice"]), name="wire")
    raise ValueError(f"the scripted server cannot answer {sorted(fields)}")


class Faults:
    """What this server does wrong, and the log of what it did."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.calls = 0
        self.lock = threading.Lock()

    def log(self, kind: str, **extra: Any) -> None:
        if self.args.events:
            line = json.dumps({"kind": kind, "port": self.args.port, "pid": os.getpid(), **extra}) + "\n"
            with open(self.args.events, "a", encoding="utf-8") as fh:  # one write: survives SIGKILL
                fh.write(line)

    def throttled(self) -> bool:
        with self.lock:
            self.calls += 1
            hit = self.calls == self.args.throttle_at
        if hit:
            self.log("429")
        return hit

    def poisoned(self, body: dict[str, Any]) -> bool:
        marker, path = self.args.poison, self.args.poison_file
        if not marker or not path or marker not in json.dumps(body["messages"]):
            return False
        digest = hashlib.sha256(json.dumps([body["messages"], body.get("seed")], sort_keys=True).encode()).hexdigest()
        try:  # the first server to see a marked request chooses it, atomically, for every server
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd, "w") as fh:
                fh.write(digest)
        except FileExistsError:
            pass
        with open(path, encoding="utf-8") as fh:
            chosen = fh.read().strip()
        if chosen != digest:
            return False
        self.log("poison")
        return True


HOLD_STEP_S = 1.0


def hold_while(path: Path, limit_s: float = HOLD_STEP_S) -> None:
    """Wait while `path` exists, at most `limit_s` (then answer: the client must keep asking)."""
    deadline = time.monotonic() + limit_s
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def handler_for(faults: Faults) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
            body = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if self.path in ("/health", "/v1/health"):
                self._send(200, {})
            elif self.path == "/v1/models":
                self._send(200, {"data": [{"id": MODEL, "root": MODEL, "max_model_len": faults.args.max_model_len}]})
            else:
                self._send(404, {"detail": "Not Found"})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if self.path == "/tokenize":
                self._send(200, {"count": len(str(body.get("prompt", "")).split())})
                return
            if self.path != "/v1/chat/completions":
                self._send(404, {"detail": "Not Found"})
                return
            if faults.args.delay:
                time.sleep(faults.args.delay)
            if faults.args.hold_file:
                hold_while(Path(faults.args.hold_file))
            if faults.throttled():
                self._send(429, {"error": "slow down"}, {"Retry-After": "1"})
                return
            if faults.poisoned(body):
                self._send(500, {"error": "the engine crashed on this request"})
                return
            try:
                text = example_text(grammar_of(body.get("structured_outputs") or {}), body.get("seed"))
            except (ValueError, KeyError) as exc:
                self._send(400, {"error": f"structured outputs: {exc}"})
                return
            prompt = sum(len(str(m.get("content", "")).split()) for m in body["messages"])
            usage = {"prompt_tokens": prompt, "completion_tokens": len(text.split()), "prompt_tokens_details": {"cached_tokens": 0}}
            self._send(200, {"choices": [{"message": {"content": text}, "finish_reason": "stop"}], "usage": usage})

    return Handler


class _Listener(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # a sweep's concurrent requests, as a real server takes them


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--delay", type=float, default=0.0, help="seconds per chat completion")
    ap.add_argument("--max-model-len", type=int, default=32768)
    ap.add_argument("--throttle-at", type=int, default=0)
    ap.add_argument("--poison", default="")
    ap.add_argument("--poison-file", default="")
    ap.add_argument("--events", default="")
    ap.add_argument("--hold-file", default="", help="while this file exists, chat completions wait")
    args = ap.parse_args(argv)
    _Listener(("127.0.0.1", args.port), handler_for(Faults(args))).serve_forever()


if __name__ == "__main__":
    main()

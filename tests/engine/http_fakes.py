"""Small HTTP servers on 127.0.0.1 for the openai backend's tests: a scripted OpenAI-compatible
server (model listing, chat completions, failure modes) and a counting proxy in front of a real
`vllm serve`, so tests can tell which endpoint each request reached."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


class _HTTPServer(ThreadingHTTPServer):
    request_queue_size = 128  # many concurrent clients, as a real server takes them
    daemon_threads = True


class _Server:
    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = _HTTPServer(("127.0.0.1", 0), handler)
        self.httpd.owner = self  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.seen: list[dict[str, Any]] = []
        self._thread: threading.Thread | None = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop listening: connections to the port are refused until `start()`."""
        if self._thread is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self._thread = None

    def start(self) -> None:
        """Listen again on the same port (a server that came back)."""
        if self._thread is None:
            port = int(self.url.rsplit(":", 1)[1])
            handler = self.httpd.RequestHandlerClass
            self.httpd = _HTTPServer(("127.0.0.1", port), handler)
            self.httpd.owner = self  # type: ignore[attr-defined]
            self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
            self._thread.start()

    def __enter__(self) -> "_Server":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> dict[str, Any]:
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"{}")


class FakeOpenAI(_Server):
    """Answers every chat completion with `content` (or `answer(body)`).

    `mode` = "ok" | "malformed" | "500"; `statuses` is a queue of HTTP statuses the next chat
    completions get instead of an answer (with `retry_after` on a 429; 0: hang for `hang_s`); a request whose last
    message holds `poison` gets a 500 on every try. `fingerprint` (a dict) is served at
    /localfa/fingerprint as `localfa serve` does; `counts` makes /localfa/count_tokens answer
    (one count a word). `stop()` / `start()` take the server down and bring it back on its port.
    """

    def __init__(
        self,
        model: str = "m",
        root: str = "/models/m",
        max_model_len: int = 2048,
        content: str = "ok",
        mode: str = "ok",
        tokens_details: bool = True,
        fingerprint: dict[str, Any] | None = None,
        counts: bool = False,
        answer: Any = None,
    ) -> None:
        self.model, self.root, self.max_model_len = model, root, max_model_len
        self.content, self.mode, self.tokens_details = content, mode, tokens_details
        self.fingerprint, self.counts, self.answer = fingerprint, counts, answer
        self.statuses: list[int] = []
        self.retry_after: str | None = None
        self.poison: str | None = None
        self.hang_s = 1.0
        self.routes: list[str] = []  # every path asked, in order
        owner = self

        class Handler(_Handler):
            def do_GET(self) -> None:
                owner.routes.append(self.path)
                if self.path.endswith("/localfa/fingerprint"):
                    if owner.fingerprint is None:
                        self._send(404, b'{"detail": "Not Found"}')
                    else:
                        self._send(200, json.dumps(owner.fingerprint).encode())
                    return
                data = {"data": [{"id": owner.model, "root": owner.root, "max_model_len": owner.max_model_len}]}
                self._send(200, json.dumps(data).encode())

            def do_POST(self) -> None:
                owner.routes.append(self.path)
                body = self._body()
                if self.path.endswith("/localfa/count_tokens"):
                    if not owner.counts:
                        self._send(404, b'{"detail": "Not Found"}')
                    else:
                        self._send(200, json.dumps({"counts": [len(t.split()) for t in body["texts"]]}).encode())
                    return
                if self.path.endswith("/tokenize"):
                    self._send(200, json.dumps({"count": len(body["prompt"].split())}).encode())
                    return
                owner.seen.append(body)
                last = str(body["messages"][-1]["content"])
                if owner.statuses and owner.statuses[0] == 0:  # hang past the client's read timeout
                    owner.statuses.pop(0)
                    time.sleep(owner.hang_s)
                    self._send(200, b"{}")
                elif owner.statuses:
                    status = owner.statuses.pop(0)
                    self.send_response(status)
                    if status == 429 and owner.retry_after is not None:
                        self.send_header("Retry-After", owner.retry_after)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"{}")
                elif owner.mode == "500" or (owner.poison and owner.poison in last):
                    self._send(500, b'{"error": "boom"}')
                elif owner.mode == "malformed":
                    self._send(200, b'{"choices": [')
                else:
                    usage = {"prompt_tokens": 5, "completion_tokens": 1}
                    if owner.tokens_details:
                        usage["prompt_tokens_details"] = {"cached_tokens": 0}
                    content = owner.answer(body) if owner.answer else owner.content
                    data = {"choices": [{"message": {"content": content}, "finish_reason": "stop"}], "usage": usage}
                    self._send(200, json.dumps(data).encode())

        super().__init__(Handler)


class CountingProxy(_Server):
    """Forwards every request to `target` and keeps each POST body in `seen`."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        owner = self

        class Handler(_Handler):
            def _forward(self, method: str) -> None:
                body = self._body() if method == "POST" else None
                if body is not None:
                    owner.seen.append(body)
                key = {k: v for k, v in self.headers.items() if k.lower() == "authorization"}  # a keyed server's
                resp = httpx.request(method, owner.target + self.path, json=body, headers=key, timeout=600, trust_env=False)
                self._send(resp.status_code, resp.content, resp.headers.get("content-type", "application/json"))

            def do_GET(self) -> None:
                self._forward("GET")

            def do_POST(self) -> None:
                self._forward("POST")

        super().__init__(Handler)


def dead_url() -> str:
    """A loopback URL where nothing listens (a port just released)."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"

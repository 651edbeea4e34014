"""Small HTTP servers on 127.0.0.1 for the openai backend's tests: a scripted OpenAI-compatible
server (model listing, chat completions, failure modes) and a counting proxy in front of a real
`vllm serve`, so tests can tell which endpoint each request reached."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


class _Server:
    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.owner = self  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.seen: list[dict[str, Any]] = []
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

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
    """Answers every chat completion with `content`; `mode` = "ok" | "malformed" | "500"."""

    def __init__(
        self,
        model: str = "m",
        root: str = "/models/m",
        max_model_len: int = 2048,
        content: str = "ok",
        mode: str = "ok",
        tokens_details: bool = True,
    ) -> None:
        self.model, self.root, self.max_model_len = model, root, max_model_len
        self.content, self.mode, self.tokens_details = content, mode, tokens_details
        owner = self

        class Handler(_Handler):
            def do_GET(self) -> None:
                data = {"data": [{"id": owner.model, "root": owner.root, "max_model_len": owner.max_model_len}]}
                self._send(200, json.dumps(data).encode())

            def do_POST(self) -> None:
                body = self._body()
                owner.seen.append(body)
                if owner.mode == "500":
                    self._send(500, b'{"error": "boom"}')
                elif owner.mode == "malformed":
                    self._send(200, b'{"choices": [')
                else:
                    usage = {"prompt_tokens": 5, "completion_tokens": 1}
                    if owner.tokens_details:
                        usage["prompt_tokens_details"] = {"cached_tokens": 0}
                    data = {"choices": [{"message": {"content": owner.content}, "finish_reason": "stop"}], "usage": usage}
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
                resp = httpx.request(method, owner.target + self.path, json=body, timeout=600, trust_env=False)
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

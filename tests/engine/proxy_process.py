"""A forwarding HTTP proxy as a process of its own, so a test can SIGKILL it with requests in
flight (their connections drop, as when a server process dies) and start it again on its port.

    python -m tests.engine.proxy_process PORT TARGET_URL
"""

from __future__ import annotations

import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx


def serve(port: int, target: str) -> None:
    client = httpx.Client(base_url=target.rstrip("/"), timeout=600, trust_env=False)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _forward(self, method: str) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if method == "POST" else None
            headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "authorization")}
            resp = client.request(method, self.path, content=body, headers=headers)
            self.send_response(resp.status_code)
            self.send_header("Content-Type", resp.headers.get("content-type", "application/json"))
            self.send_header("Content-Length", str(len(resp.content)))
            self.end_headers()
            self.wfile.write(resp.content)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self._forward("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._forward("POST")

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 128

    Server(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2])

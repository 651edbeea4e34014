"""The ASGI layer `localfa serve` puts in front of vLLM (vLLM's `--middleware` hook).

It does two jobs, both in the server process, before any vLLM route:

- **The key guards every route.** vLLM 0.32 checks its API key only under `/v1`, `/v2`,
  `/inference` and `/cohere`; `/invocations` (chat completions), `/tokenize`, `/detokenize`,
  `/metrics`, `/health` and the rest stay open. With a key set (`VLLM_API_KEY`, which `localfa
  serve` passes through the environment), every HTTP request and WebSocket without
  `Authorization: Bearer KEY` is refused here (401; WebSockets are closed with 1008).
- **It says what it serves.** `GET /localfa/fingerprint` returns the model's content hash and the
  settings that change answers (written by `localfa serve` into `LOCALFA_SERVED`), which the
  openai backend uses as the identity of the answers; `POST /localfa/count_tokens`
  `{"texts": [...]}` counts each text with the model's tokenizer in one call.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from typing import Any, Awaitable, Callable

SERVED_ENV = "LOCALFA_SERVED"
KEY_ENV = "VLLM_API_KEY"
FINGERPRINT_PATH = "/localfa/fingerprint"
COUNT_PATH = "/localfa/count_tokens"
MAX_COUNT_BODY = 256 * 1024 * 1024
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


class LocalfaGuard:
    """Refuses unauthenticated requests on every route; serves the fingerprint and batched counts."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app
        key = os.environ.get(KEY_ENV) or ""
        self._key = _digest(key) if key else None
        self._served = json.loads(os.environ.get(SERVED_ENV) or "{}")
        self._counter: Callable[[str], int] | None = None

    def authorised(self, scope: Scope) -> bool:
        if self._key is None:
            return True
        headers = dict(scope.get("headers") or [])
        scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        return scheme.lower() == "bearer" and secrets.compare_digest(_digest(token), self._key)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)  # lifespan
            return
        if not self.authorised(scope):
            if kind == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            else:
                await _json(send, 401, {"error": "Unauthorized: send Authorization: Bearer <key>"})
            return
        path = scope.get("path", "")
        if kind == "http" and path == FINGERPRINT_PATH and scope.get("method") == "GET":
            await _json(send, 200, self._served)
            return
        if kind == "http" and path == COUNT_PATH and scope.get("method") == "POST":
            await self._count(receive, send)
            return
        await self.app(scope, receive, send)

    async def _count(self, receive: Receive, send: Send) -> None:
        from starlette.concurrency import run_in_threadpool

        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > MAX_COUNT_BODY:
                await _json(send, 413, {"error": "body too large"})
                return
            if not message.get("more_body"):
                break
        try:
            texts = json.loads(body)["texts"]
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                raise TypeError("texts must be a list of strings")
        except RecursionError:
            await _json(send, 400, {"error": 'expected {"texts": [str, ...]}: nested too deeply'})
            return
        except (ValueError, KeyError, TypeError) as exc:
            await _json(send, 400, {"error": f'expected {{"texts": [str, ...]}}: {exc}'})
            return
        counter = self._tokenizer()
        if counter is None:
            await _json(send, 501, {"error": "no tokenizer.json in the model folder: use /tokenize"})
            return
        # A lone surrogate (half an emoji) loads from JSON but no tokenizer can encode it: counted as U+FFFD.
        texts = [_LONE_SURROGATE.sub("\ufffd", t) for t in texts]
        try:
            counts = await run_in_threadpool(lambda: [counter(t) for t in texts])
        except Exception as exc:  # noqa: BLE001 - one line to the client, never a traceback page
            await _json(send, 400, {"error": f"cannot count these texts: {type(exc).__name__}"})
            return
        await _json(send, 200, {"counts": counts})

    def _tokenizer(self) -> Callable[[str], int] | None:
        if self._counter is None:
            from localfa.tokens import token_counter

            name, counter = token_counter(self._served.get("model_dir"))
            if name == "approx":
                return None
            self._counter = counter
        return self._counter


async def _json(send: Send, status: int, data: Any) -> None:
    body = json.dumps(data).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

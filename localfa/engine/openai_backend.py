"""Client for running `vllm serve` engines (OpenAI-compatible HTTP), one or several.

A batch is sent concurrently; with several servers every request of one trace goes to the same
server (chosen by a hash of the trace id), so a trace's turns reuse that server's prefix cache.
Failures are told apart by what they say about the server (`localfa.engine.rotation`):

- refused or no connection: the server leaves the rotation, its requests go to the others, and
  it is probed again with backoff and re-admitted when healthy;
- the server took the request and failed (5xx, read timeout, dropped connection): the request
  goes to another server; a request that fails on two servers is that request's error
  (`RequestFailedError`), never a reason to drop a third; a server leaves the rotation once it
  has failed `STRIKES` different requests in a row, so one poison request takes none down;
- with one server (or one left), the same failures are retried on it with backoff;
- 401, 408 and 429 are retried with backoff on the same server (429 waits as `Retry-After` says).

All servers must serve the same model. Structured outputs travel in the request body
(`structured_outputs`), so the server enforces the same grammar as the in-process engine. Cached
prompt tokens are reported when the server runs with `--enable-prompt-tokens-details` (the
profiles launched by `localfa serve` do). A server started by `localfa serve` also says what it
serves (`/localfa/fingerprint`: model content hash and answer settings), which becomes the
identity of its answers, and counts many texts' tokens in one call (`/localfa/count_tokens`).

Keys are masked at the engine's edges (`localfa.redact`), not message by message: every line it
says, every reason a server is out (the rotation masks those) and every error leaving a request
or the start-up probing; a server's response text is masked where it is read, before any of it
is cut short (half a key would no longer match).
"""

from __future__ import annotations

import email.utils
import hashlib
import os
import re
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import httpx

from localfa.engine.base import BaseEngine, RawOutput
from localfa.engine.errors import ContextLengthError, EngineError, EngineUnavailableError, GrammarError, RequestFailedError
from localfa.engine.rotation import Rotation
from localfa.engine.session import as_engine_error
from localfa.engine.types import Message, Request
from localfa.engine.vllm_types import forget_fields, structured_outputs
from localfa.redact import masked_errors, masker
from localfa.tokens import approx_tokens

_LEN_RE = re.compile(r"maximum context length is (\d+).*?(\d+) (?:input )?tokens", re.S)
RETRY_STATUS = (401, 408, 429)
STRIKES = 3  # different requests in a row a server must fail (having taken them) to leave the rotation
PROBE_TIMEOUT_S = 10.0  # listing models and the fingerprint: a hung server must not hold a request thread
FINGERPRINT_ROUTE = "/localfa/fingerprint"
COUNT_ROUTE = "/localfa/count_tokens"
# Answer settings a `localfa serve` server reports, copied into `describe()` for the manifest.
SERVED_SETTINGS = (
    "dtype",
    "structured_outputs_backend",
    "vllm_version",
    "chat_template",
    "sampling_defaults",
    "extra_args",
    "reasoning_parser",
    "thinking_tokens",
)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently one request is retried: waits double from `base_s` up to
    `max_s`; `Retry-After` is honoured up to `max_after_s`."""

    attempts: int = 4
    base_s: float = 0.5
    max_s: float = 30.0
    max_after_s: float = 120.0

    def wait_s(self, attempt: int) -> float:
        return min(self.max_s, self.base_s * 2 ** max(0, attempt - 1))


class OpenAIEngine(BaseEngine):
    name = "openai"
    packages = ("httpx",)
    computes_locally = False  # the servers compute

    @classmethod
    def create(cls, options: Any, say: Callable[[str], None], named: bool = True) -> "OpenAIEngine":
        settings = options.settings() if options.profile else None
        engine = cls(
            options.base_urls,
            api_key=options.api_key or os.environ.get("LOCALFA_API_KEY"),
            enable_thinking=settings.enable_thinking if settings else None,
            say=say,
        )
        engine._say(f"localfa: engine openai at {', '.join(engine.base_urls)} (model {engine.model})")
        with masked_errors(engine._mask):
            engine.check_itself(engine._say)
        return engine

    def run_self_checks(self) -> dict[str, tuple[bool, str]]:
        """Every live server reports cached prompt tokens (`prompt_tokens_details`), which vLLM
        does only when started with --enable-prompt-tokens-details (`localfa serve` does)."""
        from localfa.engine.grammar import Grammar
        from localfa.engine.types import Sampling

        probe = Request(
            ({"role": "user", "content": "Say ok."},),
            Grammar.choice(["ok"], name="self_check"),
            Sampling(temperature=0.0, max_tokens=2, seed=0),
            key="self-check",
        )
        missing = []
        for url in self.live():
            try:
                resp = self.client.post(f"{url}/chat/completions", json=self._body(probe))
                usage = resp.raise_for_status().json().get("usage") or {}
            except (httpx.HTTPError, ValueError) as exc:
                self._take_out(url, f"probe request failed ({exc})")
                continue
            if "prompt_tokens_details" not in usage or usage["prompt_tokens_details"] is None:
                missing.append(url)
        return {
            "prompt_tokens_details": (
                not missing,
                f"{', '.join(missing)} reported no prompt_tokens_details: start vLLM with "
                "--enable-prompt-tokens-details (localfa serve does) or cached tokens read as 0",
            )
        }

    def __init__(
        self,
        base_urls: list[str],
        api_key: str | None = None,
        model: str | None = None,
        timeout_s: float = 600.0,
        max_concurrency: int = 64,
        enable_thinking: bool | None = None,  # None: the server's profile says (off without one)
        say: Callable[[str], None] | None = None,
        connect_timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
        first_probe_s: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not base_urls:
            raise EngineError("the openai backend needs at least one --base-url")
        self.base_urls = [u.rstrip("/") for u in base_urls]
        self.base_urls = [u if u.endswith("/v1") else u + "/v1" for u in self.base_urls]
        self._mask = masker([api_key])
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(headers=headers, trust_env=False, timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s))
        self.max_concurrency = max_concurrency
        self.enable_thinking = bool(enable_thinking)
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        tell = say or (lambda _msg: None)
        self._say: Callable[[str], None] = lambda msg: tell(self._mask(msg))
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._strikes: dict[str, int] = {}  # failed requests in a row, per server
        self._units: set[str] = set()  # how token counts were made ("tokens", "chars/4", ...)
        self._count_warned: set[str] = set()
        self.rotation = Rotation(self.base_urls, self._probe, tell, first_probe_s=first_probe_s, mask=self._mask)
        with masked_errors(self._mask):
            self.servers = self._probe_servers(model)
        first = self.servers[self.live()[0]]
        self.model = model or first["id"]
        self.max_model_len = first["max_model_len"]
        self.served = first["served"] or {}
        served = self.served.get("answer_settings") or {}
        # A server started with a reasoning parser (a thinking profile) thinks before the grammar:
        # each request carries its thinking budget, as the in-process vLLM engine's do, the
        # template's thinking switch follows the server's profile unless the client named one,
        # and the methods fit their prompts in the window less that budget.
        self.thinking_tokens = max(0, int(served.get("thinking_tokens") or 0))  # the server's `thinking_budget()`
        if served.get("reasoning_parser") and enable_thinking is None:
            self.enable_thinking = bool(served.get("enable_thinking"))
        if self.max_model_len and self.thinking_tokens:
            self.max_model_len -= self.thinking_tokens
        identity = f"{self.model}|{first['root']}|{self.max_model_len}"
        self.model_info = {
            "path": None,
            "sha256": self.served.get("sha256"),
            "name": self.model,
            "root": first["root"],
            "max_model_len": self.max_model_len,
            "identity": identity + (f"|{self.served['sha256']}" if self.served.get("sha256") else ""),
        }

    # ---- servers -------------------------------------------------------------------------
    @property
    def down(self) -> dict[str, str]:
        """Servers out of rotation now, with why."""
        return dict(self.rotation.down)

    def _describe_server(self, url: str) -> dict[str, Any]:
        """Model id, root, window and (from `localfa serve`) the fingerprint of one server."""
        data = self.client.get(f"{url}/models", timeout=PROBE_TIMEOUT_S).raise_for_status().json()
        entry = (data.get("data") or [None])[0]
        if not isinstance(entry, dict) or "id" not in entry:
            raise EngineError(f"{url}: the server serves no model")
        return {
            "id": entry["id"],
            "root": entry.get("root") or entry["id"],
            "max_model_len": int(entry.get("max_model_len") or 0) or None,
            "served": self._served_fingerprint(url),
        }

    def _served_fingerprint(self, url: str) -> dict[str, Any] | None:
        """What a `localfa serve` server reports it serves; None for a plain `vllm serve`."""
        try:
            resp = self.client.get(url.removesuffix("/v1") + FINGERPRINT_ROUTE, timeout=PROBE_TIMEOUT_S)
        except httpx.HTTPError:
            return None
        if resp.status_code != 200:
            return None
        try:
            data = resp.json()
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    @staticmethod
    def _kind(entry: dict[str, Any]) -> tuple[Any, ...]:
        return (entry["id"], entry["root"], entry["max_model_len"], (entry["served"] or {}).get("sha256"))

    def _probe_servers(self, model: str | None) -> dict[str, dict[str, Any]]:
        """Model id, root and window of every server; unreachable ones start out of rotation.

        Servers that serve different models (or the same name with a different root, window or
        served fingerprint) are refused: their answers would not be comparable within one run.
        """
        found: dict[str, dict[str, Any]] = {}
        for url in self.base_urls:
            try:
                found[url] = self._describe_server(url)
            except (httpx.HTTPError, ValueError) as exc:
                self._take_out(url, f"cannot list models ({exc})")
        if not found:
            raise EngineUnavailableError("no server answered: " + "; ".join(f"{u}: {w}" for u, w in self.down.items()))
        if len({self._kind(v) for v in found.values()}) > 1:
            listing = ", ".join(
                f"{u} serves {v['id']} (root {v['root']}, max_model_len {v['max_model_len']}"
                + (f", fingerprint {v['served']['sha256'][:12]}" if (v["served"] or {}).get("sha256") else "")
                + ")"
                for u, v in found.items()
            )
            raise EngineError(f"the servers serve different models: {listing}; use servers of one model")
        if model is not None and model not in {v["id"] for v in found.values()}:
            raise EngineError(f"no server serves model {model!r}")
        return found

    def _probe(self, url: str) -> str | None:
        """Whether a server out of rotation may come back: healthy, and serving the same model."""
        try:
            entry = self._describe_server(url)
        except (httpx.HTTPError, ValueError, EngineError) as exc:
            return f"still unreachable ({exc})"
        expected = next(iter(self.servers.values()))
        if self._kind(entry) != self._kind(expected):
            return f"now serves another model ({entry['id']}, root {entry['root']}): kept out"
        self.servers[url] = entry
        return None

    def live(self) -> list[str]:
        return self.rotation.live()

    def _take_out(self, url: str, why: str) -> None:
        self.rotation.take_out(url, why)

    @property
    def servers_readmitted(self) -> int:
        return self.rotation.readmitted

    def _route_order(self, req: Request) -> list[str]:
        """Every server, starting from the request's route (its trace): stable, so a trace keeps
        its prefix cache; when that server is out, the next one in the ring takes it."""
        h = int(hashlib.sha256((req.route or req.key).encode()).hexdigest()[:12], 16)
        start = h % len(self.base_urls)
        return [self.base_urls[(start + i) % len(self.base_urls)] for i in range(len(self.base_urls))]

    def _server_for(self, req: Request, live: list[str]) -> str:
        return next(u for u in self._route_order(req) if u in live)

    # ---- token counting ------------------------------------------------------------------
    counts_in_process = False  # every count is a call to a server

    def count_tokens(self, text: str) -> int:
        return self.count_tokens_many([text])[0]

    def count_tokens_many(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text, counted by a live server in one call (`localfa serve` counts each
        text; a plain vLLM counts them joined, shared out by characters). No server can: 4
        characters a token, with a warning; `token_unit()` says which was used."""
        texts = list(texts)
        if not texts:
            return []
        why = "no server is in rotation"
        for url in self.live():
            try:
                counts, unit = self._count_on(url.removesuffix("/v1"), texts)
            except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
                why = f"{url}: {str(exc) or type(exc).__name__}"  # said masked
                continue
            self._units.add(unit)
            return counts
        self._units.add("chars/4")
        if why not in self._count_warned:
            self._count_warned.add(why)
            self._say(f"localfa: warning: no server could count tokens ({why}); counting 4 characters a token instead")
        return [approx_tokens(t) for t in texts]

    def _count_on(self, root: str, texts: list[str]) -> tuple[list[int], str]:
        resp = self.client.post(root + COUNT_ROUTE, json={"texts": texts})
        if resp.status_code != 404:
            counts = [int(c) for c in resp.raise_for_status().json()["counts"]]
            if len(counts) != len(texts):
                raise ValueError(f"{len(counts)} counts for {len(texts)} texts")
            return counts, "tokens"
        # a plain `vllm serve`: one /tokenize of all texts joined, shared out by characters
        body = {"model": self.model, "prompt": "".join(texts), "add_special_tokens": False}
        total = int(self.client.post(root + "/tokenize", json=body).raise_for_status().json()["count"])
        if len(texts) == 1:
            return [total], "tokens"
        return share_out(total, [len(t) for t in texts]), "tokens_shared_by_chars"

    def token_unit(self) -> str:
        """How this engine's token counts were made so far ("tokens" until it counted any)."""
        return "+".join(sorted(self._units)) or "tokens"

    def forget_grammars(self) -> None:
        """Forget the structured-outputs fields built here. The servers keep the grammars they
        compiled: a benchmark that must pay compilation again needs fresh servers."""
        super().forget_grammars()
        forget_fields()

    def describe(self) -> dict[str, Any]:
        served = self.served.get("answer_settings") or {}
        return {
            "backend": self.name,
            "base_urls": [self._mask(u) for u in self.base_urls],  # a URL may carry a password
            "served_model": self.model,
            "model_root": self.model_info.get("root"),
            "max_model_len": self.max_model_len,
            "served_fingerprint": self.served.get("sha256"),
            **{k: served.get(k) for k in SERVED_SETTINGS if k in served},
            "chat_template_kwargs": {"enable_thinking": self.enable_thinking},
            "servers_down": {self._mask(u): why for u, why in self.down.items()},
            "self_checks": self.self_checks,
        }

    def close(self) -> None:
        with self._pool_lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
        self.client.close()

    # -----------------------------------------------------------------------------------
    def _body(self, req: Request) -> dict[str, Any]:
        s = req.sampling
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(req.messages),
            "temperature": s.temperature,
            "top_p": s.top_p if s.temperature > 0 else 1.0,
            "max_tokens": s.max_tokens + self.thinking_tokens,  # the answer keeps its own room after the thinking
            "structured_outputs": structured_outputs(req.grammar),
        }
        if self.thinking_tokens:
            body["thinking_token_budget"] = self.thinking_tokens
        if s.seed is not None:
            body["seed"] = s.seed
        body["chat_template_kwargs"] = {"enable_thinking": self.enable_thinking}
        return body

    def _one(self, req: Request) -> RawOutput:
        """Send one request, moving or retrying it as the module docstring says."""
        failed_on: dict[str, str] = {}  # servers that took this request and failed
        tries = 0  # retries on the same server (one server left, or 401/408/429)
        while True:
            url = self._pick(req, failed_on)
            try:
                out = self._post(url, req)
                self._strikes[url] = 0
                return out
            except _Retry as exc:
                tries += 1
                if tries >= self.retry.attempts:
                    raise exc.final(url) from None
                self._sleep(min(self.retry.max_after_s, exc.after_s) if exc.after_s is not None else self.retry.wait_s(tries))
            except _ServerDown as exc:
                others = [u for u in self.live() if u != url and u not in failed_on]
                if exc.reached:
                    failed_on[url] = str(exc)
                    if len(failed_on) >= 2:
                        raise RequestFailedError(
                            f"request {req.key!r} failed on {len(failed_on)} servers, which stay in rotation: "
                            + "; ".join(f"{u}: {w}" for u, w in failed_on.items())
                        ) from None
                    if others:  # try the request elsewhere; the server leaves only if it keeps failing
                        if self._strike(url):
                            self._take_out(url, f"{STRIKES} requests in a row failed, the last: {exc}")
                        continue
                if others or (not exc.reached and len(self.base_urls) > 1):
                    self._take_out(url, str(exc))  # unreachable: out until a probe finds it back
                    continue
                tries += 1  # the last server: retry it with backoff
                if tries >= self.retry.attempts:
                    raise EngineUnavailableError(f"{url}: {exc} (tried {tries} times)") from None
                failed_on.pop(url, None)
                self._sleep(self.retry.wait_s(tries))

    def _strike(self, url: str) -> bool:
        """Count a failed request against a server that took it; True once it has failed
        `STRIKES` different requests in a row (an answer in between clears the count)."""
        with self._pool_lock:
            self._strikes[url] = self._strikes.get(url, 0) + 1
            return self._strikes[url] >= STRIKES

    def _pick(self, req: Request, failed_on: dict[str, str]) -> str:
        """The server for this request now; when every server is out, wait for the next probe."""
        for attempt in range(self.retry.attempts + 1):
            live = [u for u in self.live() if u not in failed_on]
            if live:
                return self._server_for(req, live)
            wait_s = self.rotation.next_probe_in()
            if wait_s is None or attempt == self.retry.attempts:
                break
            self._sleep(min(self.retry.max_s, wait_s))
        raise EngineUnavailableError("every server is out of rotation: " + "; ".join(f"{u}: {w}" for u, w in self.down.items()))

    def _post(self, url: str, req: Request) -> RawOutput:
        started = time.perf_counter()
        try:
            resp = self.client.post(f"{url}/chat/completions", json=self._body(req))
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise _ServerDown(f"request failed ({type(exc).__name__}: {exc})", reached=False) from exc
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:  # dropped while it had it
            raise _ServerDown(f"request failed ({type(exc).__name__}: {exc})", reached=True) from exc
        except httpx.TimeoutException as exc:
            raise _ServerDown(f"timed out ({type(exc).__name__})", reached=True) from exc
        except httpx.HTTPError as exc:
            raise EngineUnavailableError(f"{url}: request failed ({exc})") from exc
        latency = time.perf_counter() - started
        if resp.status_code < 400:
            try:
                return _raw_output(resp.json(), latency)
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                text = self._mask(resp.text)  # masked before it is cut short (half a key would not match)
                raise EngineUnavailableError(f"{url}: malformed response body ({type(exc).__name__}: {exc}): {text[:200]!r}") from exc
        text = self._mask(resp.text)  # masked before it is cut short
        if resp.status_code in RETRY_STATUS:
            raise _Retry(resp.status_code, text[:200], retry_after_s(resp.headers.get("retry-after")))
        if resp.status_code >= 500:
            raise _ServerDown(f"HTTP {resp.status_code}: {text[:200]}", reached=True)
        m = _LEN_RE.search(text)
        if m or "maximum context length" in text or "longer than the maximum" in text:
            limit = int(m.group(1)) if m else (self.max_model_len or -1)
            got = int(m.group(2)) if m else -1
            raise ContextLengthError(got, limit)
        if "grammar" in text.lower() or "schema" in text.lower() or "structured" in text.lower():
            raise GrammarError(req.grammar.name, f"server refused it: {text[:300]}")
        raise EngineError(f"{url}: HTTP {resp.status_code}: {text[:300]}")

    def _generate_raw(self, requests: Sequence[Request]) -> list[RawOutput]:
        with masked_errors(self._mask):  # every request's error leaves through here
            if len(requests) == 1:  # a session's request: no pool at all
                return [self._one(requests[0])]
            with self._pool_lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=self.max_concurrency, thread_name_prefix="localfa-http")
                pool = self._pool
            return list(pool.map(self._one, requests))

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int | None:
        return None  # the server checks; a too-long prompt comes back as ContextLengthError

    def session(self) -> "HTTPSession":
        return HTTPSession(self)


class _ServerDown(Exception):
    """A server-side failure: refused or unreachable (`reached` False: the request never got
    there), or a server that took the request and failed (5xx, read timeout, dropped)."""

    def __init__(self, why: str, reached: bool) -> None:
        super().__init__(why)
        self.reached = reached


class _Retry(Exception):
    """401, 408 or 429: retried on the same server, after `after_s` when the server says so."""

    def __init__(self, status: int, text: str, after_s: float | None) -> None:
        super().__init__(f"HTTP {status}: {text}")
        self.status, self.text, self.after_s = status, text, after_s

    def final(self, url: str) -> EngineError:
        """The error once retries are spent: a refused key is final, the others transient."""
        if self.status == 401:
            return EngineError(f"{url}: HTTP 401 (the server refused the API key: check --api-key or LOCALFA_API_KEY): {self.text}")
        return EngineUnavailableError(f"{url}: HTTP {self.status} after retries: {self.text}")


def retry_after_s(value: str | None) -> float | None:
    """Seconds a `Retry-After` header asks for (delta seconds or an HTTP date), None if absent."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def share_out(total: int, weights: list[int]) -> list[int]:
    """`total` split in proportion to `weights` (largest remainders), summing exactly to it."""
    if sum(weights) <= 0:
        weights = [1] * len(weights)
    mass = sum(weights)
    exact = [total * w / mass for w in weights]
    out = [int(x) for x in exact]
    for i in sorted(range(len(weights)), key=lambda i: exact[i] - out[i], reverse=True)[: total - sum(out)]:
        out[i] += 1
    return out


def _raw_output(data: dict[str, Any], latency: float) -> RawOutput:
    choice = data["choices"][0]
    usage = data.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    text = choice["message"].get("content") or ""
    if not isinstance(text, str):
        raise TypeError(f"content is {type(text).__name__}, not text")
    return RawOutput(
        text=text,
        finish_reason=choice.get("finish_reason") or "stop",
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        cached_tokens=int(details.get("cached_tokens") or 0),
        latency_s=latency,
    )


class HTTPSession:
    """Each request is its own HTTP call on a thread pool; `wait` returns as soon as any is done.

    The server batches whatever is in flight (continuous batching), so a program's next request
    joins while the others are still decoding. Retry and validation are `generate([req])`'s.
    """

    def __init__(self, engine: OpenAIEngine) -> None:
        self.engine = engine
        self.pool = ThreadPoolExecutor(max_workers=engine.max_concurrency)
        self._next = 0
        self._futures: dict[Future, int] = {}

    def pending(self) -> int:
        return len(self._futures)

    def submit(self, requests: Sequence[Request]) -> list[int]:
        tickets = []
        for req in requests:
            ticket, self._next = self._next, self._next + 1
            self._futures[self.pool.submit(self.engine.generate, [req])] = ticket
            tickets.append(ticket)
        return tickets

    def wait(self) -> list[tuple[int, Any]]:
        if not self._futures:
            return []
        done, _ = wait(list(self._futures), return_when=FIRST_COMPLETED)
        out: list[tuple[int, Any]] = []
        for fut in done:
            ticket = self._futures.pop(fut)
            try:
                out.append((ticket, fut.result()[0]))
            except Exception as exc:  # noqa: BLE001 - one request's failure, never the sweep's
                out.append((ticket, as_engine_error(exc)))
        return sorted(out, key=lambda c: c[0])

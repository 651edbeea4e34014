"""The oracle backend: answers from each trace's labels through the methods' own policies.

`--engine oracle` (p = 1: always the honest answer) or `--engine oracle:p=0.8` (each call is
honest with probability p, else a plausible wrong answer of the same kind; `window=N` sets the
context window it reports, 32768 by default, the size localfa's methods are sized for).
`recognise=F` sets the share of a fault's distinctive shingles a block must show for the fault to
be recognised there (`localfa.oracle.fingerprint.RECOGNISE`, 0.5 by default). `noise=iid` (the default: independent errors) or `noise=real` (errors correlated within a trace
and biased like a real judge's; `spread=F` sets the per-trace difficulty spread, `length=L` how
much harder long runs are) picks the error model, defined in `localfa.oracle.noise`. Whether a call errs is drawn from (request seed, trace,
key), so a run is reproducible and independent of batching; the run seed moves it, as it moves a
model's sampling.

A rule never sees the trace: the engine turns each trace it is given (`attach_trace`; the runner
calls it for every job: API, sweeps, shards, Ray workers) into a `FaultFingerprint`
(`localfa.oracle.labels`) and hands a rule only the request and that fingerprint
(`localfa.oracle.policy.Ask`), finding it again by the request's `route` (the trace id). The
engine itself keeps the trace's id and length: the error model's per-trace difficulty is drawn from
them. Every honest answer is audited (`localfa.oracle.audit`): an id the prompt does not show, or a
recognition the prompt does not bear out, fails that request with an `OracleError` naming the rule
and the field. The audit is always on (`audit=False` exists for the audit's own test only).
Answers are serialised and validated against the request's grammar like any backend's text
(JSON answers also against the compacted schema every backend enforces). A request the oracle
cannot answer (no policy for its key, an unlabelled trace, a policy bug) fails that request only,
with an `OracleError` naming the key: the trace gets an error record, the sweep goes on. A run
labelled with no fault is answered "none" wherever the request admits it (`localfa.oracle.no_fault`).
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
from typing import Any, Callable, Sequence

from pydantic import BaseModel

from localfa.engine.base import BaseEngine, RawOutput
from localfa.engine.errors import EngineError, InvalidOutputError
from localfa.engine.types import Message, Request
from localfa.oracle.audit import audit_answer
from localfa.oracle.fingerprint import RECOGNISE, FaultFingerprint
from localfa.oracle.labels import fingerprint_of
from localfa.oracle.no_fault import none_value, sample_value
from localfa.oracle.noise import DEFAULT_SPREAD, NOISE_KINDS, NoiseModel
from localfa.oracle.policy import Ask, AskRandom
from localfa.oracle.registry import Policies, registered_policies
from localfa.tokens import approx_tokens

DEFAULT_WINDOW = 32768
MESSAGE_TOKENS = 8  # chat-template tokens a message adds (as localfa.methods.budget counts them)


class OracleError(EngineError):
    """The oracle cannot answer a request (see module doc); final, never retried."""


def parse_params(spec: str | None) -> dict[str, float | int | str]:
    """``oracle:p=0.8:window=16384:noise=real:spread=4:length=0.5:recognise=0.5`` -> {"p": 0.8,
    "window": 16384, "noise": "real", "spread": 4.0, "length": 0.5, "recognise": 0.5}, with clear errors."""
    params: dict[str, float | int | str] = {
        "p": 1.0,
        "window": DEFAULT_WINDOW,
        "noise": "iid",
        "spread": DEFAULT_SPREAD,
        "length": 0.0,
        "recognise": RECOGNISE,
    }
    for part in (spec or "").split(":")[1:]:
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in params:
            raise EngineError(
                f"--engine {spec}: {part!r} is not p=FLOAT, window=INT, noise=iid|real, spread=FLOAT, length=FLOAT or recognise=FLOAT"
            )
        if key == "noise":
            if value not in NOISE_KINDS:
                raise EngineError(f"--engine {spec}: noise must be one of {', '.join(NOISE_KINDS)}, got {value!r}")
            params[key] = value
            continue
        try:
            params[key] = int(value) if key == "window" else float(value)
        except ValueError:
            raise EngineError(f"--engine {spec}: {key}={value!r} is not a number") from None
    if not 0.0 <= float(params["p"]) <= 1.0:
        raise EngineError(f"--engine {spec}: p must be in [0, 1], got {params['p']}")
    if int(params["window"]) < 1024:
        raise EngineError(f"--engine {spec}: window must be at least 1024 tokens")
    if not float(params["spread"]) > 0:
        raise EngineError(f"--engine {spec}: spread must be positive, got {params['spread']}")
    if not float(params["length"]) >= 0:
        raise EngineError(f"--engine {spec}: length must be at least 0, got {params['length']}")
    if not 0.0 < float(params["recognise"]) <= 1.0:
        raise EngineError(f"--engine {spec}: recognise must be in (0, 1], got {params['recognise']}")
    return params


def serialise(value: Any) -> str:
    """A policy's answer as the text a model would have written (compact JSON, or the string)."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _draw(req: Request) -> random.Random:
    """The request's own random source: whether it errs, and which wrong answer it gives."""
    digest = hashlib.sha256(f"{req.sampling.seed}\x1f{req.route}\x1f{req.key}".encode()).digest()
    return AskRandom(int.from_bytes(digest[:8], "big"))


class OracleEngine(BaseEngine):
    """Knows each trace's labels; honest with probability `p` (see module doc)."""

    name = "oracle"
    computes_locally = False
    takes_params = True

    def __init__(
        self,
        p: float = 1.0,
        max_model_len: int | None = DEFAULT_WINDOW,
        policies: Policies | None = None,
        noise: str = "iid",
        spread: float = DEFAULT_SPREAD,
        audit: bool = True,
        length: float = 0.0,
        threshold: float = RECOGNISE,
    ) -> None:
        if not 0.0 <= p <= 1.0:
            raise EngineError(f"oracle: p must be in [0, 1], got {p}")
        try:
            self.noise = NoiseModel(noise, p, spread, length=length)
        except ValueError as exc:
            raise EngineError(f"oracle: {exc}") from None
        self.p = p
        self.max_model_len = max_model_len
        self.audit = audit
        self.threshold = threshold
        self.policies = policies or registered_policies()
        self.policy_fingerprint = self.policies.fingerprint()
        # iid keeps the identity it always had (cached responses stay valid); other models name theirs
        model = "" if noise == "iid" else f":noise={self.noise.describe()}"
        self.model_info = {
            "path": None,
            "sha256": None,
            "name": f"oracle(p={p:g}{'' if noise == 'iid' else ', noise=' + noise})",
            "identity": f"oracle:p={p}:window={max_model_len}{model}{'' if threshold == RECOGNISE else f':recognise={threshold:g}'}"
            f":policies={self.policy_fingerprint}",
        }
        self._traces: dict[str, tuple[FaultFingerprint | None, int]] = {}  # trace id -> (fingerprint, steps)
        self._lock = threading.Lock()
        self.answered = 0
        self.wrong = 0

    # ---- the trace each request runs on --------------------------------------------------------
    def attach_trace(self, trace: Any) -> None:
        """Keep `trace`'s fingerprint and length (never the trace itself: no rule can reach it)."""
        entry = (fingerprint_of(trace), len(trace.steps))
        with self._lock:
            self._traces[trace.id] = entry

    # ---- answering -------------------------------------------------------------------------------
    def answer(self, req: Request) -> tuple[str, bool]:
        """(answer text, whether it is a wrong answer) for one request."""
        entry = self._traces.get(req.route)
        if entry is None:
            raise OracleError(f"request {req.key!r}: the oracle was not given trace {req.route!r} (Engine.attach_trace)")
        fingerprint, n_steps = entry
        if fingerprint is None:
            raise OracleError(f"request {req.key!r}: trace {req.route} has no labels: the oracle answers only labelled traces")
        ask = Ask(req, fingerprint, _draw(req), self.noise, self.threshold)
        wrong = ask.rng.random() >= self.noise.honesty(str(req.route), n_steps)
        none = none_value(req.grammar) if fingerprint.no_fault else None
        if none is not None:  # a run labelled with no fault, asked a question that admits "none" (oracle.no_fault)
            method, kind = "no_fault", "none"
            value: Any = (sample_value(req.grammar, ask.rng) or none) if wrong else none
        else:
            try:
                method, rule = self.policies.rule_for(ask.key)
            except LookupError as exc:
                raise OracleError(str(exc)) from None
            kind = rule.kind
            try:
                value = (rule.wrong if wrong else rule.honest)(ask)
                if self.audit and not wrong:
                    audit_answer(ask, value)
            except Exception as exc:  # noqa: BLE001 - a policy bug ends that trace only, with its name
                raise OracleError(
                    f"oracle policy of {method}, rule {rule.kind!r} ({'wrong' if wrong else 'honest'} answer), "
                    f"failed on request {req.key!r} of trace {req.route}: {type(exc).__name__}: {exc}"
                ) from exc
        text = serialise(value)
        if req.grammar.kind == "json":  # the compacted schema every backend enforces, not only the model
            try:
                error = req.grammar.violation(json.loads(text))
            except json.JSONDecodeError as exc:
                raise InvalidOutputError(req.grammar.name, text, f"not JSON ({exc})") from exc
            if error is not None:
                raise InvalidOutputError(req.grammar.name, text, f"{error} (oracle policy of {method}, rule {kind!r})")
        return text, wrong

    def _score_raw(self, requests: Sequence[Request]) -> list[RawOutput]:
        """Score requests (prism's prefill signals) get the documented stand-in
        (`localfa.engine.scoring.stand_in_answer`): the segments where the fault's words are
        recognised (`Ask.recognised`, by the words the prompt shows, never by an id) are the
        surprising ones that later segments attend to; every other number is blind. No error
        model applies: a score is a measurement, not an answer."""
        from localfa.engine.scoring import stand_in_outputs

        def salient(req: Request, content: str, spans: Sequence[tuple[int, int]]) -> list[bool]:
            entry = self._traces.get(req.route)
            if entry is None or entry[0] is None:
                raise OracleError(f"request {req.key!r}: the oracle scores only labelled traces it was given ({req.route!r})")
            ask = Ask(req, entry[0], _draw(req), self.noise, self.threshold)
            found = set(ask.recognised({s: content[a:b] for s, (a, b) in enumerate(spans)}))
            return [s in found for s in range(len(spans))]

        return stand_in_outputs(requests, salient)

    def _generate_raw(self, requests: Sequence[Request]) -> list[RawOutput]:
        outs = []
        for req in requests:
            text, wrong = self.answer(req)
            with self._lock:
                self.answered += 1
                self.wrong += int(wrong)
            outs.append(RawOutput(text, "stop", self.count_prompt_tokens(req.messages), self.count_tokens(text), 0, 0.0))
        return outs

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int:
        return sum(approx_tokens(m.get("content", "")) + MESSAGE_TOKENS for m in messages)

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "max_model_len": self.max_model_len,
            "p": self.p,
            "noise": self.noise.kind,
            "spread": self.noise.spread if self.noise.real else None,
            "length": self.noise.length if self.noise.real else None,
            "policies": {name: target for name, (target, _) in sorted(self.policies.by_method.items())},
            "policy_fingerprint": self.policy_fingerprint,
            "recognise": self.threshold,
        }

    @classmethod
    def create(cls, options: Any, say: Callable[[str], None], named: bool = True) -> "OracleEngine":
        params = parse_params(options.engine)
        window = int(options.max_model_len or params["window"])
        say(
            f"localfa: engine oracle (answers from each trace's labels, honest with p={params['p']}, "
            f"noise={params['noise']}; no model), window {window}"
        )
        return cls(
            float(params["p"]),
            window,
            noise=str(params["noise"]),
            spread=float(params["spread"]),
            length=float(params["length"]),
            threshold=float(params["recognise"]),
        )

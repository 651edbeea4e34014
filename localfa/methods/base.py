"""How a method plugs in: a generator that yields batches of requests and returns a Diagnosis.

A method never calls the engine itself. It yields every request it can send at once (SAFARI's
claim checks, a baseline's single call, FALAT's window summaries...) and receives the responses
in the same order. The runner interleaves many such programs, one per trace, so the engine sees
full batches, and request seeds come from (run seed, trace id, call key), never from timing.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generator, Protocol, Sequence, TypeVar

from localfa.diagnosis import Diagnosis
from localfa.engine.grammar import Grammar
from localfa.engine.types import Message, Request, Response, Sampling, derive_seed
from localfa.methods.options import MethodOptionError, build_options
from localfa.traces.model import Trace

T = TypeVar("T")
MEMBER_SEP = "|"  # ends an ensemble member's key prefix: "vote.0|falat/prior"


def base_key(key: str) -> str:
    """A request key without any ensemble member prefixes ("vote.0|cascade.1|aao" -> "aao")."""
    return key.rsplit(MEMBER_SEP, 1)[-1]


# A stage of a method that talks to the engine and returns a T (use with `yield from`).
Calls = Generator[list[Request], list[Response], T]
Program = Calls[Diagnosis]


@dataclass
class MethodContext:
    """What one method run on one trace knows: the trace, the run seed and its options."""

    trace: Trace
    seed: int = 0
    budget: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    count_tokens: Any = None  # callable(str) -> int from the engine's tokenizer
    count_tokens_many: Any = None  # callable(list[str]) -> list[int]: one engine call for many texts
    token_unit: Any = None  # callable() -> str: what the counts are ("tokens", "chars/4", ...)
    count_prompt_tokens: Any = None  # callable(messages) -> int | None: the prompt after the chat template
    max_model_len: int | None = None  # the engine's context window, when it has one
    # Does the engine count in this process (a tokenizer here, no call to a server)? Then many
    # small counts cost nothing more than one large one.
    counts_in_process: bool = False
    # May the method answer "no decisive error" (`localfa.methods.none_answer`)? Set by the runner
    # from the method's `allow_none` and the trace (`allows_none`); None reads as no.
    allow_none: bool | None = None
    # Set by ensembles for their members ("vote.1|"): keys (so seeds) stay distinct per member.
    key_prefix: str = ""

    def request(self, key: str, messages: Sequence[Message], grammar: Grammar, sampling: Sampling) -> Request:
        """A request whose seed derives from (run seed, trace id, call key)."""
        key = self.key_prefix + key
        seeded = sampling.with_(seed=derive_seed(self.seed, self.trace.id, key))
        return Request(tuple(messages), grammar, seeded, key=key, route=self.trace.id)

    def diagnosis(self, method: str, **fields: Any) -> Diagnosis:
        """A Diagnosis pre-filled with this run's identity; the agent comes from the trace."""
        step = fields.get("step")
        if step is not None and "agent" not in fields and 0 <= step < len(self.trace.steps):
            fields["agent"] = self.trace.agent_at(step)
        labels = self.trace.labels
        if labels is not None:
            details = dict(fields.pop("details", None) or {})
            details.setdefault("label", labels.model_dump(mode="json"))
            fields["details"] = details
        return Diagnosis(
            trace=self.trace.id,
            source=self.trace.source,
            subset=self.trace.subset,
            method=method,
            seed=self.seed,
            budget=self.budget,
            **fields,
        )


class Method(Protocol):
    """Every method: a name, its options, and a program per trace."""

    @property
    def name(self) -> str: ...

    def run(self, ctx: MethodContext) -> Program: ...

    def describe(self) -> dict[str, Any]: ...


class BaseMethod:
    """What every method shares: `name`, an `Options` dataclass, `describe()` for manifests.

    A method subclasses this, sets `name` and `Options` (a dataclass whose `__post_init__` raises
    ValueError on a bad value) and writes `run`. The registry builds `Options` from a spec string
    (``falat:window=3``) or keyword arguments through one validator, then calls `cls(options)`.
    """

    name: ClassVar[str] = ""
    Options: ClassVar[type] = type("NoOptions", (), {})
    # "module:function" that renders this method's own path in `localfa view` (None: generic).
    view_path: ClassVar[str | None] = None
    # "module:NAME" of this method's oracle policy (`localfa.oracle.policy.Policy`): how the oracle
    # engine answers each of its request kinds (None: the method sends no request).
    oracle_policy: ClassVar[str | None] = None
    # "module:NAME" of this method's named mutants (`localfa.oracle.mutants.Mutant`): one break per
    # stage or rule that the honest oracle must catch (scripts/bench_ceiling.py --mutants).
    oracle_mutants: ClassVar[str | None] = None
    # Whether the method scores prompts (`Request.score`: log-probabilities, attention) rather than
    # generating: only engines with the model's probabilities can serve it (not an HTTP server).
    scores_prompts: ClassVar[bool] = False
    # Whether the method asks the model at all (False: a floor that answers from the trace alone).
    calls_model: ClassVar[bool] = True

    def __init__(self, options: Any = None, given: dict[str, Any] | None = None, allow_none: bool | None = None) -> None:
        self.options = options if options is not None else self.Options()
        # ``NAME:allow_none=true|false`` (every method: `localfa.methods.none_answer`); None: the
        # default for the trace (`allows_none`).
        self.allow_none = allow_none
        # The options the user's spec named: a profile's table never overrides these.
        self.given: dict[str, Any] = dict(given or {})
        self.from_profile: dict[str, Any] = {}  # option values a profile set (see `for_model`)
        self.profile: str | None = None
        self._for_model: dict[Any, "BaseMethod"] = {}

    def for_model(self, defaults: Any) -> "BaseMethod":
        """This method with a profile's option values for its model (`MethodDefaults`) applied
        under the options the user gave; itself when the profile sets nothing for it."""
        table = {k: v for k, v in defaults.for_method(self.name).items() if k not in self.given}
        if not table:
            return self
        # JSON, not a tuple of items: a table may hold a nested table (`[methods.safari.limits]`).
        key = (defaults.profile, json.dumps(table, sort_keys=True, default=str))
        if key not in self._for_model:
            try:
                options = build_options(self.name, type(self).Options, {**self.given, **table})
            except MethodOptionError as exc:
                raise MethodOptionError(f"profile {defaults.profile} [methods.{self.name}]: {exc}") from None
            resolved = type(self)(options, self.given, self.allow_none)
            resolved.from_profile, resolved.profile = table, defaults.profile
            self._for_model[key] = resolved
        return self._for_model[key]

    def options_record(self) -> dict[str, Any]:
        """What a record says about its options: every value, and which a profile set. Built
        once per method (a sweep asks for it per unit, beside a waiting engine); records only
        serialise it."""
        record = self.__dict__.get("_options_record")
        if record is None:
            record = self._options_record = {"values": self.describe(), "profile": self.profile, "from_profile": dict(self.from_profile)}
        return record

    def run(self, ctx: MethodContext) -> Program:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """Every setting, defaults included (recorded in the run manifest)."""
        opts = self.options
        return dataclasses.asdict(opts) if dataclasses.is_dataclass(opts) and not isinstance(opts, type) else {}

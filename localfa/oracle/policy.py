"""The oracle policy protocol: how a method tells the oracle engine what a careful model answers.

A method owns one `Policy`, in a module beside it, named by its class's `oracle_policy` ClassVar
(``oracle_policy = "localfa.methods.falat.oracle:POLICY"``, the way `view_path` names its view
renderer). A policy is one `Rule` per request kind of the method:

- `pattern`: a regex full-matched against the request's key without ensemble prefixes
  (`base_key`), e.g. ``r"falat/pair/\\d+/\\d+"``. Every key a method sends must match exactly one
  rule of one policy; a key no rule matches is that trace's error record, naming the key.
- `honest(ask)`: what a careful model that knows the trace's labels answers, by the definitions
  the prompt itself gives (a step unrelated to the fault is unrelated; a quote is verbatim from
  the trace's steps). It names only what the prompt shows: a step the method hid from the prompt
  cannot be the answer, so a window that drops the labelled step shows up as a miss at p = 1.
- `wrong(ask)`: a plausible wrong answer of the same kind (a different step nearby, the opposite
  verdict, another label, a claim marked supported), drawn with `ask.rng` (seeded per request).
  A wrong *step* is drawn with `ask.wrong_step(pool)` (or `nearby_other(pool, ask.mistake_step,
  ask.rng)`, the same thing): under ``noise=iid`` a step within 3 of the labelled one, under
  ``noise=real`` a step drawn with the realistic weights of `localfa.oracle.noise` (earlier steps,
  the labelled agent's first and other steps, the adjacent steps, the step that adopted the error,
  the last step). A wrong verdict is `other_choice(grammar, value, ask.rng)`.

What a prompt shows is read by `ask.shown_step_ids()` (every display format the methods use); the
engine's audit (`OracleEngine(audit=True)`, `LOCALFA_ORACLE_AUDIT=1`) fails an honest answer that
names a step id the prompt does not show (`localfa.oracle.audit`).

Both read only the `Ask`: the request (key, messages, grammar) and the trace (its labels, and its
steps' text for verbatim quotes); never the method's internal state. They return a value the
grammar admits: a dict, list or pydantic model for a JSON grammar (serialised compactly), a
string for a choice, regex or CFG grammar. The engine validates it like any backend's output.

A tiny policy (a method whose one request ``mine/pick`` asks for ``{"step": N}``)::

    def _pick(ask: Ask) -> dict:
        return {"step": nearest(ask.shown_steps(), ask.mistake_step)}

    def _pick_wrong(ask: Ask) -> dict:
        return {"step": nearby_other(ask.shown_steps(), ask.mistake_step, ask.rng)}

    POLICY = Policy([Rule("pick", r"mine/pick", _pick, _pick_wrong, "the labelled step", "a step nearby")])
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Sequence

from localfa.engine.grammar import Grammar
from localfa.engine.types import Request
from localfa.methods.base import base_key
from localfa.methods.fencing import defuse, fenced_blocks, neutralise
from localfa.methods.names import aliases_in_prompt
from localfa.oracle.noise import IID, NoiseModel, realistic_wrong_step
from localfa.traces.model import Labels, Trace, normalize_agent

_STEP_LABEL = re.compile(r"STEP (\d+)")
_INT = re.compile(r"\d+")
# Every way a method's prompt shows a step (or a span of steps), for `Ask.shown_step_ids`:
_SHOWN_BLOCK = re.compile(r"(?:STEP|PASSAGE) (\d+)")  # fenced <<<STEP i>>> / DRIFT's <<<PASSAGE i>>>
_LINE_VIEW = re.compile(r"^\s*\d+ \(step (\d+)\)\|", re.M)  # SAFARI's numbered lines: `  541 (step 71)| ...`
_SPAN_HEADER = re.compile(r"^Span (\d+) \(steps? (\d+)(?:-(\d+))?\):$", re.M)  # DRIFT's span labels
_CLAIM_HEADER = re.compile(r"introduced in span (\d+), relied on from span (\d+|-), used in spans ([\d, ]+|none recorded)")
_LEDGER_LINE = re.compile(r"\| introduced (\d+), relied on from (\d+|-), used in ([\d,]+|-) \|")
_STM_STEP = re.compile(r'"step_id": ?(\d+)')


class AskRandom(random.Random):
    """A request's random source that knows its `Ask`, so `nearby_other(pool, target, ask.rng)`
    can follow the engine's error model without every policy passing the ask."""

    ask: "Ask | None" = None


class PolicyError(ValueError):
    """A policy cannot answer this request (no labels, nothing it may name): names the key."""


@dataclass
class Ask:
    """One request as a policy sees it: the request itself, the trace it runs on, and a random
    source seeded by the request (use it only to draw wrong answers)."""

    request: Request
    trace: Trace
    rng: random.Random
    noise: NoiseModel = IID
    key: str = field(init=False)

    def __post_init__(self) -> None:
        self.key = base_key(self.request.key)
        if isinstance(self.rng, AskRandom):
            self.rng.ask = self

    # ---- the request -----------------------------------------------------------------------
    @property
    def grammar(self) -> Grammar:
        return self.request.grammar

    @cached_property
    def prompt(self) -> str:
        """The last user message (where every method puts its question)."""
        users = [m.get("content", "") for m in self.request.messages if m.get("role") == "user"]
        return users[-1] if users else ""

    @cached_property
    def text(self) -> str:
        """Every message, in order (a multi-turn request spreads what it shows over several)."""
        return "\n".join(m.get("content", "") for m in self.request.messages)

    def key_ints(self) -> list[int]:
        """The integers in the key: ``sbs/step/7`` -> [7], ``falat/pair/3/5`` -> [3, 5]."""
        return [int(x) for x in _INT.findall(self.key)]

    def shown_steps(self, text: str | None = None) -> dict[int, str]:
        """Steps whose text the prompt shows in a fenced ``<<<STEP i>>>`` block: index -> text."""
        out: dict[int, str] = {}
        for label, body in fenced_blocks(self.prompt if text is None else text):
            m = _STEP_LABEL.fullmatch(label)
            if m:
                out[int(m.group(1))] = body
        return out

    @cached_property
    def shown_ids(self) -> frozenset[int]:
        """Every step or span id the request shows, in any display format the methods use, over
        all its messages: fenced ``<<<STEP i>>>`` and ``<<<PASSAGE i>>>`` blocks (every method;
        DRIFT's passages of cut steps), SAFARI's numbered line view (``541 (step 71)| ...``) and
        the step ids its STM block carries, DRIFT's span headers (``Span 3 (steps 4-5):``: the
        span id and its steps) and the spans its ledger and claim headers name. Step and span ids
        share one set: an answer's span field is checked against the same set."""
        ids: set[int] = set()
        for label, body in fenced_blocks(self.text):
            m = _SHOWN_BLOCK.fullmatch(label)
            if m:
                ids.add(int(m.group(1)))
            elif label == "STM":
                ids.update(int(x) for x in _STM_STEP.findall(body))
            elif label == "LEDGER":
                for intro, relied, uses in _LEDGER_LINE.findall(body):
                    ids.update(int(x) for x in _INT.findall(f"{intro} {relied} {uses}"))
        ids.update(int(x) for x in _LINE_VIEW.findall(self.text))
        for span, first, last in _SPAN_HEADER.findall(self.text):
            ids.add(int(span))
            ids.update(range(int(first), int(last or first) + 1))
        for intro, relied, uses in _CLAIM_HEADER.findall(self.text):
            ids.update(int(x) for x in _INT.findall(f"{intro} {relied} {uses}"))
        return frozenset(ids)

    def shown_step_ids(self) -> frozenset[int]:
        """Step (and span) ids the request shows (`shown_ids`): the only ids an honest answer names."""
        return self.shown_ids

    # ---- the labels ------------------------------------------------------------------------
    @property
    def labels(self) -> Labels:
        if self.trace.labels is None:
            raise PolicyError(f"trace {self.trace.id} has no labels: the oracle answers only labelled traces")
        return self.trace.labels

    @property
    def mistake_step(self) -> int:
        step = self.labels.mistake_step
        if step is None:
            raise PolicyError(f"trace {self.trace.id} has no labelled mistake step")
        return step

    @property
    def mistake_agent(self) -> str:
        """The labelled agent in the trace's own spelling (else the agent at the labelled step)."""
        name = self.labels.mistake_agent
        resolved = self.trace.resolve_agent(name) if name else None
        return resolved or self.trace.agent_at(self.mistake_step)

    @cached_property
    def fault_steps(self) -> list[int]:
        """Every labelled faulty step: the decisive one, `fault_steps` and the `fault_spans`."""
        lab = self.labels
        steps = set(lab.fault_steps) | {self.mistake_step}
        for lo, hi in lab.fault_spans:
            steps.update(range(lo, hi + 1))
        return sorted(steps)

    def is_fault(self, step: int) -> bool:
        return step in self.fault_steps

    def blind_step(self, pool: Sequence[int] | dict[int, Any]) -> int:
        """The step an honest model names when its prompt does not show the fault: a guess among
        `pool` that does not use the labels (uniform, seeded by the request)."""
        options = sorted(pool)
        if not options:
            raise PolicyError(f"request {self.key!r}: no step to choose from")
        return self.rng.choice(options)

    def wrong_step(self, pool: Sequence[int] | dict[int, Any]) -> int:
        """A wrong step among `pool` (never the labelled one unless it is the only one), drawn as
        the engine's error model says (`nearby_other`)."""
        return nearby_other(pool, self.mistake_step, self.rng)

    def agent_choice(self, choices: Sequence[str], step: int | None = None) -> str:
        """The choice that names the labelled agent (or, with `step`, whoever acted there), as
        the trace spells it or as a prompt shows it (`neutralise`d, or an alias whose original the
        prompt's own block holds: `localfa.methods.names.aliases_in_prompt`)."""
        name = self.mistake_agent if step is None else self.trace.agent_at(step)
        target = normalize_agent(name)
        shown = normalize_agent(neutralise(name))
        fenced = normalize_agent(defuse(name))
        aliases = aliases_in_prompt(self.text)
        for c in choices:
            if normalize_agent(aliases.get(c, c)) in (target, shown, fenced):
                return c
        raise PolicyError(f"request {self.key!r}: no agent choice names {target!r} (choices: {list(choices)})")


Answer = Callable[[Ask], Any]


@dataclass(frozen=True)
class Rule:
    """One request kind: the keys it answers, the honest and the wrong answer, and (for the
    README's table) what each says in words."""

    kind: str
    pattern: str
    honest: Answer
    wrong: Answer
    says: str = ""
    wrong_says: str = ""

    def matches(self, key: str) -> bool:
        return re.fullmatch(self.pattern, key) is not None


@dataclass(frozen=True)
class Policy:
    """A method's rules, one per request kind it sends, and optionally `dropped_at(details,
    step)`: from a record's details (label and options removed), in words, the stage where the
    labelled step dropped out (scripts/bench_ceiling.py prints it for each miss at p = 1; without
    it a generic reading of the details is used)."""

    rules: tuple[Rule, ...]
    dropped_at: Callable[[dict[str, Any], int], str] | None = None

    def __init__(self, rules: Sequence[Rule], dropped_at: Callable[[dict[str, Any], int], str] | None = None) -> None:
        object.__setattr__(self, "rules", tuple(rules))
        object.__setattr__(self, "dropped_at", dropped_at)

    def rule_for(self, key: str) -> Rule | None:
        for rule in self.rules:
            if rule.matches(key):
                return rule
        return None


# ---- helpers for writing rules ---------------------------------------------------------------


def nearest(candidates: Sequence[int] | dict[int, Any], target: int) -> int:
    """The candidate closest to `target` (ties: the earlier one)."""
    pool = sorted(candidates)
    if not pool:
        raise PolicyError("no step to choose from")
    return min(pool, key=lambda c: (abs(c - target), c))


def nearby_other(candidates: Sequence[int] | dict[int, Any], target: int, rng: random.Random, spread: int = 3) -> int:
    """A candidate other than `target`, within `spread` of it where one is (else any other);
    `target` itself only when it is the only candidate. Under ``noise=real`` (an `AskRandom` whose
    ask runs under that model), a wrong answer for the labelled step is drawn with the realistic
    weights instead (`localfa.oracle.noise.realistic_wrong_step`)."""
    ask = getattr(rng, "ask", None)
    if ask is not None and ask.noise.real and ask.trace.labels is not None and target == ask.trace.labels.mistake_step:
        return realistic_wrong_step(ask.trace, target, list(candidates), rng)
    pool = sorted(c for c in candidates if c != target)
    if not pool:
        return target
    near = [c for c in pool if abs(c - target) <= spread]
    return rng.choice(near or pool)


def other_choice(grammar: Grammar, value: str, rng: random.Random) -> str:
    """Another option of a choice grammar (the opposite verdict of a yes/no)."""
    options = [o for o in grammar.spec if o != value]
    return rng.choice(options) if options else value


def schema_field(grammar: Grammar, name: str) -> dict[str, Any]:
    """The JSON schema of property `name` of a JSON grammar (references resolved)."""
    if grammar.kind != "json":
        raise PolicyError(f"grammar {grammar.name!r} is {grammar.kind}, not json")
    node = grammar.spec.get("properties", {}).get(name)
    if node is None:
        raise PolicyError(f"grammar {grammar.name!r} has no property {name!r}")
    return resolve(node, grammar.spec)


def resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """`node` with its ``$ref`` followed inside `root`."""
    while "$ref" in node:
        target: Any = root
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def node_choices(node: dict[str, Any], root: dict[str, Any] | None = None) -> list[Any]:
    """The values schema `node` lists (its ``enum``, ``const`` or ``anyOf``/``oneOf`` of either);
    `root` resolves ``$ref`` in the alternatives (the grammar's whole schema)."""
    if "enum" in node:
        return list(node["enum"])
    if "const" in node:
        return [node["const"]]
    out: list[Any] = []
    for alt in node.get("anyOf", []) + node.get("oneOf", []):
        out.extend(node_choices(resolve(alt, root or {}), root))
    return out


def node_ints(node: dict[str, Any], root: dict[str, Any] | None = None) -> list[int]:
    """Every integer schema `node` admits, ascending: its listed values (``enum``, ``const``), the
    union over its ``anyOf``/``oneOf`` alternatives, else its ``minimum``..``maximum`` range (a
    null alternative or a node without bounds adds none). An integer with a minimum but no
    maximum is a `PolicyError`: a careful answer needs to know the last value it may name."""
    if "enum" in node or "const" in node:
        return sorted({v for v in node_choices(node) if isinstance(v, int) and not isinstance(v, bool)})
    alts = node.get("anyOf", []) + node.get("oneOf", [])
    if alts:
        return sorted({i for alt in alts for i in node_ints(resolve(alt, root or {}), root)})
    if "maximum" not in node:
        if "minimum" in node:
            raise PolicyError(f"an integer schema with no maximum: {node}")
        return []
    return list(range(int(node.get("minimum", 0)), int(node["maximum"]) + 1))


def clip_to(node: dict[str, Any], text: str) -> str:
    """`text` cut to the ``maxLength`` of string schema `node` (as it is when the node sets none)."""
    limit = node.get("maxLength")
    return text if limit is None else clip(text, int(limit))


def schema_choices(grammar: Grammar, name: str) -> list[Any]:
    """The values property `name` admits (`node_choices` of its schema)."""
    return node_choices(schema_field(grammar, name), grammar.spec)


def schema_ints(grammar: Grammar, name: str) -> list[int]:
    """Every integer property `name` admits (`node_ints` of its schema)."""
    return node_ints(schema_field(grammar, name), grammar.spec)


def max_length(grammar: Grammar, name: str, default: int = 200) -> int:
    """The ``maxLength`` of string property `name` (`default` when it has none)."""
    return int(schema_field(grammar, name).get("maxLength", default))


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters (answers must respect the grammar's bounds)."""
    return text if len(text) <= limit else text[: max(0, limit)]

"""The oracle policy protocol: how a method tells the oracle engine what a careful model answers.

A method owns one `Policy`, in a module beside it, named by its class's `oracle_policy` ClassVar
(``oracle_policy = "localfa.methods.falat.oracle:POLICY"``, the way `view_path` names its view
renderer). A policy is one `Rule` per request kind of the method:

- `pattern`: a regex full-matched against the request's key without ensemble prefixes
  (`base_key`), e.g. ``r"falat/pair/\\d+/\\d+"``. Every key a method sends must match exactly one
  rule of one policy; a key no rule matches is that trace's error record, naming the key.
- `honest(ask)`: what a careful model answers, by the definitions the prompt itself gives.
- `wrong(ask)`: a plausible wrong answer of the same kind.

**A rule cannot read the answer key.** It is handed an `Ask`: the request (key, messages, grammar),
the trace's `FaultFingerprint` (the fault's own distinctive words, the labelled agent's name, the
labelled categories; `localfa.oracle.fingerprint`), a random source seeded by the request, and the
error model. No trace, no step id, no position, no other step's text. So:

- the fault is recognised only where the prompt carries its words (`Ask.recognised`,
  `Ask.fault_id`: the id the prompt shows beside text holding at least `RECOGNISE` of the fault's
  shingles; a quote shows it with `Ask.quotes_fault`);
- everything else is decided from the prompt alone: a blind answer (nothing recognised) is
  `Ask.blind_step`, a choice among the ids the prompt shows seeded by the request's text;
- a wrong step is `Ask.wrong_step(pool, honest)`, drawn by the error model from what the prompt
  shows (`localfa.oracle.noise.PromptView`); a wrong verdict is `other_choice(grammar, value, rng)`.

Policy modules import nothing from `localfa.traces` nor from the methods' own machinery
(tests/architecture/test_oracle_blind.py): prompt formats are read by `localfa.oracle.prompt`.
Every honest answer is audited (`localfa.oracle.audit`): an id the prompt does not show, or a
recognition the prompt does not bear out, fails that request loudly with the rule's name.

Rules return a value the grammar admits: a dict, list or pydantic model for a JSON grammar
(serialised compactly), a string for a choice, regex or CFG grammar. The engine validates it like
any backend's output.

A tiny policy (a method whose one request ``mine/pick`` asks for ``{"step": N}``)::

    def _pick(ask: Ask) -> dict:
        shown = sorted(ask.shown_steps())
        found = ask.fault_id()
        return {"step": found if found is not None else ask.blind_step(shown)}

    def _pick_wrong(ask: Ask) -> dict:
        return {"step": ask.wrong_step(sorted(ask.shown_steps()), honest=_pick(ask)["step"])}

    POLICY = Policy([Rule("pick", r"mine/pick", _pick, _pick_wrong, "the step shown with the fault's words", "another shown step")])
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Sequence, TypeVar

from localfa.engine.grammar import Grammar
from localfa.engine.types import Request
from localfa.methods.base import base_key
from localfa.methods.fencing import defuse, neutralise
from localfa.methods.names import aliases_in_prompt
from localfa.naming import normalize_agent
from localfa.oracle import prompt as prompt_reader
from localfa.oracle.fingerprint import RECOGNISE, FaultFingerprint
from localfa.oracle.noise import IID, NoiseModel, PromptView, iid_wrong_step, realistic_wrong_step

_INT = re.compile(r"\d+")
T = TypeVar("T")


class AskRandom(random.Random):
    """A request's random source (kept as a type for the engine's seeding)."""


class PolicyError(ValueError):
    """A policy cannot answer this request (nothing it may name, a prompt it cannot read): names the key."""


@dataclass
class Ask:
    """One request as a policy sees it (module doc): the request, the fault's fingerprint, a
    random source seeded by the request (use it only to draw wrong answers) and the error model.
    It records what it recognised, for the audit."""

    request: Request
    fingerprint: FaultFingerprint
    rng: random.Random
    noise: NoiseModel = IID
    threshold: float = RECOGNISE
    key: str = field(init=False)
    recognitions: list[int] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.key = base_key(self.request.key)

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
        """Step id -> the text the prompt (or `text`) shows of it (`localfa.oracle.prompt.units`)."""
        return {u.id: u.text for u in prompt_reader.units(self.prompt if text is None else text)}

    @cached_property
    def shown_ids(self) -> frozenset[int]:
        """Every step or span id the request shows, over all its messages (`prompt.shown_ids`)."""
        return prompt_reader.shown_ids(self.text)

    def shown_step_ids(self) -> frozenset[int]:
        return self.shown_ids

    def agents(self, text: str | None = None) -> dict[int, str]:
        """Step id -> the agent the prompt (or `text`; default: every message) shows beside it."""
        return prompt_reader.agents_shown(self.text if text is None else text)

    @property
    def no_fault(self) -> bool:
        """The run is labelled with no fault: the right final answer is "none" (`localfa.oracle.no_fault`)."""
        return self.fingerprint.no_fault

    def fenced(self, label: str, text: str | None = None) -> str:
        """The prompt's block `label` (``TASK``, ``RESULT``), or ''."""
        return prompt_reader.fenced(self.prompt if text is None else text, label)

    # ---- recognising the fault by its words -------------------------------------------------------
    def recognised(self, shown: dict[int, str] | None = None) -> list[int]:
        """The ids whose shown text carries a labelled fault, ascending (`shown`: the prompt's
        own units by default). A fault whose words are not its own (nothing distinctive) is
        recognised at the first id that carries them only, as a careful reader would."""
        shown = self.shown_steps() if shown is None else shown
        found: set[int] = set()
        for fault in self.fingerprint.faults:
            carrying = [i for i in sorted(shown) if fault.covered_by(shown[i], self.threshold)]
            found.update(carrying if fault.distinctive else carrying[:1])
        ids = sorted(found)
        self.recognitions.extend(ids)
        return ids

    def fault_id(self, shown: dict[int, str] | None = None) -> int | None:
        """The id the prompt shows beside the decisive fault's words (else beside any labelled
        fault's), None where it carries none."""
        shown = self.shown_steps() if shown is None else shown
        decisive = self.fingerprint.decisive
        if decisive is not None:
            carrying = [i for i in sorted(shown) if decisive.covered_by(shown[i], self.threshold)]
            if carrying:
                self.recognitions.append(carrying[0])
                return carrying[0]
        others = self.recognised(shown)
        return others[0] if others else None

    def carries_fault(self, text: str) -> bool:
        """Whether `text` (a block, a result) carries a labelled fault."""
        return self.fingerprint.carried_by(text, self.threshold)

    def quotes_fault(self, text: str) -> bool:
        """Whether a quote (evidence, a claim, a summary) shows a labelled fault verbatim."""
        return self.fingerprint.quoted_in(text)

    def quote_of_fault(self, text: str, max_chars: int) -> str:
        """The verbatim piece of `text` that shows the fault best ('' where none)."""
        return self.fingerprint.best_quote(text, max_chars)

    # ---- answers that do not recognise -------------------------------------------------------------
    def blind_step(self, pool: Sequence[int] | dict[int, Any]) -> int:
        """What an honest model names when its prompt does not show the fault: a choice among `pool`
        seeded by the request's text (never by the labels)."""
        return self.blind_choice(sorted(pool))

    def blind_choice(self, options: Sequence[T], salt: str = "") -> T:
        """One of `options`, chosen by a hash of the request's text (and `salt`): the same prompt
        always gets the same guess, and nothing but the prompt moves it."""
        if not options:
            raise PolicyError(f"request {self.key!r}: nothing to choose from")
        digest = hashlib.sha256(f"blind\x1f{salt}\x1f{self.key}\x1f{self.text}".encode()).digest()
        return options[int.from_bytes(digest[:8], "big") % len(options)]

    def view(self, shown: dict[int, str] | None = None) -> PromptView:
        """What the error model may know of this request (`localfa.oracle.noise.PromptView`)."""
        shown = self.shown_steps() if shown is None else shown
        return PromptView(tuple(sorted(shown)), self.fault_id(shown), self.agents(), self.fingerprint.agent)

    def wrong_step(self, pool: Sequence[int] | dict[int, Any], honest: int | None = None, shown: dict[int, str] | None = None) -> int:
        """A wrong step among `pool`, never `honest` (the honest answer) unless it is the only one,
        drawn as the engine's error model says from what the prompt shows."""
        view = self.view(shown)
        avoid = honest if honest is not None else view.fault
        if self.noise.real:
            return realistic_wrong_step(view, list(pool), self.rng, avoid)
        return iid_wrong_step(view, list(pool), self.rng, avoid)

    # ---- agents ------------------------------------------------------------------------------------
    def agent_choice(self, choices: Sequence[str], step: int | None = None) -> str:
        """The choice that names the labelled agent (or, with `step`, the agent the prompt shows
        beside that step), as the trace spells it or as a prompt shows it (`neutralise`d, or an
        alias whose original the prompt's own block holds: `localfa.methods.names.aliases_in_prompt`)."""
        name = self.fingerprint.agent if step is None else self.agents().get(step)
        if not name:
            raise PolicyError(
                f"request {self.key!r}: no agent to name" + (f" (the prompt shows none at step {step})" if step is not None else "")
            )
        aliases = aliases_in_prompt(self.text)
        name = aliases.get(name, name)
        wanted = {normalize_agent(name), normalize_agent(neutralise(name)), normalize_agent(defuse(name))}
        for c in choices:
            if normalize_agent(aliases.get(c, c)) in wanted:
                return c
        raise PolicyError(f"request {self.key!r}: no agent choice names {normalize_agent(name)!r} (choices: {list(choices)})")


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
    it a generic reading of the details is used). `dropped_at` reads a finished record, never a
    request: it answers nothing."""

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


def other_choice(grammar: Grammar, value: str, rng: random.Random) -> str:
    """Another option of a choice grammar (the opposite verdict of a yes/no)."""
    options = [o for o in grammar.spec if o != value]
    return rng.choice(options) if options else value


def schema_field(grammar: Grammar, name: str) -> dict[str, Any]:
    """The JSON schema of property `name` of a JSON grammar (references resolved)."""
    if grammar.kind != "json":
        raise PolicyError(f"grammar {grammar.name!r} is {grammar.kind}, not json")
    node = grammar.spec.get("properties", {}).get(name)
    if node is None:  # an answer that may also be "none": the field over the object's alternatives
        nodes = [alt["properties"][name] for alt in grammar.spec.get("anyOf", []) if name in alt.get("properties", {})]
        node = (nodes[0] if all(n == nodes[0] for n in nodes) else {"anyOf": nodes}) if nodes else None
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

"""Which policy rule answers a request: every registered method's `oracle_policy`, by request key.

The engine does not know which method sent a request; each method's keys are its own
(``aao``, ``sbs/step/3``, ``falat/pair/2/5``, ``turn/4``), so the rule whose pattern matches the
key (without ensemble prefixes) is the one. A key that no rule matches, or that rules of two
methods both match, is an error naming the key, so the trace gets an error record saying what to
write, and the sweep goes on.
"""

from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from localfa.methods.registry import METHODS, method_class
from localfa.oracle.policy import Policy, Rule


class NoPolicyError(LookupError):
    """No rule (or more than one method's rule) answers a request key."""


@dataclass(frozen=True)
class Policies:
    """The loaded policies: method name -> (its `oracle_policy` target, the policy)."""

    by_method: dict[str, tuple[str, Policy]]
    without: tuple[str, ...]  # methods whose class names no policy
    broken: tuple[str, ...] = ()  # "method: error" for methods (or policies) that failed to import

    def rule_for(self, key: str) -> tuple[str, Rule]:
        """(method, rule) that answers `key` (a key without ensemble prefixes)."""
        found = [(name, rule) for name, (_, policy) in self.by_method.items() if (rule := policy.rule_for(key)) is not None]
        if len(found) == 1:
            return found[0]
        if found:
            raise NoPolicyError(
                f"request key {key!r} is matched by the oracle policies of {', '.join(n for n, _ in found)}: make their patterns disjoint"
            )
        head = key.split("/", 1)[0]
        sender = f" (sent by method {head!r}?)" if head in METHODS else ""
        missing = f"; methods with no oracle policy: {', '.join(self.without)}" if self.without else ""
        missing += f"; not loaded: {'; '.join(self.broken)}" if self.broken else ""
        raise NoPolicyError(
            f"no oracle policy answers request key {key!r}{sender}: add a Rule for it to the method's "
            f"oracle policy (its class's `oracle_policy`, see localfa/oracle/policy.py){missing}"
        )

    def fingerprint(self) -> str:
        """A hash of every policy module's source: a changed policy is a different oracle
        (part of the response cache's identity)."""
        h = hashlib.sha256()
        for name in sorted(self.by_method):
            target = self.by_method[name][0]
            source = getattr(importlib.import_module(target.partition(":")[0]), "__file__", None)
            h.update(f"{name}={target}\n".encode())
            if source:
                h.update(Path(source).read_bytes())
        return h.hexdigest()[:16]


def load_policy(target: str) -> Policy:
    """The `Policy` a ``module:NAME`` target names."""
    module, _, attr = target.partition(":")
    policy = getattr(importlib.import_module(module), attr)
    if not isinstance(policy, Policy):
        raise TypeError(f"oracle policy {target!r} is a {type(policy).__name__}, not a localfa.oracle.policy.Policy")
    return policy


@lru_cache(maxsize=1)
def registered_policies() -> Policies:
    """Every registered method's policy (methods that make no model call need none).

    A method whose module (or policy) does not import is left out and named in the error of any
    request no loaded policy answers: one broken method must not stop the others' ceilings."""
    by_method: dict[str, tuple[str, Policy]] = {}
    without: list[str] = []
    broken: list[str] = []
    for name in sorted(METHODS):
        try:
            target = method_class(name).oracle_policy
            if target is None:
                without.append(name)
            else:
                by_method[name] = (target, load_policy(target))
        except Exception as exc:  # noqa: BLE001 - reported with the request it could not answer
            broken.append(f"{name}: {type(exc).__name__}: {exc}")
    return Policies(by_method, tuple(without), tuple(broken))


def policy_table(policies: Policies | None = None) -> str:
    """The README's table: method x request kind -> what the oracle answers, and its wrong answer."""
    policies = policies or registered_policies()
    lines = ["| method | request kind (key) | the oracle answers | its wrong answer |", "|---|---|---|---|"]
    for name, (_, policy) in sorted(policies.by_method.items()):
        for rule in policy.rules:
            pattern = rule.pattern.replace("|", "\\|")
            lines.append(f"| {name} | {rule.kind} (`{pattern}`) | {rule.says} | {rule.wrong_says} |")
    return "\n".join(lines) + "\n"

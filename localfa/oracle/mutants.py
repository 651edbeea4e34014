"""Named mutants: one small deliberate break per stage or rule of a method, which the honest oracle
must notice.

An oracle ceiling is an instrument only if it can fail. Each method registers, beside its oracle
policy, a list of `Mutant`s (its class's `oracle_mutants` ClassVar names it, as ``"module:NAME"``,
the way `oracle_policy` does). A mutant is a context manager that changes the method's code or
options while it is active (`unittest.mock.patch` of one function, one constant, one option
default); `scripts/bench_ceiling.py --mutants` sweeps the method intact and under each mutant on
the same traces and seeds and calls a mutant *killed* when, against the intact method:

- its p = 1 ceiling falls below the intact ceiling (`p1`: a stage that makes the fault visible), or
- its p = 0.7 step accuracy under the realistic error model falls by `P07_DROP` or more
  (`p07`: a stage that earns its place only under errors, such as pruning), or
- its calls or prefill per trace rise by `COST_RISE` or more (`cost`: a stage that saves work), or
- (a mutant marked `long`) its p = 1 ceiling on long runs, the dev runs grown so the fault sits at
  2x and 5x a 32k window (`localfa.traces.longruns`), falls below the intact method's there
  (`long`: a stage that earns its place only under context pressure, such as SAFARI's memory).

`expect` says which of those rules the mutant is meant to trip; the kill is asserted on that rule
(any rule tripping still counts as killed in the table). A mutant nobody kills is either a stage
the method does not need (remove it, with the figures) or a blind spot of the policy (fix it).
"""

from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, ContextManager, Iterator, Literal, Sequence

from localfa.methods.registry import METHODS, method_class

KillRule = Literal["p1", "p07", "cost", "long"]
P07_DROP = 0.03  # step accuracy points (as a share) a p = 0.7 mutant must lose to be killed
COST_RISE = 0.20  # relative rise of calls or prefill per trace that kills a `cost` mutant


@dataclass(frozen=True)
class Mutant:
    """One named break of one stage or rule of a method.

    `patch` returns a fresh context manager that applies the break while active (typically
    `unittest.mock.patch.object(module, "name", replacement)`, or an `ExitStack` of several);
    `spec` is an option string appended to the method spec instead of (or besides) a patch
    (``"top_k=1"`` -> ``falat:top_k=1``). `stage` names what it breaks, in the method's words;
    `traces` the dev traces the CI test runs it on, chosen by a rule stated where they are defined
    (never by where the kill shows)."""

    name: str
    stage: str
    expect: KillRule
    patch: Callable[[], ContextManager[object]] = field(default=contextlib.nullcontext)
    spec: str = ""
    # Dev trace ids (``hand-crafted/3``) the CI test (tests/oracle/test_mutants.py) runs it on;
    # empty: its default subset. The full dev split is the benchmark's job.
    traces: tuple[str, ...] = ()
    # Also swept at p = 1 on long runs grown from those traces (the `long` rule).
    long: bool = False

    def method_spec(self, base: str) -> str:
        """The method spec a sweep of this mutant runs: `base` with `spec`'s options added."""
        if not self.spec:
            return base
        return f"{base}{',' if ':' in base else ':'}{self.spec}"


def patched(*targets: tuple[object, str, object]) -> Callable[[], ContextManager[object]]:
    """A `Mutant.patch` that sets each (owner, attribute, value) while active."""
    from unittest import mock

    @contextlib.contextmanager
    def apply() -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for owner, attr, value in targets:
                stack.enter_context(mock.patch.object(owner, attr, value))
            yield

    return apply


def load_mutants(target: str) -> tuple[Mutant, ...]:
    """The mutants a ``module:NAME`` target names (a sequence of `Mutant`)."""
    module, _, attr = target.partition(":")
    found: Sequence[Mutant] = getattr(importlib.import_module(module), attr)
    bad = [m for m in found if not isinstance(m, Mutant)]
    if bad:
        raise TypeError(f"oracle mutants {target!r} hold {type(bad[0]).__name__}, not localfa.oracle.mutants.Mutant")
    names = [m.name for m in found]
    if len(set(names)) != len(names):
        raise ValueError(f"oracle mutants {target!r}: names repeat ({names})")
    return tuple(found)


@lru_cache(maxsize=1)
def _loaded() -> tuple[dict[str, tuple[Mutant, ...]], dict[str, str]]:
    """(method -> its mutants, method -> why its class or mutants failed to load)."""
    out: dict[str, tuple[Mutant, ...]] = {}
    broken: dict[str, str] = {}
    for name in sorted(METHODS):
        try:
            target = getattr(method_class(name), "oracle_mutants", None)
            if target:
                out[name] = load_mutants(target)
        except Exception as exc:  # noqa: BLE001 - one broken method must not hide the others' mutants
            broken[name] = f"{type(exc).__name__}: {exc}"
    return out, broken


def registered_mutants() -> dict[str, tuple[Mutant, ...]]:
    """method name -> its mutants, for every registered method whose class names some (a method
    that fails to import is left out and named by `unloadable_mutants`)."""
    return _loaded()[0]


def unloadable_mutants() -> dict[str, str]:
    """method name -> the error that kept its class or its mutants from loading."""
    return _loaded()[1]


def killed_by(intact: "Figures", mutant: "Figures") -> list[KillRule]:
    """Which kill rules a mutant's figures trip against the intact method's (empty: survived)."""
    rules: list[KillRule] = []
    if mutant.ceiling < intact.ceiling - 1e-9:
        rules.append("p1")
    if mutant.noisy_accuracy is not None and intact.noisy_accuracy is not None:
        if mutant.noisy_accuracy <= intact.noisy_accuracy - P07_DROP + 1e-9:
            rules.append("p07")
    for mine, theirs in ((mutant.calls_per_trace, intact.calls_per_trace), (mutant.prefill_per_trace, intact.prefill_per_trace)):
        if theirs > 0 and mine >= theirs * (1 + COST_RISE) - 1e-9:
            rules.append("cost")
            break
    if mutant.long_ceiling is not None and intact.long_ceiling is not None and mutant.long_ceiling < intact.long_ceiling - 1e-9:
        rules.append("long")
    return rules


@dataclass(frozen=True)
class Figures:
    """What the kill rules compare: p = 1 ceiling, p = 0.7 accuracy (None: not measured), cost,
    and the p = 1 ceiling on long runs (None: not measured)."""

    ceiling: float
    noisy_accuracy: float | None
    calls_per_trace: float
    prefill_per_trace: float
    long_ceiling: float | None = None

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
import hashlib
import importlib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, ContextManager, Iterator, Literal, Sequence

import regex

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


# ---- content-blind mutants: a template's trace text removed, or replaced by same-shape nonsense ----

BlindMode = Literal["removed", "nonsense"]
_BLOCK_BODY = re.compile(r"^(<<<(?:STEP|PASSAGE) \d+>>>\n)(.*?)(\n<<<END (?:STEP|PASSAGE) \d+>>>)$", re.S | re.M)
_NUMBERED_LINE = re.compile(r"^(\s*\d+ \(step \d+\)\| )(.*)$", re.M)
_WORDISH = regex.compile(r"[\p{L}\p{N}]+")
_LETTERS = "bcdfghjklmnpqrstvwxz"


def nonsense(text: str) -> str:
    """`text` with every run of letters or digits replaced by a made-up word of the same length
    (the same word always by the same nonsense): the line shape and length stay, the words go."""

    def word(m: regex.Match[str]) -> str:
        w = m.group(0)
        seed = int.from_bytes(hashlib.sha256(w.encode()).digest()[:8], "big")
        out = []
        for _ in w:
            out.append(_LETTERS[seed % len(_LETTERS)])
            seed = seed // len(_LETTERS) or int.from_bytes(hashlib.sha256(f"{seed}{w}".encode()).digest()[:8], "big")
        return "".join(out)

    return _WORDISH.sub(word, text)


def blind_prompt(rendered: str, mode: BlindMode) -> str:
    """`rendered` with the trace text it shows blinded: the body of every fenced STEP/PASSAGE block
    and the text of every numbered line of the line view, removed or made nonsense (headers,
    ids and the prompt's own words stay)."""
    change = (lambda _t: "") if mode == "removed" else nonsense
    out = _BLOCK_BODY.sub(lambda m: m.group(1) + change(m.group(2)) + m.group(3), rendered)
    return _NUMBERED_LINE.sub(lambda m: m.group(1) + change(m.group(2)), out)


def content_blind(template: str, mode: BlindMode) -> Callable[[], ContextManager[object]]:
    """A `Mutant.patch`: while active, every rendering of prompt `template` (``"drift/support.j2"``)
    shows its trace text blinded (`blind_prompt`)."""
    from unittest import mock

    from localfa import templates

    real = templates._template

    class _Blinded:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def render(self, *args: Any, **kwargs: Any) -> str:
            return blind_prompt(self.inner.render(*args, **kwargs), mode)

    def lookup(name: str) -> Any:
        found = real(name)
        return _Blinded(found) if name == template else found

    return lambda: mock.patch.object(templates, "_template", lookup)


def content_blind_mutants(templates: dict[str, KillRule], traces: tuple[str, ...] = ()) -> list[Mutant]:
    """Two mutants per trace-showing template (template -> the kill rule it must trip): its trace text
    removed, and replaced by nonsense of the same length and line shape."""
    out = []
    for template, expect in templates.items():
        stem = template.rsplit("/", 1)[-1].removesuffix(".j2").replace("_", "-")
        for mode, says in (("removed", "removed"), ("nonsense", "replaced by same-shape nonsense")):
            out.append(
                Mutant(
                    f"{stem}-text-{mode}",
                    f"{template}: the trace text it shows {says}",
                    expect,
                    content_blind(template, mode),  # type: ignore[arg-type]
                    traces=traces,
                )
            )
    return out

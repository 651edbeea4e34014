"""The one result record: what `diagnose` and sweeps write and what `report` reads.

A `ResultRecord` is a `Diagnosis` plus what makes it comparable across a run: the method's full
label and name, the budget label, the seed, the trace's size and labels, and, when it failed,
whether the failure is worth retrying (`error_kind`). Every writer builds it with
`ResultRecord.from_diagnosis`; every reader parses lines with `ResultRecord.from_line`, so the
two sides cannot drift apart.

Error kinds (why: a sweep must retry what a server hiccup broke, never what a bad trace broke):

- ``transient``: the engine could not answer (timeout, connection refused, HTTP 5xx, a malformed
  response body, an `EngineError` subclass whose ``transient`` flag is set). Retried on resume.
- ``final``: anything else (a bad trace, a method's logic, a grammar the model cannot satisfy).
  Kept on resume unless ``--retry-errors``.
- ``unreadable``: the trace file could not be read, so no method ran (`ResultRecord.unreadable`).
  Kept on resume while the file stays unreadable; once it reads, its units run and their records
  replace these (`localfa.bench.store.drop_repaired`).
"""

from __future__ import annotations

import builtins
import hashlib
import json
import math
import re
import time
from typing import Any, Literal

from pydantic import ConfigDict, field_validator, model_validator

from localfa.diagnosis import Diagnosis
from localfa.redact import redact
from localfa.traces.model import Labels, Trace

ErrorKind = Literal["transient", "final", "unreadable"]
UNREADABLE: ErrorKind = "unreadable"
Key = tuple[str, str, str, int]

# Engine messages that mean "the server was not there or did not answer", whatever class wraps them
# (the openai backend wraps httpx errors and HTTP statuses into a plain EngineError).
_TRANSIENT_TEXT = re.compile(
    r"HTTP 5\d\d|connection (?:refused|reset|error)|connect(?:ion)? ?timeout|timed out|read timeout|"
    r"server disconnected|remote ?protocol ?error|all connection attempts failed|"
    r"(?:malformed|invalid|not valid) (?:json|response|body)",
    re.IGNORECASE,
)
_ERROR_NAME = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*:")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _subclasses(cls: type) -> list[type]:
    out, todo = [], [cls]
    while todo:
        c = todo.pop()
        out.append(c)
        todo.extend(c.__subclasses__())
    return out


def _transient_class_names() -> set[str]:
    """Names of exception classes that mean the engine was unavailable (see module doc)."""
    from localfa.engine.errors import EngineError

    names = {c.__name__ for c in _subclasses(EngineError) if getattr(c, "transient", False)}
    names |= {c.__name__ for c in _subclasses(TimeoutError) + _subclasses(ConnectionError)}
    try:
        import httpx

        names |= {c.__name__ for c in _subclasses(httpx.TransportError)}
    except ImportError:  # pragma: no cover - httpx comes with the openai backend
        pass
    return names


def classify_error(detail: str | None) -> ErrorKind | None:
    """``transient`` or ``final`` for an error detail as the runner writes it (``Name: message``)."""
    if not detail:
        return None
    m = _ERROR_NAME.match(detail)
    name = m.group(1).rsplit(".", 1)[-1] if m else ""
    if name in _transient_class_names():
        return "transient"
    from localfa.engine.errors import EngineError

    engine_names = {c.__name__ for c in _subclasses(EngineError)}
    first_line = detail.splitlines()[0]
    if name in engine_names and _TRANSIENT_TEXT.search(first_line):
        return "transient"
    if name and getattr(builtins, name, None) is not None and _TRANSIENT_TEXT.search(first_line):
        return "transient"  # e.g. OSError: [Errno 111] Connection refused
    return "final"


def is_final(error: str | None, error_kind: str | None, retry_errors: bool = False) -> bool:
    """Whether a resumed sweep keeps a record with this error (False: run its unit again):
    successes and final errors stay, transient errors (and with `retry_errors` all) run again."""
    if not error:
        return True
    return not retry_errors and error_kind != "transient"


def clamp_spans(spans: list[tuple[int, int]], n_steps: int | None) -> list[tuple[int, int]]:
    """Inclusive step ranges put in order and cut to a trace of `n_steps` steps (unknown: kept)."""
    out = []
    for a, b in spans:
        lo, hi = min(a, b), max(a, b)
        if n_steps is not None:
            lo, hi = max(lo, 0), min(hi, n_steps - 1)
            if lo > hi:
                continue
        out.append((lo, hi))
    return out


def trace_digest(trace: Trace) -> str:
    """A hash of what a trace says (not its id or path): tells two files with one id apart."""
    body = trace.model_dump_json(exclude={"id", "source"})
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


class ResultRecord(Diagnosis):
    """One line of results.jsonl (sweeps) or of `diagnose --out` (see module doc)."""

    model_config = ConfigDict(extra="ignore")

    budget: str = "none"
    method_name: str | None = None
    n_steps: int | None = None
    label: Labels | None = None
    trace_sha256: str | None = None
    finished_at: str | None = None
    # Set by the categorise pass (`localfa bench --categorise NAME`, localfa.insights.categorise):
    # the category of the diagnosed step in taxonomy `taxonomy`, and the model's reason for it.
    category: str | None = None
    category_reason: str | None = None
    taxonomy: str | None = None
    # What the harness said of the run (a Harbor trial, a SWE-bench instance): `localfa.traces.runs.Verdict`.
    harness: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _classify(self) -> "ResultRecord":
        """An error without a kind (a record from before kinds, or built by hand) gets one."""
        if self.error and self.error_kind is None:
            self.error_kind = classify_error(self.error)
        return self

    @model_validator(mode="after")
    def _within_the_trace(self) -> "ResultRecord":
        """A results file is input like a trace: numbers a reader would trust are made sane here,
        where every reader parses, so one forged line cannot exhaust or crash `report`,
        `summarize`, `view` or a resumed sweep. A confidence or time that is not a finite number
        is dropped (a confidence is kept within 0..1); spans and labelled spans are clamped to the
        trace's steps (`n_steps`), and those wholly outside it dropped."""
        if self.confidence is not None:
            self.confidence = min(1.0, max(0.0, self.confidence)) if math.isfinite(self.confidence) else None
        if not math.isfinite(self.wall_s):
            self.wall_s = 0.0
        if self.n_steps is not None and self.n_steps < 0:
            self.n_steps = None
        if self.spans is not None:
            self.spans = clamp_spans(self.spans, self.n_steps)
        if self.label is not None and self.label.fault_spans:
            self.label.fault_spans = clamp_spans(self.label.fault_spans, self.n_steps)
        return self

    @field_validator("budget", mode="before")
    @classmethod
    def _no_budget_is_none(cls, value: Any) -> Any:
        return "none" if value is None or value == "" else str(value)

    @classmethod
    def from_diagnosis(
        cls,
        diag: Diagnosis,
        trace: Trace,
        *,
        method: str | None = None,
        method_name: str | None = None,
        budget: str | None = None,
        seed: int | None = None,
        digest: str | None = None,
    ) -> "ResultRecord":
        """The record of `diag` on `trace`; the sweep identity overrides what the method set.

        `digest` is `trace_digest(trace)` when the caller has it (a sweep writes many records per trace).
        """
        data = diag.model_dump()
        data.update(
            trace=trace.id,
            source=diag.source or trace.source,
            subset=diag.subset or trace.subset,
            method=method or diag.method,
            method_name=method_name or (method or diag.method).split(":", 1)[0],
            budget=budget or diag.budget or "none",
            seed=diag.seed if seed is None else seed,
            n_steps=len(trace.steps),
            label=trace.labels.model_dump() if trace.labels is not None else None,
            error_kind=diag.error_kind or classify_error(diag.error),
            trace_sha256=digest or trace_digest(trace),
            harness=trace.metadata.get("harness") if isinstance(trace.metadata.get("harness"), dict) else None,
            finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        )
        return cls.model_validate(data)

    @classmethod
    def unreadable(
        cls, trace_id: str, source: str, error: Exception, *, method: str, method_name: str, budget: str, seed: int
    ) -> "ResultRecord":
        """The record of a trace file that could not be read (`diagnose` and `bench` write one per
        unit the file would have had): a final error saying what is wrong with the file named in
        `source`, of kind ``unreadable`` (see the module doc): once the file reads again, a resumed
        sweep runs it, and a record of the file read replaces this one (`localfa.bench.store`)."""
        return cls(
            trace=trace_id,
            source=source,
            method=method,
            method_name=method_name,
            seed=seed,
            budget=budget,
            stop_reason="error",
            error=f"{type(error).__name__}: {getattr(error, 'message', error)}",
            error_kind=UNREADABLE,
            finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        )

    @classmethod
    def from_line(cls, line: str | bytes) -> "ResultRecord":
        """Parse one JSON line; raises ValueError (pydantic's ValidationError is one) when it is not a record."""
        return cls.model_validate(json.loads(line))

    @property
    def key(self) -> Key:
        """The identity of a record in a run: (trace id, method label, budget label, seed)."""
        return (self.trace, self.method, self.budget or "none", int(self.seed))

    def is_final(self, retry_errors: bool = False) -> bool:
        """Whether a resumed sweep keeps this record (False: run its unit again)."""
        return is_final(self.error, self.error_kind, retry_errors)

    @property
    def never_read(self) -> bool:
        """The record of a trace file that could not be read (`unreadable`)."""
        return self.error_kind == UNREADABLE

    def to_line(self, with_transcript: bool = False) -> str:
        """One JSON line (with its newline), every secret masked (`localfa.redact`: a key a model
        or an error message repeats); a lone surrogate that got this far (an error message
        quoting one) is written as U+FFFD, so the line can always be encoded."""
        line = redact(json.dumps(self.record(with_transcript), ensure_ascii=False, separators=(",", ":"))) + "\n"
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:
            line = _LONE_SURROGATE.sub("\ufffd", line)
        return line

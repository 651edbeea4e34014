"""The categorise pass: which category of a taxonomy each diagnosed step falls in, and why.

`localfa bench DIR --categorise NAME` runs it once the sweep is done, over every record of the run
that names a step and has no category of that taxonomy yet (so a resumed or extended sweep
categorises only what is new). One request per record, all sent through the runner together, so
the engine batches them across the sweep. The prompt runs from most to least shared: the system
prompt holds the taxonomy (the same for every call of the pass), then the trace's task (shared by
every record of that trace), then the diagnosed step and the diagnosis's reasoning. The answer is
grammar-bound: a reason first (at most `REASON_CHARS`, stated in the prompt), then exactly one of
the taxonomy's names.

The categorised record is appended to the run's results file as a copy of the record with
`category`, `category_reason` and `taxonomy` set and the same `finished_at`, so the store's rule
(among equals, the later line wins) makes it the record of its key; nothing else of it changes.
A request that fails leaves its record as it was and is counted, never stopping the pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from localfa.engine.grammar import Grammar
from localfa.engine.types import Engine, Request, Sampling, derive_seed
from localfa.insights.taxonomy import Taxonomy
from localfa.methods.base import Program
from localfa.methods.names import agent_names
from localfa.methods.runner import Job, run_jobs
from localfa.results import ResultRecord
from localfa.templates import render
from localfa.traces.model import Trace

KEY = "categorise"
REASON_CHARS = 300
STEP_CHARS = 6000  # the diagnosed step's text shown (a strong model's window holds far more; one step rarely needs it)
TASK_CHARS = 4000
REASONING_CHARS = 2000
TEMPERATURE = 0.0  # a label, not an essay: the judge's temperature


@dataclass
class PassResult:
    """What a categorise pass did: records categorised, left without a category, and why."""

    categorised: int = 0
    failed: int = 0
    skipped: int = 0  # records with no step (errors, empty answers) or already categorised
    errors: list[str] | None = None


def category_grammar(taxonomy: Taxonomy) -> Grammar:
    """Reason first, then one of the taxonomy's names (nothing else can come out)."""
    schema = {
        "title": f"Category_{taxonomy.name}",
        "type": "object",
        "properties": {"reason": {"type": "string", "maxLength": REASON_CHARS}, "category": {"enum": taxonomy.names}},
        "required": ["reason", "category"],
        "additionalProperties": False,
    }
    return Grammar.json(schema, name=f"categorise_{taxonomy.name}")


def _cut(text: str, limit: int) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit], True)


def categorise_request(record: ResultRecord, trace: Trace, taxonomy: Taxonomy) -> Request:
    """The one request that categorises `record`'s diagnosed step on `trace`."""
    assert record.step is not None
    step = trace.steps[record.step]
    step_text, cut = _cut(step.content, STEP_CHARS)
    system = render("insights/categorise_system.j2", taxonomy=taxonomy, reason_chars=REASON_CHARS)
    user = render(
        "insights/categorise.j2",
        task=_cut(trace.task or "(no task recorded)", TASK_CHARS)[0],
        step=record.step,
        agent=record.agent or step.agent,
        names=agent_names(trace),
        kind=step.kind,
        step_text=step_text,
        cut=cut,
        step_chars=STEP_CHARS,
        reasoning=_cut(record.reasoning or "(no reasoning recorded)", REASONING_CHARS)[0],
    )
    longest = max(len(n) for n in taxonomy.names)
    sampling = Sampling(
        temperature=TEMPERATURE,
        max_tokens=REASON_CHARS + longest + 40,  # every character a token at worst, plus the JSON around them
        seed=derive_seed(record.seed, record.trace, f"{KEY}|{record.method}|{record.budget}"),
    )
    messages = ({"role": "system", "content": system}, {"role": "user", "content": user})
    return Request(messages, category_grammar(taxonomy), sampling, key=KEY, route=trace.id)


def needs_category(record: ResultRecord, taxonomy: Taxonomy, traces: dict[str, Trace]) -> bool:
    """A record the pass should categorise: it names a step of a trace at hand, and has no
    category of this taxonomy yet."""
    if record.error or record.step is None or record.taxonomy == taxonomy.name:
        return False
    trace = traces.get(record.trace)
    return trace is not None and 0 <= record.step < len(trace.steps)


def _program(record: ResultRecord, request: Request, taxonomy: Taxonomy, step_kind: str) -> Program:
    (resp,) = yield [request]
    value = resp.value
    details = {**record.details, "step_kind": step_kind}  # what `localfa summarize` counts by
    return record.model_copy(
        update={"category": value["category"], "category_reason": value["reason"], "taxonomy": taxonomy.name, "details": details}
    )


def categorise_records(
    records: Sequence[ResultRecord], traces: Iterable[Trace], taxonomy: Taxonomy, engine: Engine, concurrency: int = 64
) -> tuple[list[ResultRecord], PassResult]:
    """(the newly categorised records, what happened) for `records` on `engine`."""
    by_id = {t.id: t for t in traces}
    result = PassResult(errors=[])
    jobs: list[Job] = []
    for i, rec in enumerate(records):
        if not needs_category(rec, taxonomy, by_id):
            result.skipped += 1
            continue
        trace = by_id[rec.trace]
        engine.attach_trace(trace)  # the oracle engine answers from the trace's labels

        def on_error(detail: str, rec: ResultRecord = rec) -> ResultRecord:
            return rec.model_copy(update={"details": {**rec.details, "category_error": detail}})

        request = categorise_request(rec, trace, taxonomy)
        jobs.append(Job(str(i), _program(rec, request, taxonomy, trace.steps[rec.step or 0].kind), on_error))
    originals = {r.key: r for r in records}
    done: list[ResultRecord] = []
    for _, diag in run_jobs(engine, jobs, concurrency):
        assert isinstance(diag, ResultRecord)
        if diag.category is None:
            result.failed += 1
            assert result.errors is not None
            result.errors.append(f"{diag.trace} {diag.method} seed {diag.seed}: {diag.details.get('category_error', '?')}")
            continue
        # the runner stamps usage and wall time of the pass; the record keeps its method's own
        original = originals[diag.key]
        done.append(diag.model_copy(update={"usage": original.usage, "wall_s": original.wall_s}))
        result.categorised += 1
    return done, result


def categorise_run(run_dir: str | Path, traces: Iterable[Trace], taxonomy: Taxonomy, engine: Engine, concurrency: int = 64) -> PassResult:
    """Categorise every record of a run directory that needs it, appending the categorised
    copies to its results file (see the module doc)."""
    from localfa.bench.store import ResultStore, read_run_records

    records = read_run_records(run_dir)
    done, result = categorise_records(records, traces, taxonomy, engine, concurrency)
    if done:
        with ResultStore(run_dir) as store:
            for rec in done:
                store.append(rec, replace=True)
    return result

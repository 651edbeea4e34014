"""TELBench (the DRIFT paper's benchmark) cases: JSON Lines, one case a line.

A case is ``{"id", "question", "spans": [{"id", "raw"}, ...], "gold": {"error_span_ids": [...]},
"meta": {...}}`` (the authors' loader also reads `span_id` / `span_text` and a case nested under
`traj`). Each span becomes one step (the benchmark's unit of audit: a segment of the deep-research
run, tool calls folded with their results), its text the span's text, its `span_id` the case's
span id. The gold error spans become `Labels.fault_steps` and `fault_spans`; the first error is
the first gold id (the authors' first-error accuracy compares first gold and first predicted id),
and `mistake_step` is that span's step. A file may hold one case (a JSON object) or many (JSON
Lines: `parse_many`); each case's id is ``telbench/ID``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from localfa.traces.errors import TraceError
from localfa.traces.importers.common import type_name
from localfa.traces.model import Labels, Step, Trace, step_runs

NAME = "telbench"
AGENT = "agent"  # TELBench spans do not name an agent: one deep-research agent per run


def _is_case(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    source = item.get("traj", item)
    spans = source.get("spans") if isinstance(source, dict) else None
    return (
        isinstance(spans, list)
        and bool(spans)
        and isinstance(spans[0], dict)
        and ("raw" in spans[0] or "span_text" in spans[0])
        and ("question" in source or "question" in item)
    )


def sniff(data: Any) -> bool:
    """One TELBench case, or a list of them (JSON Lines): spans with `raw` (or `span_text`) text."""
    if isinstance(data, list):
        return bool(data) and all(_is_case(x) for x in data[:3])
    return _is_case(data)


def _text(span: dict[str, Any], where: str, source: str) -> str:
    text = span.get("raw", span.get("span_text"))
    if not isinstance(text, str):
        raise TraceError(source, f"{where}: `raw` must be text, got {type_name(text)}")
    return text


def _case(row: dict[str, Any], k: int, path: Path, source: str) -> Trace:
    where = f"case {k + 1}"
    if not isinstance(row, dict):
        raise TraceError(source, f"{where}: expected an object, got {type_name(row)}")
    case = row.get("traj", row)
    cid = str(row.get("id") or row.get("case_id") or case.get("id") or case.get("case_id") or "")
    if not cid:
        raise TraceError(source, f"{where}: no `id`")
    spans = case.get("spans")
    if not isinstance(spans, list) or not spans:
        raise TraceError(source, f"{where} ({cid}): `spans` must be a non-empty list")
    steps: list[Step] = []
    index: dict[str, int] = {}
    for i, span in enumerate(spans):
        at = f"{where} ({cid}), spans[{i}]"
        if not isinstance(span, dict):
            raise TraceError(source, f"{at}: expected an object, got {type_name(span)}")
        sid = str(span.get("id", span.get("span_id", "")))
        if not sid:
            raise TraceError(source, f"{at}: no `id`")
        if sid in index:
            raise TraceError(source, f"{at}: span id {sid!r} repeats spans[{index[sid]}]")
        index[sid] = i
        steps.append(Step(index=i, agent=AGENT, role="assistant", content=_text(span, at, source), span_id=sid))
    gold = row.get("gold") or {}
    if not isinstance(gold, dict):
        raise TraceError(source, f"{where} ({cid}): `gold` must be an object, got {type_name(gold)}")
    ids = gold.get("error_span_ids")
    labels = None
    if ids is not None:
        if not isinstance(ids, list):
            raise TraceError(source, f"{where} ({cid}): `gold.error_span_ids` must be a list, got {type_name(ids)}")
        unknown = [str(x) for x in ids if str(x) not in index]
        if unknown:
            raise TraceError(source, f"{where} ({cid}): `gold.error_span_ids` names spans not in the case: {', '.join(unknown)}")
        faulty = [index[str(x)] for x in dict.fromkeys(ids)]
        labels = Labels(
            mistake_agent=AGENT if faulty else None,
            mistake_step=faulty[0] if faulty else None,
            fault_steps=sorted(faulty),
            fault_spans=step_runs(sorted(faulty)),
        )
    meta = row.get("meta") or {}
    return Trace(
        id=f"{NAME}/{cid}",
        source=source,
        format=NAME,
        task=str(case.get("question") or row.get("question") or ""),
        steps=steps,
        labels=labels,
        metadata={"telbench_meta": meta} if meta else {},
    )


def parse_many(data: Any, path: Path, source: str) -> list[Trace]:
    rows = data if isinstance(data, list) else [data]
    return [_case(row, k, path, source) for k, row in enumerate(rows)]


def parse(data: Any, path: Path, source: str) -> Trace:
    traces = parse_many(data, path, source)
    if len(traces) != 1:
        raise TraceError(source, f"holds {len(traces)} TELBench cases; load it with load_traces")
    return traces[0]

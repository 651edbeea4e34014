"""Reports of a run directory: a markdown table and a self-contained HTML page.

The HTML has no external resource of any kind (no script, stylesheet, font or image is fetched):
inline CSS, the tables, an inline SVG plot of tolerance accuracy against k per method, and per
trace the prediction, the label and the evidence each method quoted.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localfa.bench.metrics import AGGREGATION, INTERVAL, METRIC_TITLES, OVERALL, TOLERANCES, Estimate, GroupSummary, score_record, summarize
from localfa.bench.store import RESULTS, split_superseded
from localfa.bench.sweep import MANIFEST
from localfa.durable import replace_durably
from localfa.errors import LocatedError
from localfa.redact import redact
from localfa.results import ResultRecord
from localfa.view.calibration import calibration_chart
from localfa.view.charts import report_charts
from localfa.view.stages import stage_table_html, stage_table_markdown
from localfa.view.style import CSP

if TYPE_CHECKING:
    from localfa.insights.summary import Summary

REPORT_HTML = "report.html"
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22")
SUBSTRING_NOTE = (
    "Who&When's reference scorer matches steps by substring (label 7 also matches a "
    "prediction of 17). Shown only to compare with published tables; the exact-match "
    "step accuracy above is the one to trust."
)


class ReportError(LocatedError):
    """A located error of this layer; str = "path: message"."""


# ---- loading -----------------------------------------------------------------------------------


def load_run(run_dir: str | Path) -> tuple[list[ResultRecord], dict[str, Any] | None]:
    """(records, manifest) of a run directory; a missing results file is an error."""
    run = Path(run_dir)
    if not run.is_dir():
        raise ReportError(run, "no such run directory")
    results = run / RESULTS
    from localfa.bench.store import StoreError, read_run_records, results_files

    if not results_files(run):  # results.jsonl and/or the shard files of `bench --shard I/N`
        raise ReportError(results, "no results file: run `localfa bench ... --out RUN_DIR` first")
    try:
        records = read_run_records(run)
    except StoreError as exc:
        raise ReportError(exc.path, exc.message) from None
    manifest = None
    mpath = run / MANIFEST
    if mpath.exists():
        try:
            manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ReportError(mpath, f"not readable JSON ({exc})") from None
    records, superseded = split_superseded(records)
    if superseded:  # said by both reports (`superseded_note`)
        manifest = {**(manifest or {}), SUPERSEDED: sorted({r.trace for r in superseded}), SUPERSEDED + "_count": len(superseded)}
    return records, manifest


SUPERSEDED = "superseded_traces"


def superseded_note(manifest: dict[str, Any] | None) -> str | None:
    """The line that says which records were left out as superseded (a trace edited mid-run), or None."""
    traces = (manifest or {}).get(SUPERSEDED)
    if not traces:
        return None
    n = (manifest or {}).get(SUPERSEDED + "_count", 0)
    shown = ", ".join(map(str, traces[:5])) + (f" and {len(traces) - 5} more" if len(traces) > 5 else "")
    return (
        f"{n} records are left out as superseded: their trace file was changed and the run forced on (--force), "
        f"so they were scored against content that is gone ({shown})."
    )


# ---- formatting --------------------------------------------------------------------------------


def fmt_estimate(e: Estimate, ci: bool = True) -> str:
    if e.mean is None:
        return "—"
    if not ci or e.lo is None or e.hi is None:
        return f"{e.mean:.3f}"
    return f"{e.mean:.3f} [{e.lo:.2f}, {e.hi:.2f}]"


def _fmt_num(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:.1f}"


def metric_columns(groups: list[GroupSummary]) -> list[str]:
    """The metric columns that apply to at least one group."""
    cols = ["agent", "step", *(f"tol_{k}" for k in TOLERANCES)]
    if any(g.multi_fault for g in groups):
        cols += ["precision", "strict_precision"]
    if any(g.spans for g in groups):  # span P/R/F1 only where some trace carries span labels
        if any(g.metrics["span_f1"].n for g in groups if g.spans and "span_f1" in g.metrics):
            cols += ["span_precision", "span_recall", "span_f1"]
        cols.append("first_error")
        cols += ["ref_span_precision", "ref_span_recall", "ref_span_f1", "ref_first_error"]  # the DRIFT authors' definitions
    if any(g.metrics["no_error"].n for g in groups if "no_error" in g.metrics):  # runs labelled with no fault
        cols.append("no_error")
    if any(g.metrics["fallback"].n for g in groups if "fallback" in g.metrics):  # a method that answers even with no error found
        cols += ["fallback", "step_found", "step_fallback"]
    return cols


def _show_budget(groups: list[GroupSummary]) -> bool:
    return any(g.budget != "none" for g in groups)


def _show_forced(groups: list[GroupSummary]) -> bool:
    """Forced answers and failed turns get columns once any run has one."""
    return any(g.forced or g.turn_failures for g in groups)


def table_rows(groups: list[GroupSummary], ci: bool = True) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the main table (method x subset x metric, with cost per trace run)."""
    cols = metric_columns(groups)
    head = ["method"] + (["budget"] if _show_budget(groups) else []) + ["subset", "traces", "seeds × traces", "runs"]
    head += [METRIC_TITLES[c] for c in cols]
    head += ["calls/trace", "tokens/trace", "cached/trace", "errors"]
    forced = _show_forced(groups)
    head += ["forced", "turn failures"] if forced else []
    rows = []
    for g in groups:
        row = [g.method] + ([g.budget] if _show_budget(groups) else []) + [g.subset, str(g.traces), seeds_by_traces(g), str(g.records)]
        row += [fmt_estimate(g.metrics[c], ci) for c in cols]
        row += [_fmt_num(g.cost["calls"]), _fmt_num(g.cost["tokens"]), _fmt_num(g.cost["cached_tokens"]), fmt_errors(g)]
        row += [str(g.forced), str(g.turn_failures)] if forced else []
        rows.append(row)
    return head, rows


def seeds_by_traces(g: GroupSummary) -> str:
    """``3 × 10``, or ``3 × 10 (28 of 30 runs)`` when some trace lacks some seed (a partial run)."""
    text = f"{len(g.seeds)} × {g.traces}"
    return text if g.balanced else f"{text} ({g.records} of {len(g.seeds) * g.traces} runs)"


def fmt_errors(g: GroupSummary) -> str:
    """Error records, with how many of them are engine errors a resumed sweep retries."""
    return f"{g.errors} ({g.transient_errors} engine)" if g.transient_errors else str(g.errors)


def method_notes(groups: list[GroupSummary]) -> list[str]:
    """Lines that say what the table's numbers include: failures scored as misses, partial runs."""
    notes = []
    for g in (g for g in groups if g.subset == OVERALL):
        name = g.method + (f" ({g.budget})" if g.budget != "none" else "")
        if g.errors:
            retry = (
                f"; {g.transient_errors} failed on engine errors (timeouts, refused connections, server errors): "
                "run the same `localfa bench` command again to retry them"
                if g.transient_errors
                else ""
            )
            unread = (
                f"; {g.unreadable} of them are units of trace files that could not be read (no label, so not scored: "
                "repair the files and run the same `localfa bench` command again)"
                if g.unreadable
                else ""
            )
            notes.append(f"{name}: {g.errors} of {g.records} runs are errors, scored as misses{retry}{unread}.")
        if not g.balanced:
            notes.append(f"{name}: unbalanced run, {g.records} runs for {len(g.seeds)} seeds × {g.traces} traces.")
    return notes


def method_line() -> str:
    """How the table aggregates and what its intervals are."""
    return f"Aggregation: {AGGREGATION}. Intervals: {INTERVAL} (seeded, reproducible). Failed runs count as misses, never dropped."


def substring_rows(groups: list[GroupSummary]) -> tuple[list[str], list[list[str]]]:
    head = (
        ["method"]
        + (["budget"] if _show_budget(groups) else [])
        + ["subset", "traces", "step acc (exact)", "step acc (W&W substring scorer)"]
    )
    rows = []
    for g in groups:
        rows.append(
            [g.method]
            + ([g.budget] if _show_budget(groups) else [])
            + [g.subset, str(g.traces), fmt_estimate(g.metrics["step"]), fmt_estimate(g.metrics["step_substring"])]
        )
    return head, rows


def _md_escape(text: str) -> str:
    """A run's text (method labels, subsets, model names) as inert markdown: HTML escaped (a
    renderer would otherwise pass markup through), one line, no cell break."""
    return html.escape(" ".join(str(text).split()), quote=False).replace("|", "\\|")


def markdown_table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(_md_escape(h) for h in head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(_md_escape(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def markdown_report(
    records: list[ResultRecord], manifest: dict[str, Any] | None = None, *, substring: bool = False, n_boot: int = 1000
) -> str:
    """The report as markdown: a header line, the main table, optionally the substring table."""
    groups = summarize(records, n_boot=n_boot, method_order=_method_order(manifest))
    suffix = _title_suffix(manifest)  # " — model on backend": the run's own words, escaped
    out = [f"## localfa bench report{' ' + _md_escape(suffix) if suffix else ''}", ""]
    if not groups:
        out.append("No records in this run yet.")
        return "\n".join(out) + "\n"
    out.append(f"{len(records)} records. {method_line()} Cost columns are per trace run.")
    from localfa.bench.unlabelled import labelled_traces, no_label_line

    labelled, traces = labelled_traces(records)
    if labelled < traces:
        out += ["", no_label_line("RUN_DIR") if not labelled else f"{labelled} of {traces} traces carry labels: accuracy is over those."]
    if superseded_note(manifest):
        out += ["", _md_escape(superseded_note(manifest) or "")]
    out.append("")
    out.append(markdown_table(*table_rows(groups)))
    notes = method_notes(groups)
    if notes:
        out += [""] + [f"- {_md_escape(n)}" for n in notes]
    stages = stage_table_markdown(records)
    if stages:
        out += ["", stages.rstrip("\n")]
    if substring:
        out += [
            "",
            "### Who&When reference scorer (substring match; for comparison with published tables only)",
            "",
            SUBSTRING_NOTE,
            "",
            markdown_table(*substring_rows(groups)),
        ]
    return "\n".join(out) + "\n"


def _method_order(manifest: dict[str, Any] | None) -> list[str]:
    return list((manifest or {}).get("methods") or {})


def _title_suffix(manifest: dict[str, Any] | None) -> str:
    if not manifest:
        return ""
    model = (manifest.get("model") or {}).get("name")
    backend = (manifest.get("engine") or {}).get("backend")
    bits = list(dict.fromkeys(b for b in (model, backend) if b))
    return f" — {' on '.join(bits)}" if bits else ""


# ---- HTML --------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em;color:#222;max-width:1400px;box-sizing:border-box}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em}
table{border-collapse:collapse;font-size:.82em;margin:.5em 0}
th,td{border:1px solid #ccc;padding:.25em .35em;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{overflow-wrap:normal;font-size:.92em}.ci{display:block;font-size:.8em;color:#666;white-space:nowrap}table{max-width:100%}svg.chart{max-width:100%;height:auto}
th{background:#f2f2f2}td.num{text-align:right}
.hit{color:#1a7f37;font-weight:bold}.miss{color:#b42318}.err{color:#b42318;white-space:pre-wrap}
.note{color:#555;font-size:.9em}details{margin:.3em 0}summary{cursor:pointer}
blockquote{margin:.2em 0 .2em 1em;padding-left:.5em;border-left:3px solid #ccc;white-space:pre-wrap}
code{font-size:.95em}
.nolabel{font-size:1.05em;background:#fff8ec;border-left:4px solid #b26b00;padding:.4em .7em}ul.flat{margin:0;padding-left:1.1em}
"""


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def _cell(text: str) -> str:
    """A cell's HTML; an estimate's interval goes on its own line so the wide table fits 1280 px."""
    mean, sep, ci = text.partition(" [")
    if not sep or not ci.endswith("]"):
        return _e(text)
    lo, _, hi = ci[:-1].partition(", ")
    return f'{_e(mean)}<span class="ci" title="95% interval">{_e(lo)}–{_e(hi)}</span>'


def html_table(head: list[str], rows: list[list[str]], numeric_from: int = 0) -> str:
    out = ["<table><thead><tr>", "".join(f"<th>{_e(h).replace('/', '/<wbr>')}</th>" for h in head), "</tr></thead><tbody>"]
    for r in rows:
        cells = []
        for i, c in enumerate(r):
            cls = ' class="num"' if numeric_from and i >= numeric_from else ""
            cells.append(f"<td{cls}>{_cell(c)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _mark(score: float | None) -> str:
    if score is None:
        return ""
    return '<span class="hit">✓</span>' if score >= 1 else '<span class="miss">✗</span>'


def per_trace_html(records: list[ResultRecord], reasoning_chars: int = 1200) -> str:
    by_trace: dict[str, list[ResultRecord]] = {}
    for r in records:
        by_trace.setdefault(r.trace, []).append(r)
    out = []
    for tid, recs in by_trace.items():
        label = recs[0].label
        lab = f"label: step {label.mistake_step} by {label.mistake_agent}" if label else "no label"
        hits = sum(1 for r in recs if score_record(r)["step"] == 1.0)
        subset = f" ({_e(recs[0].subset)})" if recs[0].subset else ""
        exact = f" — {hits}/{len(recs)} runs exact" if label else ""
        out.append(f"<details><summary><code>{_e(tid)}</code>{subset} — {_e(lab)}{exact}</summary>")
        if label and label.reason:
            out.append(f"<p class=note>labelled reason: {_e(label.reason)}</p>")
        if label and len(label.fault_steps) > 1:
            out.append(f"<p class=note>fault steps {_e(label.fault_steps)}; high impact {_e(label.high_impact_steps)}</p>")
        out.append(
            "<table><thead><tr><th>method</th><th>budget</th><th>seed</th><th>step</th><th></th><th>agent</th><th></th>"
            "<th>stop</th><th>calls</th><th>tokens</th><th>evidence and reasoning</th></tr></thead><tbody>"
        )
        for r in sorted(recs, key=lambda r: (r.method, r.budget, r.seed)):
            s = score_record(r)
            u = r.usage
            ev = "".join(f"<blockquote>{_e(q)}</blockquote>" for q in r.evidence)
            if r.spans:
                ev = f"<div>spans: {_e(r.spans)}</div>" + ev
            reasoning = r.reasoning
            if len(reasoning) > reasoning_chars:
                reasoning = reasoning[:reasoning_chars] + " …"
            body = ev + (f"<div>{_e(reasoning)}</div>" if reasoning else "")
            if r.error:
                kind = f"({r.error_kind}) " if r.error_kind else ""
                body += f'<div class="err">{_e(kind + r.error[:2000])}</div>'
            out.append(
                f"<tr><td>{_e(r.method)}</td><td>{_e(r.budget)}</td><td class=num>{_e(r.seed)}</td>"
                f"<td class=num>{_e(r.step)}</td><td>{_mark(s['step'])}</td>"
                f"<td>{_e(r.agent)}</td><td>{_mark(s['agent'])}</td><td>{_e(r.stop_reason)}</td>"
                f"<td class=num>{_e(u.get('calls', 0))}</td>"
                f"<td class=num>{_e(int(u.get('prompt_tokens', 0) or 0) + int(u.get('completion_tokens', 0) or 0))}</td>"
                f"<td>{body}</td></tr>"
            )
        out.append("</tbody></table></details>")
    return "".join(out)


def _manifest_html(manifest: dict[str, Any] | None, run_dir: str) -> str:
    if not manifest:
        return f"<p class=note>Run directory <code>{_e(run_dir)}</code> (no manifest.json).</p>"
    model = manifest.get("model") or {}
    eng = manifest.get("engine") or {}
    rows = [
        ("run directory", run_dir),
        ("model", f"{model.get('name')} {('sha256 ' + str(model.get('sha256'))[:16]) if model.get('sha256') else ''}".strip()),
        ("backend", eng.get("backend")),
        ("localfa", f"{manifest.get('localfa_version')} ({manifest.get('git_revision') or 'no git revision'})"),
        ("created", manifest.get("created")),
        ("seeds", ", ".join(str(s) for s in manifest.get("seeds") or [])),
        ("budgets", ", ".join(str(b) for b in manifest.get("budgets") or [])),
        ("methods", ", ".join(manifest.get("methods") or {})),
        ("resumed", str(len(manifest.get("resumed") or []))),
    ]
    return "<table>" + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows) + "</table>"


def html_report(
    records: list[ResultRecord],
    manifest: dict[str, Any] | None = None,
    *,
    run_dir: str = "",
    substring: bool = True,
    n_boot: int = 1000,
    insights: "Summary | None" = None,
    anchors: dict[str, str] | None = None,
) -> str:
    """The whole report as one self-contained HTML document; with `insights` (or records that
    carry categories) a "What failed" section (`localfa.insights`), exemplars linked by `anchors`."""
    from localfa.bench.unlabelled import labelled_traces, no_label_line, unlabelled_html

    groups = summarize(records, n_boot=n_boot, method_order=_method_order(manifest))
    body = [f"<h1>localfa bench report{_e(_title_suffix(manifest))}</h1>", _manifest_html(manifest, run_dir)]
    labelled, traces = labelled_traces(records)
    if not groups:
        body.append("<p>No records in this run yet.</p>")
    elif not labelled:  # nothing to score: say so once, and show what is known without labels
        body.append(f"<p class=nolabel>{_e(no_label_line(run_dir or 'RUN_DIR'))}</p>")
        body.append(unlabelled_html(records, _method_order(manifest)))
        body.append(stage_table_html(records))
        body.append("<h2>Per trace</h2>")
        body.append("<p class=note>Each trace: every run's prediction, with the evidence the method quoted and its reasoning.</p>")
        body.append(per_trace_html(records))
    else:
        head, rows = table_rows(groups)
        body.append("<h2>Results</h2>")
        body.append(
            f"<p class=note>{len(records)} records. {_e(method_line())} Agent accuracy is a normalised exact "
            "match; step accuracy and ±k are exact on 0-based steps. Cost columns are per trace run.</p>"
        )
        if superseded_note(manifest):
            body.append(f"<p class=note>{_e(superseded_note(manifest))}</p>")
        if labelled < traces:
            body.append(f"<p class=note>{labelled} of {traces} traces carry labels: accuracy is over those.</p>")
        body.append(html_table(head, rows, numeric_from=head.index("traces")))
        body += [f"<p class=note>{_e(n)}</p>" for n in method_notes(groups)]
        body.append("<h2>Charts</h2>")
        body.append(report_charts(groups))
        body.append(calibration_chart(records))
        body.append(stage_table_html(records))
        if substring:
            sh, sr = substring_rows(groups)
            body.append("<h2>Who&amp;When reference scorer (substring match)</h2>")
            body.append(f"<p class=note>{_e(SUBSTRING_NOTE)}</p>")
            body.append(html_table(sh, sr, numeric_from=sh.index("traces")))
        body.append("<h2>Per trace</h2>")
        body.append(
            "<p class=note>Each trace: every run's prediction against the label, with the evidence the method quoted and its reasoning.</p>"
        )
        body.append(per_trace_html(records))
    if insights is None and any(r.category for r in records):
        from localfa.insights.summary import summarize as summarize_failures

        insights = summarize_failures(records)
        from localfa.insights.render import SUMMARY_VIEW, exemplar_anchors

        if anchors is None and run_dir and (Path(run_dir) / SUMMARY_VIEW).exists():  # written by `localfa summarize`
            anchors = exemplar_anchors(insights)
    if insights is not None:
        from localfa.insights.render import summary_html

        body.append(summary_html(insights, anchors))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        "<title>localfa bench report</title>"
        f"<style>{_CSS}</style></head><body>" + "\n".join(body) + "</body></html>\n"
    )


def write_report(
    run_dir: str | Path,
    html_path: str | Path | None = None,
    *,
    substring: bool = False,
    n_boot: int = 1000,
    insights: "Summary | None" = None,
    anchors: dict[str, str] | None = None,
) -> tuple[str, Path]:
    """(markdown text, path of the HTML written) for one run directory (a parent of runs made at
    several oracle p: `localfa.bench.report_dir.write_any_report`)."""
    records, manifest = load_run(run_dir)
    md = markdown_report(records, manifest, substring=substring, n_boot=n_boot)
    path = Path(html_path) if html_path else Path(run_dir) / REPORT_HTML
    page = html_report(records, manifest, run_dir=str(run_dir), substring=True, n_boot=n_boot, insights=insights, anchors=anchors)
    replace_durably(path, redact(page))  # a results file from elsewhere may carry a key (`localfa.redact`)
    return redact(md), path

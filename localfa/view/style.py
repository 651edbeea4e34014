"""The trace view's stylesheet and its content security policy, inlined into every page.

The policy forbids every fetch (no scripts at all, no remote styles, fonts or images), so the
browser itself guarantees the page makes no request, whatever text a trace contains.
"""

# Nothing may be fetched, posted or navigated to: no script, no form target, no <base> to re-aim links.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'; base-uri 'none'"

# Every page `localfa view` writes carries this, so a later run knows which files it may replace.
GENERATOR = '<meta name="generator" content="localfa view">'

PALETTE: tuple[str, ...] = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22")

CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0 auto;padding:1.5em;
     color:#222;max-width:1280px;line-height:1.4}
h1{font-size:1.45em;margin:.2em 0}h2{font-size:1.2em;margin:1.6em 0 .4em;border-bottom:2px solid #ddd}
h3{font-size:1.05em;margin:.6em 0 .3em}
a{color:#0b5cad}code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.9em}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f7f7f7;padding:.5em;margin:.3em 0}
table{border-collapse:collapse;font-size:.88em;margin:.4em 0;max-width:100%}
th,td{border:1px solid #ddd;padding:.2em .45em;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{background:#f3f3f3;font-weight:600}td.num{text-align:right}
table.kv th{width:12em}
.muted{color:#777}.yes,.hit{color:#1a7f37;font-weight:600}.no,.miss{color:#b42318;font-weight:600}
.flag{display:inline-block;background:#fde7e5;color:#b42318;border-radius:3px;padding:0 .35em;font-size:.8em}
.ok{display:inline-block;background:#e6f4ea;color:#1a7f37;border-radius:3px;padding:0 .35em;font-size:.8em}
.err{color:#b42318;white-space:pre-wrap}
.layout{display:grid;grid-template-columns:minmax(0,5fr) minmax(0,6fr);gap:1.2em;align-items:start}
.verdicts{position:sticky;top:.5em;max-height:calc(100vh - 1em);overflow-y:auto}
@media (max-width:1000px){.layout{grid-template-columns:minmax(0,1fr)}.verdicts{position:static;max-height:none}}
.diag{border:1px solid #ccc;border-left:6px solid var(--c,#1f77b4);border-radius:4px;padding:.5em .8em;margin:.6em 0;background:#fff}
.verdict{font-size:1.05em}.verdict b{font-size:1.1em}
.badge{display:inline-block;border-radius:3px;padding:0 .4em;margin-left:.3em;font-size:.78em;color:#fff;
       background:var(--c,#1f77b4);vertical-align:middle}
.badge.label{background:#b26b00}.badge.span{background:#6a3d9a}
.evidence li{margin:.25em 0}.evidence blockquote{margin:.1em 0 .1em .2em;padding-left:.5em;border-left:3px solid #e0c200;
       white-space:pre-wrap;overflow-wrap:anywhere}
.evidence li.unverified blockquote{border-left-color:#b42318;text-decoration:underline wavy #b42318}
.reasoning{white-space:pre-wrap;overflow-wrap:anywhere}
details>summary{cursor:pointer}details.panel,details.stage{margin:.4em 0}
details.stage>summary,details.panel>summary{font-weight:600}
details.sub{margin:.15em 0 .15em 1em;font-size:.92em}details.json pre{max-height:30em;overflow:auto}
ol.turns{padding-left:1.2em}li.turn{margin:.5em 0;padding:.3em .4em;border-bottom:1px dotted #ccc}
.turnhead code.call{background:#eef3fb;padding:0 .3em;border-radius:3px}.why{color:#444;font-style:italic}
.claims table{width:100%}.claims th{overflow-wrap:normal;white-space:nowrap}.score{font-weight:700}
ol.timeline{list-style:none;margin:0;padding:0}
li.step{border:1px solid #e3e3e3;border-left:5px solid #e3e3e3;border-radius:4px;margin:.35em 0;padding:.35em .6em;background:#fff}
li.step.inspan{border-left-color:#6a3d9a;background:#f8f4fc}
li.step.labelled{border-left-color:#b26b00;background:#fff8ec}
li.step.decisive{border-left-color:#d62728;background:#fff1f0;box-shadow:0 0 0 2px #d62728 inset}
li.step:target{outline:3px solid #0b5cad}
.stephead{font-size:.88em;color:#444}.stephead b{color:#111}
.text{white-space:pre-wrap;overflow-wrap:anywhere;font-size:.9em}
pre.code{white-space:pre;overflow-wrap:normal;overflow-x:auto;max-height:40em;margin:.2em 0;font-size:.85em}
pre.code .add{background:#e6ffec;display:inline-block;min-width:100%}pre.code .del{background:#ffebe9;display:inline-block;min-width:100%}
pre.code .hunk{color:#6f42c1}.stephead .obs{color:#666;font-style:italic}details.mid>summary{font-size:.85em}
.part{margin-top:.25em}.part>.muted{font-size:.8em;text-transform:uppercase;letter-spacing:.03em}
details.fold>summary .head{color:#333}
mark.ev{background:#ffe45c;padding:0 .1em;border-radius:2px}
.task{background:#f6f8fa;padding:.4em .6em;border-radius:4px}
.final pre.code{max-height:none}
.note{color:#555;font-size:.9em}
"""

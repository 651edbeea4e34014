// The sweep index (localfa/view/index.py writes the page around this script).
// Rows arrive as one JSON block (never executed); every value is put on the page with
// textContent or as a DOM property, never as markup. Only the rows in view are in the DOM, so
// a sweep of any size opens at once. Sort, filters, search and hidden columns live in the URL's
// hash: a trace page's Back returns to the same view, and a view can be bookmarked.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("rows").textContent);
  const cols = data.columns;
  const rows = data.rows;
  const K = cols.length; // a row: one value per column, then [page, position on the page]
  const byKey = new Map(cols.map((c, i) => [c.key, i]));
  const ROW_H = 26;
  const OVERSCAN = 12;
  const MAX_CHOICES = 200; // a text column with more distinct values gets no suggestion list
  const grid = document.getElementById("grid");
  const table = grid.querySelector("table");
  const colgroup = table.querySelector("colgroup");
  const titles = table.querySelector("tr.titles");
  const filterRow = table.querySelector("tr.filters");
  const tbody = table.tBodies[0];
  const search = document.getElementById("q");
  const status = document.getElementById("status");
  const collator = new Intl.Collator("en", { numeric: true, sensitivity: "base" });
  const state = { q: "", filters: {}, sort: "", desc: false, hidden: new Set(data.hidden || []) };
  let shown = [];
  let selected = -1; // position in `shown`
  let pending = false;

  const hay = rows.map((r) => {
    const parts = [];
    for (let c = 0; c < K; c++) if (r[c] !== null && r[c] !== undefined) parts.push(String(r[c]));
    return parts.join("\u0001").toLowerCase();
  });

  function href(r) {
    const page = r[K], k = r[K + 1];
    return encodeURIComponent(data.pages) + "/" + String(page).padStart(5, "0") + ".html#d0-" + k;
  }

  function shownText(c, v) {
    if (v === null || v === undefined || v === "") return "";
    const col = cols[c];
    if (col.kind !== "num") return String(v);
    if (col.digits !== undefined) return Number(v).toFixed(col.digits);
    return Number(v).toLocaleString("en");
  }

  // ---- filters: "<3", ">=0.5", "2..5", "7", "none" for numbers; "a,b" any of, "!a" not, "=a" exactly for text
  function numberTest(expr) {
    const s = expr.trim();
    if (/^(none|-|—)$/i.test(s)) return (v) => v === null;
    let m = s.match(/^(-?\d*\.?\d+)\s*\.\.\s*(-?\d*\.?\d+)$/);
    if (m) {
      const a = Number(m[1]), b = Number(m[2]);
      return (v) => v !== null && v >= a && v <= b;
    }
    m = s.match(/^(<=|>=|!=|<|>|=)?\s*(-?\d*\.?\d+)$/);
    if (!m) return null;
    const x = Number(m[2]);
    switch (m[1] || "=") {
      case "<": return (v) => v !== null && v < x;
      case "<=": return (v) => v !== null && v <= x;
      case ">": return (v) => v !== null && v > x;
      case ">=": return (v) => v !== null && v >= x;
      case "!=": return (v) => v === null || v !== x;
      default: return (v) => v !== null && v === x;
    }
  }

  function textTest(expr) {
    const wanted = [], unwanted = [];
    for (const raw of expr.split(",")) {
      const t = raw.trim().toLowerCase();
      if (!t) continue;
      const not = t.startsWith("!");
      const body = not ? t.slice(1) : t;
      const exact = body.startsWith("=");
      const word = exact ? body.slice(1) : body;
      const test = exact ? (v) => v === word : (v) => v.includes(word);
      (not ? unwanted : wanted).push(test);
    }
    return (v) => {
      const s = v === null || v === undefined ? "" : String(v).toLowerCase();
      return (wanted.length === 0 || wanted.some((t) => t(s))) && !unwanted.some((t) => t(s));
    };
  }

  function compile() {
    const tests = [];
    for (const [key, expr] of Object.entries(state.filters)) {
      const c = byKey.get(key);
      const input = filterRow.querySelector('input[data-key="' + key + '"]');
      if (c === undefined || !expr.trim()) {
        if (input) input.classList.remove("bad");
        continue;
      }
      const test = cols[c].kind === "num" ? numberTest(expr) : textTest(expr);
      if (input) input.classList.toggle("bad", test === null);
      if (test) tests.push([c, test]);
    }
    return tests;
  }

  function apply() {
    const tests = compile();
    const words = state.q.toLowerCase().split(/\s+/).filter(Boolean);
    shown = [];
    for (let i = 0; i < rows.length; i++) {
      const r = rows[i];
      let ok = true;
      for (const [c, test] of tests) if (!test(r[c])) { ok = false; break; }
      if (ok && words.length) ok = words.every((w) => hay[i].includes(w));
      if (ok) shown.push(i);
    }
    const c = byKey.get(state.sort);
    if (c !== undefined) {
      const num = cols[c].kind === "num", sign = state.desc ? -1 : 1;
      shown.sort((a, b) => {
        const x = rows[a][c], y = rows[b][c];
        const nx = x === null || x === "", ny = y === null || y === "";
        if (nx || ny) return nx === ny ? a - b : nx ? 1 : -1; // empty cells last, either way
        const d = num ? x - y : collator.compare(String(x), String(y));
        return d === 0 ? a - b : sign * d;
      });
    }
    selected = Math.min(selected, shown.length - 1);
    say();
    saveHash();
    grid.scrollTop = 0;
    draw();
  }

  function say() {
    const traces = new Set(shown.map((i) => rows[i][byKey.get("trace")]));
    let text = shown.length.toLocaleString("en") + " of " + rows.length.toLocaleString("en") +
      " diagnoses · " + traces.size.toLocaleString("en") + " traces";
    const ok = byKey.get("step_ok");
    if (ok !== undefined) {
      let n = 0, right = 0;
      for (const i of shown) if (rows[i][ok]) { n++; if (rows[i][ok] === "yes") right++; }
      if (n) text += " · step right in " + right + " of " + n + " labelled (" + (right / n).toFixed(3) + ")";
    }
    status.textContent = text;
  }

  // ---- drawing: only the rows in view (plus a margin) are in the DOM
  function spacer(height) {
    const tr = document.createElement("tr");
    tr.className = "spacer";
    const td = document.createElement("td");
    td.colSpan = K;
    td.style.height = height + "px";
    tr.appendChild(td);
    return tr;
  }

  function draw() {
    pending = false;
    const top = Math.max(0, grid.scrollTop - titles.offsetHeight - filterRow.offsetHeight);
    const first = Math.max(0, Math.floor(top / ROW_H) - OVERSCAN);
    const last = Math.min(shown.length, Math.ceil((top + grid.clientHeight) / ROW_H) + OVERSCAN);
    const frag = document.createDocumentFragment();
    frag.appendChild(spacer(first * ROW_H));
    for (let p = first; p < last; p++) frag.appendChild(rowElement(p));
    frag.appendChild(spacer((shown.length - last) * ROW_H));
    tbody.replaceChildren(frag);
    if (!shown.length) {
      const tr = document.createElement("tr");
      const td = document.createElement("td");
      td.colSpan = K;
      td.className = "empty";
      td.textContent = "No diagnosis matches. Clear the filters to see them all.";
      tr.appendChild(td);
      tbody.appendChild(tr);
    }
  }

  function rowElement(p) {
    const i = shown[p], r = rows[i];
    const tr = document.createElement("tr");
    tr.dataset.p = p;
    if (p === selected) tr.className = "sel";
    if (r[byKey.get("stop")] === "error") tr.classList.add("error");
    for (let c = 0; c < K; c++) {
      const col = cols[c];
      const td = document.createElement("td");
      td.dataset.key = col.key;
      if (state.hidden.has(col.key)) td.hidden = true;
      if (col.kind === "num") td.className = "num";
      const text = shownText(c, r[c]);
      if (col.key === "trace") {
        const a = document.createElement("a");
        a.href = href(r);
        a.textContent = text;
        td.appendChild(a);
      } else {
        td.textContent = text;
        if ((col.key === "step_ok" || col.key === "agent_ok") && text) td.classList.add(text === "yes" ? "yes" : "no");
      }
      if (text.length > 12) td.title = text;
      tr.appendChild(td);
    }
    return tr;
  }

  function schedule() {
    if (!pending) {
      pending = true;
      requestAnimationFrame(draw);
    }
  }

  // ---- the header: titles to sort by, a filter per column, suggestions for text columns
  function buildHeader() {
    cols.forEach((col, c) => {
      const th = document.createElement("th");
      th.dataset.key = col.key;
      th.title = col.tip + " (click to sort)";
      th.textContent = col.title;
      th.addEventListener("click", () => sortBy(col.key));
      titles.appendChild(th);
      const fth = document.createElement("th");
      fth.dataset.key = col.key;
      const input = document.createElement("input");
      input.type = "search";
      input.dataset.key = col.key;
      input.placeholder = col.kind === "num" ? "<3" : "filter";
      input.setAttribute("aria-label", "filter " + col.title);
      input.autocomplete = "off";
      if (col.kind !== "num") attachChoices(input, c);
      input.addEventListener("input", () => {
        state.filters[col.key] = input.value;
        apply();
      });
      fth.appendChild(input);
      filterRow.appendChild(fth);
    });
  }

  function attachChoices(input, c) {
    const seen = new Set();
    for (const r of rows) {
      if (r[c] !== null && r[c] !== "") seen.add(String(r[c]));
      if (seen.size > MAX_CHOICES) return;
    }
    const list = document.createElement("datalist");
    list.id = "choices-" + c;
    for (const v of [...seen].sort(collator.compare)) {
      const o = document.createElement("option");
      o.value = v;
      list.appendChild(o);
    }
    document.body.appendChild(list);
    input.setAttribute("list", list.id);
  }

  function sortBy(key) {
    if (state.sort !== key) { state.sort = key; state.desc = false; }
    else if (!state.desc) state.desc = true;
    else { state.sort = ""; state.desc = false; }
    markSort();
    apply();
  }

  function markSort() {
    for (const th of titles.children) {
      th.classList.toggle("asc", th.dataset.key === state.sort && !state.desc);
      th.classList.toggle("desc", th.dataset.key === state.sort && state.desc);
    }
  }

  function buildColumnMenu() {
    const box = document.querySelector("#cols div");
    cols.forEach((col) => {
      const label = document.createElement("label");
      const check = document.createElement("input");
      check.type = "checkbox";
      check.checked = !state.hidden.has(col.key);
      check.addEventListener("change", () => {
        if (check.checked) state.hidden.delete(col.key); else state.hidden.add(col.key);
        showColumns();
        saveHash();
      });
      label.appendChild(check);
      label.appendChild(document.createTextNode(" " + col.title));
      box.appendChild(label);
    });
  }

  function showColumns() {
    for (const el of table.querySelectorAll("[data-key]")) el.hidden = state.hidden.has(el.dataset.key);
    layout();
  }

  // Fixed widths, except the last visible column, which takes what the window has left.
  function layout() {
    const visible = cols.filter((c) => !state.hidden.has(c.key));
    if (!visible.length) return;
    const last = visible[visible.length - 1];
    const fixed = visible.slice(0, -1).reduce((sum, c) => sum + c.width, 0);
    const lastWidth = Math.max(last.width, grid.clientWidth - fixed);
    colgroup.replaceChildren(...visible.map((c) => {
      const cg = document.createElement("col"); // one per shown column: a hidden <col> would still take its place
      cg.style.width = (c === last ? lastWidth : c.width) + "px";
      return cg;
    }));
    table.style.width = fixed + lastWidth + "px";
  }

  // ---- the view in the URL's hash
  function saveHash() {
    const p = new URLSearchParams();
    if (state.q) p.set("q", state.q);
    for (const [k, v] of Object.entries(state.filters)) if (v) p.set("f." + k, v);
    if (state.sort) p.set("sort", (state.desc ? "-" : "") + state.sort);
    const hidden = [...state.hidden].sort().join(",");
    if (hidden !== [...(data.hidden || [])].sort().join(",")) p.set("hide", hidden);
    const text = p.toString();
    history.replaceState(null, "", text ? "#" + text : location.pathname + location.search);
  }

  function loadHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    state.q = p.get("q") || "";
    state.filters = {};
    for (const [k, v] of p) if (k.startsWith("f.") && byKey.has(k.slice(2))) state.filters[k.slice(2)] = v;
    const sort = p.get("sort") || "";
    state.desc = sort.startsWith("-");
    state.sort = byKey.has(sort.replace(/^-/, "")) ? sort.replace(/^-/, "") : "";
    if (p.has("hide")) state.hidden = new Set(p.get("hide").split(",").filter((k) => byKey.has(k)));
    search.value = state.q;
    for (const input of filterRow.querySelectorAll("input")) input.value = state.filters[input.dataset.key] || "";
    document.querySelectorAll("#cols input").forEach((check, c) => { check.checked = !state.hidden.has(cols[c].key); });
    markSort();
    showColumns();
  }

  // ---- keys: / searches, j/k or arrows move, Enter opens, Esc leaves a box
  function select(p) {
    if (!shown.length) return;
    selected = Math.max(0, Math.min(shown.length - 1, p));
    const head = titles.offsetHeight + filterRow.offsetHeight;
    const y = selected * ROW_H;
    if (y < grid.scrollTop) grid.scrollTop = y;
    else if (y + ROW_H + head > grid.scrollTop + grid.clientHeight) grid.scrollTop = y + ROW_H + head - grid.clientHeight;
    draw();
  }

  function open(p) {
    if (p >= 0 && p < shown.length) location.href = href(rows[shown[p]]);
  }

  document.addEventListener("keydown", (ev) => {
    const typing = ev.target instanceof HTMLInputElement;
    if (ev.key === "Escape" && typing) { ev.target.blur(); return; }
    if (typing || ev.altKey || ev.ctrlKey || ev.metaKey) return;
    if (ev.key === "/") { ev.preventDefault(); search.focus(); search.select(); }
    else if (ev.key === "j" || ev.key === "ArrowDown") { ev.preventDefault(); select(selected + 1); }
    else if (ev.key === "k" || ev.key === "ArrowUp") { ev.preventDefault(); select(selected - 1); }
    else if (ev.key === "Enter" && selected >= 0) { ev.preventDefault(); open(selected); }
  });

  tbody.addEventListener("click", (ev) => {
    if (ev.target.closest("a")) return; // the trace link opens itself (and in a new tab when asked)
    const tr = ev.target.closest("tr[data-p]");
    if (tr) open(Number(tr.dataset.p));
  });
  search.addEventListener("input", () => { state.q = search.value; apply(); });
  document.getElementById("clear").addEventListener("click", () => {
    state.q = "";
    state.filters = {};
    search.value = "";
    for (const input of filterRow.querySelectorAll("input")) input.value = "";
    apply();
  });
  grid.addEventListener("scroll", schedule, { passive: true });
  window.addEventListener("resize", () => { layout(); schedule(); });
  window.addEventListener("hashchange", () => { loadHash(); apply(); });

  buildHeader();
  buildColumnMenu();
  loadHash();
  apply();
  document.body.dataset.readyMs = String(Math.round(performance.now())); // since the navigation began
  document.body.dataset.ready = "1";
})();

// loom workbench: edits, validates and runs pipelines on the server that serves this page, and
// shows what every processor did at every step. Plain JavaScript, no dependencies, no network
// access beyond this server.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k != null) e.append(k);
  return e;
};
const fmt = (x, d = 3) => (x == null || Number.isNaN(x) ? "–" : Number(x).toFixed(d));
const show = (s) => JSON.stringify(s ?? "").slice(1, -1); // a token's text, escapes visible

const state = {
  pipelines: [],
  views: {},
  lastExport: null,
  selected: null,
};

async function getJSON(path) {
  const r = await fetch(path);
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
  return r.json();
}

async function postJSON(path, body) {
  const r = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

// ---------------------------------------------------------------- editors

class Editor {
  constructor(side) {
    this.side = side;
    this.area = $(`#toml-${side}`);
    this.gutter = $(`#gutter-${side}`);
    this.issues = $(`#issues-${side}`);
    this.status = $(`#status-${side}`);
    this.source = $(`#source-${side}`);
    this.loaded = null; // the loaded pipeline this text came from, while unchanged
    this.valid = false;
    this.errorLines = new Set();
    this.timer = null;
    this.seq = 0;
    this.area.addEventListener("input", () => this.changed());
    this.area.addEventListener("scroll", () => { this.gutter.scrollTop = this.area.scrollTop; });
    this.area.addEventListener("keydown", (e) => {
      if (e.key === "Tab" && !e.shiftKey && !e.ctrlKey && !e.altKey && this.area.dataset.tabs === "on") {
        e.preventDefault();
        document.execCommand("insertText", false, "  ");
      }
    });
  }
  get text() { return this.area.value; }
  set(text, loaded) {
    this.area.value = text;
    this.loaded = loaded;
    this.source.textContent = loaded ? `loaded: ${loaded.name}` : "edited";
    this.renderGutter();
    clearTimeout(this.timer);
    this.status.textContent = "checking…";
    this.status.className = "status";
    this.validate();
  }
  changed() {
    if (this.loaded && this.text !== this.loaded.source) {
      this.loaded = null;
      this.source.textContent = "edited";
    }
    this.renderGutter();
    clearTimeout(this.timer);
    this.status.textContent = "checking…";
    this.status.className = "status";
    this.timer = setTimeout(() => this.validate(), 250);
  }
  renderGutter() {
    const n = this.text.split("\n").length;
    const lines = [];
    for (let i = 1; i <= n; i++) {
      const s = el("span", { text: String(i) });
      if (this.errorLines.has(i)) s.className = "err";
      lines.push(s);
    }
    this.gutter.replaceChildren(...lines);
    this.gutter.scrollTop = this.area.scrollTop;
  }
  async validate() {
    const seq = ++this.seq;
    let res;
    try {
      res = await postJSON("/loom/validate", { pipeline: this.text });
    } catch (err) {
      res = { status: 0, body: { ok: false, errors: [{ line: 0, text: String(err) }] } };
    }
    if (seq !== this.seq) return; // a newer edit is being checked
    const errors = res.body.ok ? [] : (res.body.errors || [{ line: 0, text: res.body.error ? res.body.error.message : "invalid" }]);
    this.valid = errors.length === 0;
    this.errorLines = new Set(errors.filter((e) => e.line > 0).map((e) => e.line));
    this.status.textContent = this.valid ? "valid" : `${errors.length} error${errors.length > 1 ? "s" : ""}`;
    this.status.className = "status " + (this.valid ? "ok" : "bad");
    this.issues.replaceChildren(...errors.map((e) => {
      const li = el("li", { tabindex: "0", "data-line": String(e.line) },
        el("b", { text: e.line > 0 ? `line ${e.line}: ` : "" }), e.line > 0 ? e.text.replace(/^[^:]*:\d+: /, "") : e.text);
      const go = () => this.gotoLine(e.line);
      li.addEventListener("click", go);
      li.addEventListener("keydown", (ev) => { if (ev.key === "Enter") go(); });
      return li;
    }));
    this.renderGutter();
  }
  gotoLine(line) {
    if (line <= 0) return;
    const lines = this.text.split("\n");
    let pos = 0;
    for (let i = 0; i < line - 1 && i < lines.length; i++) pos += lines[i].length + 1;
    this.area.focus();
    this.area.setSelectionRange(pos, pos + (lines[line - 1] || "").length);
    const lh = parseFloat(getComputedStyle(this.area).lineHeight) || 19;
    this.area.scrollTop = Math.max(0, (line - 3) * lh);
  }
  insert(snippet) {
    const t = this.text.replace(/\s*$/, "");
    this.area.value = t + "\n\n" + snippet + "\n";
    this.changed();
    this.area.focus();
  }
}

// ---------------------------------------------------------------- colours

// colourOf maps a value in [0, 1] (1 = confident) to a background colour.
function colourOf(v) {
  const x = Math.max(0, Math.min(1, v));
  const hue = 8 + x * 132; // red → green
  return `hsl(${hue.toFixed(0)} 70% ${(88 - 6 * x).toFixed(0)}%)`;
}

function tokenMeasure(tok, mode, topN) {
  const stages = tok.trace && tok.trace.stages;
  if (mode === "prob") {
    if (tok.score == null) return null;
    const p = Math.exp(tok.score);
    return { v: p, label: `p = ${fmt(p)}` };
  }
  if (!stages || stages.length === 0) return null;
  if (mode === "entropy") {
    const top = stages[stages.length - 1].top;
    const z = top.reduce((a, t) => a + t.value, 0);
    let h = 0;
    for (const t of top) if (t.value > 0) { const p = t.value / z; h -= p * Math.log(p); }
    const hmax = Math.log(Math.max(2, top.length));
    return { v: 1 - h / hmax, label: `entropy (top ${top.length}) = ${fmt(h)} nats` };
  }
  const raw = stages[0].top;
  const r = raw.findIndex((t) => t.id === tok.id);
  const rank = r < 0 ? raw.length : r;
  return { v: 1 - rank / Math.max(1, raw.length), label: r < 0 ? `rank > ${raw.length}` : `rank ${r + 1} under the model` };
}

// ---------------------------------------------------------------- runs

// RunView holds one run (streamed or opened from a file) and draws it.
class RunView {
  constructor(side) {
    this.side = side;
    this.root = $(`#run-${side}`);
    this.reset("");
  }
  reset(title) {
    this.title = title;
    this.seqs = new Map(); // seq index → {tokens: [{id, text, score, logprob, trace, mark}], finish}
    this.result = null;
    this.error = null;
    this.strategy = "";
    this.prompt = "";
    this.running = false;
    this.started = performance.now();
    if (state.selected && state.selected.view === this) {
      state.selected = null;
      state.pinned = false;
      $("#step").replaceChildren(el("p", { class: "hint", text: "Hover, click or focus a token (Tab, then ← →) to see what every processor did at that step." }));
    }
    this.render();
  }
  seq(i) {
    if (!this.seqs.has(i)) this.seqs.set(i, { tokens: [], finish: "", rejected: new Map() });
    return this.seqs.get(i);
  }
  onToken(ev) {
    if (ev.token < 0 && !ev.finished) return;
    const s = this.seq(ev.seq);
    if (ev.token >= 0 && ev.trace) {
      s.tokens.push({ id: ev.token, text: ev.trace.text, score: ev.score, trace: ev.trace });
    } else if (ev.token >= 0 && ev.text) {
      s.tokens.push({ id: ev.token, text: ev.text, score: ev.score, trace: null });
    }
    if (ev.finished) s.finish = ev.finish_reason;
    this.scheduleRender();
  }
  onRetract(ev) {
    const s = this.seq(ev.seq);
    let n = ev.bytes;
    while (n > 0 && s.tokens.length > 0) n -= new TextEncoder().encode(s.tokens.pop().text).length;
    this.scheduleRender();
  }
  // fromResult rebuilds the view from a whole Result (the end of a run, or an opened file).
  fromResult(res, strategy, promptTexts) {
    this.result = res;
    this.strategy = strategy || inferStrategy(res);
    this.seqs = new Map();
    // The prompt's tokens, each with its log-probability given the ones before it (a run's
    // result has them, and a file from loom run --json --prompt-logprobs, texts included).
    this.promptToks = res.prompt_logprobs ? res.prompt_tokens.map((id, i) => ({
      id, text: promptTexts ? promptTexts[i] : `⟨${id}⟩`,
      logprob: i > 0 ? res.prompt_logprobs[i] : null,
      top: res.prompt_top_logprobs ? res.prompt_top_logprobs[i] : null,
    })) : null;
    res.sequences.forEach((sq, i) => {
      const s = this.seq(i);
      s.finish = sq.finish_reason;
      s.detail = sq.finish_detail || "";
      s.sum = sq.sum_logprob;
      s.rank = sq.score;
      sq.tokens.forEach((id, k) => {
        const tr = sq.trace ? sq.trace[k] : null;
        s.tokens.push({
          id, text: tr ? tr.text : `⟨${id}⟩`,
          score: sq.scores ? sq.scores[k] : null,
          logprob: sq.logprobs ? sq.logprobs[k] : null,
          top: sq.top_logprobs ? sq.top_logprobs[k] : null,
          trace: tr && tr.stages ? tr : null,
        });
      });
    });
    markSpeculation(res, this);
    this.render();
  }
  scheduleRender() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => { this.pending = false; this.render(); });
  }
  render() {
    const head = el("div", { class: "run-head" }, el("h3", { text: this.title || "no run yet" }));
    if (this.strategy) head.append(el("span", { class: "meta", text: `strategy: ${this.strategy}` }));
    const res = this.result;
    if (res) {
      const st = res.stats || {};
      const t = res.timings || {};
      head.append(el("span", { class: "meta", text: `seed ${res.seed}` }),
        el("span", { class: "meta", text: `${res.generated_tokens} tokens generated · ${fmt(t.decode_tokens_per_second, 1)} tok/s` }),
        el("span", { class: "meta", text: `${st.forwards} forwards` }));
      if (st.drafted) {
        head.append(el("span", { class: "meta", "data-acceptance": String(st.acceptance_rate),
          text: `drafted ${st.drafted}, accepted ${st.accepted} (acceptance ${(100 * st.acceptance_rate).toFixed(1)}%)` }));
      }
    } else if (this.running) {
      head.append(el("span", { class: "meta", text: "running…" }));
    }
    if (this.error) head.append(el("span", { class: "meta err", role: "alert", text: this.error }));
    const parts = [head];
    if (this.strategy === "speculative" || (res && res.stats && res.stats.drafted)) {
      parts.push(el("div", { class: "legend" },
        el("span", {}, el("i", { style: "box-shadow: inset 0 -3px 0 var(--good)" }), "draft accepted"),
        el("span", {}, el("i", { style: "box-shadow: inset 0 -3px 0 #d9822b" }), "target's correction"),
        el("span", { class: "rejected", text: "rejected draft" })));
    }
    const mode = $("#colour").value;
    for (const [i, s] of [...this.seqs.entries()].sort((a, b) => a[0] - b[0])) {
      const label = el("div", { class: "seq-label" }, el("b", { text: this.strategy === "beam" ? `beam ${i}` : `#${i}` }));
      if (s.sum != null && this.strategy === "beam") label.append(el("div", { text: `Σ ${fmt(s.sum, 2)}` }));
      const toks = el("div", { class: "tokens", "data-seq": String(i) });
      if (i === 0 && this.promptToks) toks.append(this.renderPrompt());
      else if (i === 0 && this.prompt) toks.append(el("span", { class: "prompt-text", text: this.prompt }));
      s.tokens.forEach((t, k) => {
        const m = tokenMeasure(t, mode);
        const span = el("span", { class: "tok" + (t.mark ? " " + t.mark : ""), tabindex: "0",
          "data-seq": String(i), "data-step": String(k), "data-token": String(t.id), text: t.text });
        if (m) { span.style.background = colourOf(m.v); span.title = `step ${k} · ${show(t.text)} · ${m.label}`; }
        if (state.selected && state.selected.view === this && state.selected.seq === i && state.selected.step === k) span.classList.add("selected");
        if (this.divergeAt === k && i === 0) span.classList.add("diverge");
        span.addEventListener("mouseenter", () => showStep(this, i, k, false));
        span.addEventListener("click", () => showStep(this, i, k, true));
        span.addEventListener("focus", () => showStep(this, i, k, true));
        span.addEventListener("keydown", (e) => moveFocus(e, span));
        toks.append(span);
        const rej = s.rejected.get(k);
        if (rej) toks.append(el("span", { class: "rejected", title: "draft tokens the target rejected", text: rej.join("") }));
      });
      if (s.finish) toks.append(el("span", { class: "finish", text: `⏎ ${s.finish}` }));
      parts.push(el("div", { class: "seq" }, label, toks));
    }
    if (res && res.lineage && this.strategy === "beam") parts.push(beamTree(res));
    this.root.replaceChildren(...parts);
  }
}

// renderPrompt draws the prompt's tokens coloured by their probability under the model given
// the tokens before them: where the model was surprised by the prompt.
RunView.prototype.renderPrompt = function () {
  const box = el("span", { class: "prompt-toks", title: "the prompt, each token coloured by its probability given the ones before it" });
  this.promptToks.forEach((t, k) => {
    const span = el("span", { class: "ptok", "data-pos": String(k), text: t.text });
    if (t.logprob == null) {
      span.title = `prompt token ${k} · ${show(t.text)} · the first: nothing predicts it`;
    } else {
      const p = Math.exp(t.logprob);
      span.dataset.logprob = String(t.logprob);
      span.style.background = colourOf(p);
      const alts = (t.top || []).map((a) => `${show(a.text)} ${fmt(Math.exp(a.value))}`).join(", ");
      span.title = `prompt token ${k} · ${show(t.text)} · p = ${fmt(p)} under the model` + (alts ? ` · likeliest: ${alts}` : "");
    }
    box.append(span);
  });
  return box;
};

function inferStrategy(res) {
  const ops = new Set((res.lineage || []).map((e) => e.op));
  if (ops.has("verify")) return "speculative";
  if (ops.has("discard")) return "beam";
  return res.sequences.length > 1 ? "sample (n > 1)" : "";
}

// markSpeculation marks the tokens of each returned sequence from the lineage: a token a
// verification proposed and the target kept is "accepted"; the token appended where a draft
// was refused is the target's "corrected" one, with the refused draft tokens shown after it.
function markSpeculation(res, view) {
  if (!res.lineage) return;
  const out = new Map(); // session seq → output index
  for (const e of res.lineage) if (e.op === "output") out.set(e.seq, e.index || 0);
  const draft = new Map(); // seq → {tokens, texts}
  for (const e of res.lineage) {
    if (!out.has(e.seq)) continue;
    const s = view.seqs.get(out.get(e.seq));
    if (!s) continue;
    if (e.op === "verify") draft.set(e.seq, { tokens: e.tokens.slice(), texts: e.texts.slice() });
    if (e.op === "truncate") s.tokens.slice(e.len).forEach((t) => { t.mark = ""; });
    if (e.op !== "append") continue;
    const k = e.len - 1;
    const t = s.tokens[k];
    const d = draft.get(e.seq);
    if (!t || !d || d.tokens.length === 0) continue;
    if (d.tokens[0] === e.tokens[0]) {
      t.mark = "accepted";
      d.tokens.shift(); d.texts.shift();
    } else {
      t.mark = "corrected";
      s.rejected.set(k, d.texts.slice());
      draft.delete(e.seq);
    }
  }
}

// beamTree draws a beam search's lineage as a tree: every appended token a node, returned
// beams in colour, pruned branches grey.
function beamTree(res) {
  const nodes = [{ id: 0, parent: -1, depth: 0, text: "⟨prompt⟩", lp: 0, sum: 0, kids: [] }];
  const head = new Map();
  const out = new Map();
  for (const e of res.lineage) {
    switch (e.op) {
      case "start": head.set(e.seq, 0); break;
      case "fork": head.set(e.seq, head.get(e.parent || 0)); break; // JSON omits a zero parent
      case "append": {
        const p = nodes[head.get(e.seq)];
        const n = { id: nodes.length, parent: p.id, depth: p.depth + 1, text: e.texts[0], lp: e.logprob || 0, sum: p.sum + (e.logprob || 0), kids: [] };
        nodes.push(n); p.kids.push(n.id); head.set(e.seq, n.id);
        break;
      }
      case "truncate": {
        let n = nodes[head.get(e.seq)];
        while (n.depth > e.len) n = nodes[n.parent];
        head.set(e.seq, n.id);
        break;
      }
      case "output": out.set(head.get(e.seq), e.index || 0); break;
    }
  }
  const kept = new Map(); // node → best output index through it
  for (const [leaf, idx] of out) for (let n = leaf; n >= 0; n = nodes[n].parent) {
    if (!kept.has(n) || kept.get(n) > idx) kept.set(n, idx);
  }
  // Layout: leaves top to bottom in depth-first order, parents centred on their children.
  const rowH = 18, colW = 92, pad = 8;
  let row = 0;
  const place = (id) => {
    const n = nodes[id];
    n.kids.sort((a, b) => (kept.has(b) ? 1 : 0) - (kept.has(a) ? 1 : 0) || nodes[b].sum - nodes[a].sum);
    if (n.kids.length === 0) { n.y = row++ * rowH; return; }
    n.kids.forEach(place);
    n.y = (nodes[n.kids[0]].y + nodes[n.kids[n.kids.length - 1]].y) / 2;
  };
  place(0);
  const maxDepth = Math.max(...nodes.map((n) => n.depth));
  const W = pad * 2 + (maxDepth + 1) * colW, H = pad * 2 + row * rowH;
  const NS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("width", W); svg.setAttribute("height", H);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `beam search tree: ${nodes.length - 1} tokens tried, ${out.size} beams returned`);
  const mk = (tag, attrs) => { const e = document.createElementNS(NS, tag); for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v); return e; };
  for (const n of nodes) {
    n.x = pad + n.depth * colW;
    n.cy = pad + n.y + rowH / 2;
  }
  for (const n of nodes) if (n.parent >= 0) {
    const p = nodes[n.parent];
    svg.append(mk("path", { class: "edge" + (kept.has(n.id) ? " kept" : ""), d: `M${p.x + 76},${p.cy} C${p.x + 84},${p.cy} ${n.x - 8},${n.cy} ${n.x},${n.cy}` }));
  }
  for (const n of nodes) {
    const g = mk("g", { class: kept.has(n.id) ? "kept" : "pruned", "data-depth": String(n.depth) });
    const title = mk("title", {});
    title.textContent = `${show(n.text)} · logprob ${fmt(n.lp)} · Σ ${fmt(n.sum)}` + (kept.has(n.id) ? ` · on beam ${kept.get(n.id)}` : " · pruned");
    g.append(title, mk("rect", { class: "node" + (kept.has(n.id) ? " kept" : " pruned"), x: n.x, y: n.cy - 8, width: 76, height: 16, rx: 4 }));
    const t = mk("text", { x: n.x + 4, y: n.cy + 4 });
    const label = show(n.text);
    t.textContent = label.length > 10 ? label.slice(0, 9) + "…" : label;
    g.append(t);
    svg.append(g);
  }
  return el("div", { class: "tree" }, el("h4", { text: `Beam tree: ${nodes.length - 1} tokens tried, ${out.size} returned (grey: pruned)` }), svg);
}

function moveFocus(e, span) {
  if (e.key !== "ArrowRight" && e.key !== "ArrowLeft") return;
  const all = [...span.parentElement.querySelectorAll(".tok")];
  const i = all.indexOf(span) + (e.key === "ArrowRight" ? 1 : -1);
  if (all[i]) { e.preventDefault(); all[i].focus(); }
}

// showStep fills the side panel with one step's story.
function showStep(view, seq, step, pin) {
  if (!pin && state.pinned) return;
  if (pin) state.pinned = true;
  state.selected = { view, seq, step };
  document.querySelectorAll(".tok.selected").forEach((t) => t.classList.remove("selected"));
  const span = view.root.querySelector(`.tok[data-seq="${seq}"][data-step="${step}"]`);
  if (span) span.classList.add("selected");
  const tok = view.seqs.get(seq).tokens[step];
  const panel = $("#step");
  const dl = el("dl", {},
    el("dt", { text: "chosen" }), el("dd", { "data-field": "chosen" , text: `${show(tok.text)} (id ${tok.id})` }),
    el("dt", { text: "raw logprob" }), el("dd", { "data-field": "logprob", text: fmt(tok.logprob) }),
    el("dt", { text: "final score" }), el("dd", { "data-field": "score", text: fmt(tok.score) }));
  const kids = [el("h3", { text: `${view.title} · ${view.strategy === "beam" ? "beam" : "sequence"} ${seq} · step ${step}` }), dl];
  if (state.pinned) kids.push(el("p", { class: "hint", text: "Pinned: Esc to follow the mouse again." }));
  if (!tok.trace) {
    kids.push(el("p", { class: "hint", text: "No processor trace for this step (a token the strategy appended without processing a row)." }));
  } else {
    for (const [si, stage] of tok.trace.stages.entries()) {
      const max = Math.max(...stage.top.map((t) => t.value), 1e-9);
      const box = el("div", { class: "stage", "data-stage": String(si), "data-processor": stage.processor },
        el("div", { class: "stage-head" }, el("b", { text: stage.processor }), el("span", { "data-kept": String(stage.kept), text: `kept ${stage.kept.toLocaleString()}` })));
      for (const t of stage.top) {
        box.append(el("div", { class: "bar" + (t.id === tok.id ? " chosen" : ""), "data-id": String(t.id), "data-value": String(t.value) },
          el("span", { class: "label", title: show(t.text), text: show(t.text) }),
          el("span", { class: "track" }, el("span", { class: "fill", style: `display:block;width:${(100 * t.value / max).toFixed(1)}%` })),
          el("span", { class: "value", text: fmt(t.value) })));
      }
      kids.push(box);
    }
  }
  panel.replaceChildren(...kids);
}

// ---------------------------------------------------------------- running

async function runOne(side) {
  const ed = state.editors[side];
  const view = state.views[side];
  const body = {
    prompt: $("#prompt").value,
    seed: Number($("#seed").value),
    max_tokens: Number($("#max-tokens").value),
    trace: Number($("#trace").value),
  };
  let title;
  if (ed.loaded) { body.model = ed.loaded.name; title = ed.loaded.name; } else { body.pipeline = ed.text; title = `${side}: edited pipeline`; }
  view.reset(title);
  view.prompt = body.prompt;
  view.running = true;
  view.render();
  const r = await fetch("/loom/run", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  if (!r.ok || !(r.headers.get("Content-Type") || "").startsWith("text/event-stream")) {
    const j = await r.json().catch(() => ({}));
    view.error = j.error ? j.error.message : `HTTP ${r.status}`;
    view.running = false;
    view.render();
    return null;
  }
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  let result = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (!line.startsWith("data: ")) continue;
      const msg = JSON.parse(line.slice(6));
      if (msg.type === "token") view.onToken(msg);
      else if (msg.type === "retract") view.onRetract(msg);
      else if (msg.type === "result") { result = msg; view.strategy = msg.strategy; view.fromResult(msg.result, msg.strategy, msg.prompt_texts); }
      else if (msg.type === "error") { view.error = msg.error.message; }
    }
  }
  view.running = false;
  view.render();
  return result;
}

async function run() {
  const compare = $("#compare").checked;
  const btn = $("#run");
  btn.disabled = true;
  $("#diff").hidden = true;
  for (const v of Object.values(state.views)) v.divergeAt = undefined;
  try {
    const sides = compare ? ["A", "B"] : ["A"];
    const results = await Promise.all(sides.map(runOne));
    if (results[0]) {
      state.lastExport = { ...results[0].result, prompt_texts: results[0].prompt_texts }; // as loom run --json --prompt-logprobs
      $("#export").disabled = false;
    }
    if (compare && results[0] && results[1]) markDivergence(results[0].result, results[1].result);
  } finally {
    btn.disabled = false;
  }
}

// markDivergence marks the first step where the two runs' first sequences differ.
function markDivergence(a, b) {
  const ta = a.sequences[0] ? a.sequences[0].tokens : [];
  const tb = b.sequences[0] ? b.sequences[0].tokens : [];
  let k = 0;
  while (k < ta.length && k < tb.length && ta[k] === tb[k]) k++;
  const banner = $("#diff");
  banner.hidden = false;
  if (k === ta.length && k === tb.length) {
    banner.className = "banner same";
    banner.textContent = `The two runs are identical (${k} tokens).`;
    banner.dataset.diverge = "-1";
    return;
  }
  const text = (r, i) => (r.sequences[0].trace && r.sequences[0].trace[i] ? show(r.sequences[0].trace[i].text) : i < r.sequences[0].tokens.length ? `id ${r.sequences[0].tokens[i]}` : "(end)");
  banner.className = "banner";
  banner.dataset.diverge = String(k);
  banner.textContent = `First difference at step ${k}: A chose "${text(a, k)}", B chose "${text(b, k)}".`;
  state.views.A.divergeAt = k;
  state.views.B.divergeAt = k;
  state.views.A.render();
  state.views.B.render();
}

// ---------------------------------------------------------------- parts, pipelines, files

async function loadParts() {
  const parts = await getJSON("/loom/parts");
  const list = $("#parts-list");
  const sections = [["processors", "Logits processors ([[processors]])", "processors"], ["stopping", "Stopping criteria ([[stopping]])", "stopping"], ["strategies", "Strategies ([strategy])", "strategy"]];
  for (const [key, title, table] of sections) {
    list.append(el("h3", { text: title }));
    for (const p of parts[key]) {
      const rows = p.params.map((q) => el("tr", {}, el("td", { text: q.name }), el("td", { text: q.type }),
        el("td", { text: (q.required ? "required" : `default ${JSON.stringify(q.default)}`) + (q.doc ? ` — ${q.doc}` : "") })));
      const snippet = () => {
        const lines = [table === "strategy" ? "[strategy]" : `[[${table}]]`, `type = "${p.type}"`];
        for (const q of p.params) if (q.required) lines.push(`${q.name} = ${placeholder(q.type)}`);
        return lines.join("\n");
      };
      list.append(el("details", { class: "part", "data-type": p.type },
        el("summary", {}, p.type, el("small", { text: p.source !== "built-in" ? p.source : "" })),
        el("p", { class: "doc", text: p.doc }),
        rows.length ? el("table", {}, ...rows) : el("p", { class: "doc", text: "no parameters" }),
        el("button", { class: "insert", onclick: () => state.editors.A.insert(snippet()), text: "Insert into A" })));
    }
  }
}

function placeholder(type) {
  if (type === "float") return "1.0";
  if (type === "int") return "1";
  if (type === "bool") return "false";
  if (type === "string") return '""';
  if (type.startsWith("list")) return "[]";
  return "{}";
}

async function loadPipelines() {
  const { pipelines } = await getJSON("/loom/pipelines");
  state.pipelines = pipelines;
  const picker = $("#picker");
  picker.replaceChildren(...pipelines.map((p) => el("option", { value: p.name, text: `${p.name} (${p.strategy})` })));
  const first = pipelines.find((p) => p.name === "default") || pipelines[0];
  if (first) {
    picker.value = first.name;
    state.editors.A.set(first.source, first);
    state.editors.B.set(first.source, first);
  }
  picker.addEventListener("change", () => {
    const p = pipelines.find((x) => x.name === picker.value);
    state.editors.A.set(p.source, p);
  });
}

function exportRun() {
  if (!state.lastExport) return;
  const blob = new Blob([JSON.stringify(state.lastExport, null, 2)], { type: "application/json" });
  const a = el("a", { href: URL.createObjectURL(blob), download: "loom-run.json" });
  document.body.append(a);
  a.click();
  a.remove();
}

async function openFile(file) {
  const view = state.views.A;
  try {
    const res = JSON.parse(await file.text());
    if (!Array.isArray(res.sequences)) throw new Error("not a loom run: no sequences");
    view.reset(`${file.name} (opened)`);
    view.fromResult(res, "", res.prompt_texts);
    state.lastExport = res;
    $("#export").disabled = false;
  } catch (err) {
    view.reset(file.name);
    view.error = `cannot open ${file.name}: ${err.message}`;
    view.render();
  }
}

// ---------------------------------------------------------------- start

function init() {
  state.editors = { A: new Editor("A"), B: new Editor("B") };
  state.views = { A: new RunView("A"), B: new RunView("B") };
  $("#run").addEventListener("click", run);
  document.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(); }
    if (e.key === "Escape") { state.pinned = false; $("#parts").hidden = true; $("#parts-toggle").setAttribute("aria-expanded", "false"); }
  });
  $("#compare").addEventListener("change", (e) => {
    $("#editor-B").hidden = !e.target.checked;
    $("#run-B").hidden = !e.target.checked;
  });
  $("#colour").addEventListener("change", () => Object.values(state.views).forEach((v) => v.render()));
  $("#parts-toggle").addEventListener("click", () => {
    const p = $("#parts");
    p.hidden = !p.hidden;
    $("#parts-toggle").setAttribute("aria-expanded", String(!p.hidden));
    if (!p.hidden) $("#parts-close").focus();
  });
  $("#parts-close").addEventListener("click", () => { $("#parts").hidden = true; $("#parts-toggle").setAttribute("aria-expanded", "false"); $("#parts-toggle").focus(); });
  $("#export").addEventListener("click", exportRun);
  $("#open").addEventListener("change", (e) => { if (e.target.files[0]) openFile(e.target.files[0]); });
  $(".top label[for=open]").setAttribute("tabindex", "0");
  $(".top label[for=open]").addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); $("#open").click(); } });
  Promise.all([loadPipelines(), loadParts()]).catch((err) => { state.views.A.error = String(err); state.views.A.render(); });
}

init();

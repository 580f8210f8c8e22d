"""The report page's script (inlined into the HTML). It decodes the embedded data with the
browser's own DecompressionStream, renders one page of questions at a time, and decodes a
block of question details only when one of its questions is opened, so 10,000 questions x 7
methods open quickly. Every text from the data is set with textContent (never innerHTML):
question text and model output are untrusted.
"""

JS = r"""
"use strict";
const SRC = {kg: "#1f77b4", wiki: "#2ca02c", web: "#ff7f0e", domain: "#9467bd", topic: "#1f77b4",
             entity: "#57606a"};
const PAGE = 50;
let INDEX = null, shown = [], page = 0;
const blocks = new Map();

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") node.textContent = v; else node.setAttribute(k, v);
  }
  for (const child of children) if (child != null) node.append(child);
  return node;
}
function svgEl(tag, attrs, text) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text != null) node.textContent = text;
  return node;
}
async function decode(id) {
  const text = document.getElementById(id).textContent.trim();
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}
async function details(slot) {
  const b = Math.floor(slot / INDEX.block);
  if (!blocks.has(b)) blocks.set(b, decode("blk-" + b));
  return (await blocks.get(b))[slot - b * INDEX.block];
}

function option(value, label) { return el("option", {value: String(value), text: label}); }
function fillSelect(id, items, first) {
  const select = document.getElementById(id);
  if (first) select.append(option("", first));
  items.forEach((item, i) => select.append(option(i, item)));
}

function matches(q, f) {
  if (f.dataset !== "" && q[1] !== +f.dataset) return false;
  const methods = q[4];
  if (f.result !== "") {
    const pick = f.method === "" ? INDEX.methods : [INDEX.methods[+f.method]];
    const ok = pick.some(m => {
      const r = methods[m];
      if (f.result === "missing") return !r;
      if (!r) return false;
      if (f.result === "error") return r[2] === 1;
      return r[1] === (f.result === "right" ? 1 : 0);
    });
    if (!ok) return false;
  }
  if (f.a !== "") { const r = methods[INDEX.methods[+f.a]]; if (!r || r[1] !== 1) return false; }
  if (f.b !== "") { const r = methods[INDEX.methods[+f.b]]; if (!r || r[1] !== 0) return false; }
  if (f.text) {
    const hay = (q[0] + " " + q[2] + " " + q[3].join(" ")).toLowerCase();
    if (!hay.includes(f.text)) return false;
  }
  return true;
}
function applyFilters() {
  const value = id => document.getElementById(id).value;
  const f = {dataset: value("f-dataset"), method: value("f-method"), result: value("f-result"),
             a: value("f-a"), b: value("f-b"), text: value("f-text").trim().toLowerCase()};
  shown = [];
  INDEX.questions.forEach((q, slot) => { if (matches(q, f)) shown.push(slot); });
  page = 0;
  render();
}

function verdict(r) {
  if (!r) return el("span", {class: "none", text: "no record"});
  const mark = r[2] === 1 ? "⚠ " : r[1] === 1 ? "✓ " : r[1] === 0 ? "✗ " : "";
  const cls = r[2] === 1 ? "oke" : r[1] === 1 ? "ok1" : r[1] === 0 ? "ok0" : "";
  return el("span", {class: cls, title: r[2] === 1 ? "error" : "", text: mark + (r[0] || "(no answer)")});
}
function render() {
  const body = document.getElementById("qbody");
  body.replaceChildren();
  const start = page * PAGE, end = Math.min(shown.length, start + PAGE);
  for (const slot of shown.slice(start, end)) {
    const q = INDEX.questions[slot];
    const row = el("tr", {class: "qrow", "data-slot": String(slot), "data-id": q[0]},
      el("td", {text: q[0]}), el("td", {text: INDEX.datasets[q[1]]}),
      el("td", {text: q[2] || "(no record of any method)"}), el("td", {text: q[3].join(" | ")}));
    for (const m of INDEX.methods) row.append(el("td", {"data-method": m}, verdict(q[4][m])));
    row.addEventListener("click", () => toggle(row, slot));
    body.append(row);
  }
  document.getElementById("count").textContent =
    shown.length ? `${start + 1}–${end} of ${shown.length} questions` : "no question matches";
  document.getElementById("prev").disabled = page === 0;
  document.getElementById("next").disabled = end >= shown.length;
}

async function toggle(row, slot) {
  const next = row.nextElementSibling;
  if (next && next.classList.contains("detail")) { next.remove(); return; }
  const cell = el("td", {colspan: String(4 + INDEX.methods.length)}, el("span", {text: "loading…"}));
  const detailRow = el("tr", {class: "detail", "data-slot": String(slot)}, cell);
  row.after(detailRow);
  try {
    const d = await details(slot);
    cell.replaceChildren(renderQuestion(INDEX.questions[slot], d));
  } catch (err) {
    cell.replaceChildren(el("span", {class: "ok0", text: "could not read this question: " + err}));
  }
}

function renderQuestion(q, d) {
  const box = el("div", {class: "qdetail"});
  box.append(el("div", {}, el("b", {text: "Question: "}), q[2] || "(unknown)"));
  box.append(el("div", {}, el("b", {text: "Gold: "}), q[3].join(" | ") || "(none)"));
  for (const m of INDEX.methods) {
    const r = q[4][m];
    if (!r) { box.append(el("div", {class: "card none", text: m + ": no record"})); continue; }
    box.append(renderMethod(m, r, d[m]));
  }
  return box;
}
function renderMethod(m, r, d) {
  const card = el("div", {class: "card", "data-method": m});
  card.append(el("h3", {}, m + " — ", verdict(r)));
  const facts = [`answer source: ${d.src}`, `${r[3]} calls`, `${r[4]} prompt tokens`, `${r[5]} s`];
  if (d.ab) facts.push("abstained");
  for (const [k, v] of Object.entries(d.x)) facts.push(`${k}: ${v}`);
  card.append(el("div", {class: "sub", text: facts.join(" · ")}));
  if (d.ps.length > 1) card.append(el("div", {}, el("b", {text: "Predictions: "}), d.ps.join(" | ")));
  if (d.e) card.append(el("pre", {class: "ok0", text: "error: " + d.e}));
  if (d.g.n.length) card.append(evidenceGraph(d.g));
  else card.append(el("div", {class: "none", text: "no evidence paths"}));
  if (d.g.c.length) {
    const list = el("ul", {class: "chunks"});
    for (const [id, title, quote, src, models] of d.g.c) {
      const item = el("li", {}, el("span", {class: "src src-" + src, text: src}), " ",
                      el("code", {text: id}), " ", el("b", {text: title}), " “", quote, "”");
      for (const model of models || [])  // the model's words about the quote: labelled, never quoted
        item.append(el("div", {class: "model-text"}, el("span", {class: "model-label",
          text: "model's rewording", title: "written by the model, not the source's words"}), " ", model));
      list.append(item);
    }
    card.append(el("div", {}, el("b", {text: "Chunks"}), list));
  }
  if (d.calls.length) card.append(callsTable(d));
  return card;
}
function callsTable(d) {
  const table = el("table", {class: "calls"}, el("tr", {},
    ...["stage", "prompt tok", "completion tok", "seconds", "cache", "error"].map(h => el("th", {text: h}))));
  for (const c of d.calls)
    table.append(el("tr", {}, ...[c[0], c[1], c[2], c[3], c[4] ? "hit" : "", c[5] || ""]
      .map(v => el("td", {text: String(v)}))));
  const box = el("details", {class: "llmcalls"}, el("summary", {text: `LLM calls (${d.calls.length})`}), table);
  d.tx.forEach(([stage, messages, reply, error], i) => {
    const call = el("details", {class: "call"}, el("summary", {text: `call ${i + 1}: ${stage}`}));
    for (const [role, text] of messages)
      call.append(el("div", {}, el("b", {text: role}),
                     el("pre", {text: typeof text === "number" ? INDEX.strings[text] : text})));
    call.append(el("div", {}, el("b", {text: "reply"}), el("pre", {text: reply || ""})));
    if (error) call.append(el("pre", {class: "ok0", text: "error: " + error}));
    box.append(call);
  });
  return box;
}
function evidenceGraph(g) {
  const colW = 320, rowH = 30, nodeW = 170;
  const rows = new Map(), pos = [];
  for (const [label, layer] of g.n) {
    const k = rows.get(layer) || 0; rows.set(layer, k + 1);
    pos.push([16 + layer * colW, 20 + k * rowH]);
  }
  const width = 16 + (Math.max(...g.n.map(n => n[1])) + 1) * colW;
  const height = 30 + Math.max(...rows.values()) * rowH + (g.more ? 16 : 0);
  const svg = svgEl("svg", {class: "evgraph", viewBox: `0 0 ${width} ${height}`, width, height});
  for (const [a, b, rel, src] of g.e) {
    const [x1, y1] = pos[a], [x2, y2] = pos[b];
    const sx = x1 + (x2 >= x1 ? nodeW : 0), ex = x2 + (x2 >= x1 ? 0 : nodeW);
    svg.append(svgEl("line", {x1: sx, y1: y1, x2: ex, y2: y2, stroke: SRC[src] || "#57606a",
                               "stroke-width": 1.5, class: "ev-edge", "data-source": src}));
    const t = svgEl("text", {x: (sx + ex) / 2, y: (y1 + y2) / 2 - 3, "text-anchor": "middle",
                             fill: SRC[src] || "#57606a"}, rel.length > 26 ? rel.slice(0, 25) + "…" : rel);
    t.append(svgEl("title", {}, rel));
    svg.append(t);
  }
  g.n.forEach(([label, layer, kind], i) => {
    const [x, y] = pos[i];
    const doc = kind === "wiki" || kind === "web" || kind === "domain";
    const node = svgEl("g", {class: "ev-node", "data-kind": kind});
    node.append(svgEl("rect", {x, y: y - 11, width: nodeW, height: 22, rx: doc ? 2 : 11,
      fill: doc ? SRC[kind] : "#fff", "fill-opacity": doc ? 0.15 : 1, stroke: SRC[kind] || "#57606a",
      "stroke-width": kind === "topic" ? 3 : 1.2}));
    node.append(svgEl("text", {x: x + 8, y: y + 4}, label.length > 24 ? label.slice(0, 23) + "…" : label));
    node.append(svgEl("title", {}, label));
    svg.append(node);
  });
  if (g.more) svg.append(svgEl("text", {x: 16, y: height - 6}, `${g.more} more nodes not drawn`));
  return svg;
}

async function start() {
  const status = document.getElementById("status");
  try {
    INDEX = await decode("index-data");
    fillSelect("f-dataset", INDEX.datasets, "all datasets");
    fillSelect("f-method", INDEX.methods, "any method");
    fillSelect("f-a", INDEX.methods, "—");
    fillSelect("f-b", INDEX.methods, "—");
    const head = document.getElementById("qhead");
    for (const m of INDEX.methods) head.append(el("th", {text: m}));
    for (const id of ["f-dataset", "f-method", "f-result", "f-a", "f-b"])
      document.getElementById(id).addEventListener("change", applyFilters);
    document.getElementById("f-text").addEventListener("input", applyFilters);
    document.getElementById("prev").addEventListener("click", () => { page--; render(); });
    document.getElementById("next").addEventListener("click", () => { page++; render(); });
    applyFilters();
    status.textContent = "";
    document.body.dataset.ready = "1";
  } catch (err) {
    status.textContent = "The question browser could not start: " + err;
    document.body.dataset.ready = "error";
  }
}
start();
"""

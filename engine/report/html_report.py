"""`report RUN [RUN ...] --out FILE.html`: one self-contained HTML file of one or more runs.

The page holds `eval`'s metrics table per dataset (run) and method, SVG plots (accuracy against
mean LLM calls, prompt tokens and seconds per question; accuracy by question group; HydraRAG's
stage-recall funnel) and a question browser. Nothing is fetched at view time: style, script and
data are inline, so the file opens from a USB stick in an air-gapped room.

The browser's data is gzip'd JSON in base64 (`extract` describes it): one index block decoded
when the page opens, and the question details in blocks of `block_size` questions, decoded only
when a question of the block is opened. Base64 holds no `<`, so no data can end its script
element; the script sets every text with textContent, so nothing in a record becomes markup.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import time
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from engine.report import plots
from engine.report.extract import ReportData
from engine.report.loading import RunSource, method_records, method_transcripts, open_runs
from engine.report.page_script import JS
from engine.report.page_style import CSS
from engine.report.stage_recall import HYDRA_STAGES, is_hydra, stage_recall
from ingest.base.errors import InputError
from ingest.base.progress import progress_bar

BLOCK_SIZE = 100
GROUP_FIELDS_SHOWN = ("hops", "kind", "needs", "type", "level")


@dataclass
class ReportStats:
    """What `write_report` did: where, how big, how long."""

    out: Path
    questions: int
    records: int
    bytes: int
    seconds: float
    problems: list[str] = field(default_factory=list)


def _pack(value: Any) -> str:
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def metrics_table(sources: list[RunSource]) -> str:
    """`eval`'s headline numbers, one row per dataset and method."""
    head = ("dataset", "method", "records", "missing", "errors", "Hits@1", "EM(set)", "F1(tok)",
            "abstained", "calls/q", "prompt tok/q", "s/q", "LLM s/q")
    rows = ["<table class='metrics' id='metrics'><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for source in sources:
        for method, s in (source.summary.get("methods") or {}).items():
            cells = (source.label, method, s.get("records", 0), s.get("missing", 0), s.get("errors", 0),
                     _pct(s.get("hits1")), _pct(s.get("em")), _pct(s.get("f1_tok")), s.get("abstained", 0),
                     f"{s.get('llm_calls', 0):.1f}", f"{s.get('prompt_tokens', 0):,.0f}",
                     f"{s.get('seconds', 0):.2f}", f"{s.get('llm_seconds', 0):.2f}")
            rows.append("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in cells) + "</tr>")
    rows.append("</table>")
    return "".join(rows)


def problems_list(sources: list[RunSource], extra: list[str]) -> str:
    found = [f"{s.label}: {p}" for s in sources for p in s.summary.get("problems") or []]
    found += [f"{s.label} / {m}: {p}" for s in sources for m, sc in (s.summary.get("methods") or {}).items()
              for p in sc.get("problems") or []]
    found += extra
    if not found:
        return ""
    return "<ul class='problems'>" + "".join(f"<li>{escape(p)}</li>" for p in found) + "</ul>"


def cost_plots(sources: list[RunSource], methods: list[str]) -> str:
    """Accuracy against calls, prompt tokens and seconds per question."""
    points: dict[str, list[plots.Point]] = {"llm_calls": [], "prompt_tokens": [], "seconds": []}
    for d, source in enumerate(sources):
        for method, s in (source.summary.get("methods") or {}).items():
            if s.get("hits1") is None:
                continue
            for key, found in points.items():
                value = float(s.get(key) or 0.0)
                found.append(plots.Point(value, float(s["hits1"]), methods.index(method), d,
                                         f"{method} on {source.label}: Hits@1 {100 * s['hits1']:.1f}%, "
                                         f"{key.replace('_', ' ')} {value:,.2f}"))
    if not points["llm_calls"]:
        return "<p class='none'>No scored records (no gold answers): nothing to plot.</p>"
    return "".join([
        plots.scatter("Accuracy vs LLM calls", "mean LLM calls per question", points["llm_calls"]),
        plots.scatter("Accuracy vs prompt tokens", "mean prompt tokens per question", points["prompt_tokens"]),
        plots.scatter("Accuracy vs seconds", "mean seconds per question", points["seconds"])])


def group_plots(sources: list[RunSource], methods: list[str]) -> str:
    """Hits@1 per value of a question grouping field (hops, kind, ...), one plot per dataset and field."""
    parts = []
    for source in sources:
        scored = source.summary.get("methods") or {}
        fields = [f for f in GROUP_FIELDS_SHOWN if any(f in (s.get("by") or {}) for s in scored.values())]
        for name in fields:
            values = sorted({v for s in scored.values() for v in (s.get("by") or {}).get(name, {})},
                            key=lambda v: (len(v), v))
            series = [(m, methods.index(m), [((s.get("by") or {}).get(name, {}).get(v) or {}).get("hits1")
                                            for v in values]) for m, s in scored.items()]
            parts.append(plots.grouped_bars(f"{source.label}: Hits@1 by {name}", values, series))
    return "".join(parts) or "<p class='none'>The questions files have no grouping field (hops, kind...).</p>"


def write_report(paths: list[Path], out: Path, *, prompt_chars: int = 6000, with_calls: bool = True,
                 block_size: int = BLOCK_SIZE) -> ReportStats:
    """Write the HTML report of the runs at `paths` to `out` (atomically: a crash leaves no half file)."""
    started = time.perf_counter()
    out = Path(out)
    if out.suffix.lower() not in (".html", ".htm"):
        raise InputError(f"{out}: the report is an HTML file; name it *.html")
    sources = open_runs([Path(p) for p in paths])
    data = ReportData(prompt_chars=prompt_chars, datasets=[s.label for s in sources])
    for d, source in enumerate(sources):
        for qid in source.question_ids:  # the run's order, also for questions without a record
            data.question_slot(d, qid, "", [])
    funnels: list[str] = []
    problems: list[str] = []
    total = sum(int(s.get("records") or 0) for src in sources for s in (src.summary.get("methods") or {}).values())
    records_seen = 0
    with progress_bar("report: reading records", total, unit="records") as bar:
        for d, source in enumerate(sources):
            for method in source.methods:
                records, _ = method_records(source, method)  # its problems are in eval's summary
                calls = method_transcripts(source, method) if with_calls else {}
                for record in records:
                    data.add_record(d, record, calls.get(str(record["id"])))
                    bar.advance(1)
                records_seen += len(records)
                if any(is_hydra(r) for r in records):
                    recall = stage_recall(records)
                    funnels.append(plots.funnel(f"{source.label}: {method} stage recall",
                                                [(label, recall[key]) for key, label in HYDRA_STAGES],
                                                recall["n"]))
                del records, calls
    for method in (m for s in sources for m in s.methods):
        if method not in data.methods:
            data.methods.append(method)  # a method whose record file is empty still gets a column
    index = data.index_json()
    index["block"] = block_size
    blocks = [data.details[k:k + block_size] for k in range(0, len(data.details), block_size)]
    html = _page(sources, data, index, blocks, funnels, problems)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, out)
    return ReportStats(out, len(data.questions), records_seen, out.stat().st_size,
                       time.perf_counter() - started, problems)


def _page(sources: list[RunSource], data: ReportData, index: dict[str, Any], blocks: list[list[Any]],
          funnels: list[str], problems: list[str]) -> str:
    title = "localkg run report: " + ", ".join(s.label for s in sources)
    funnel_html = "".join(funnels) or "<p class='none'>No hydra records in these runs.</p>"
    filters = (
        "<div class='filters'>"
        "<label>dataset<select id='f-dataset'></select></label>"
        "<label>method<select id='f-method'></select></label>"
        "<label>result<select id='f-result'><option value=''>any</option><option value='right'>right</option>"
        "<option value='wrong'>wrong</option><option value='error'>error</option>"
        "<option value='missing'>no record</option></select></label>"
        "<label>right with<select id='f-a'></select></label>"
        "<label>wrong with<select id='f-b'></select></label>"
        "<label>search<input id='f-text' type='search' placeholder='id, question or gold'></label>"
        "</div>")
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f"<p class='sub'>{len(data.questions):,} questions, {len(data.methods)} methods, "
        f"{len(sources)} run(s). Right/wrong is Hits@1 as <code>eval</code> scores it.</p>",
        "<h2>Metrics</h2>", metrics_table(sources), problems_list(sources, problems),
        "<h2>Accuracy and cost</h2>", plots.legend(data.methods, data.datasets),
        f"<div class='plots' id='cost-plots'>{cost_plots(sources, data.methods)}</div>",
        "<h2>Accuracy by question group</h2>",
        f"<div class='plots' id='group-plots'>{group_plots(sources, data.methods)}</div>",
        "<h2>HydraRAG stage recall</h2>",
        "<p class='sub'>Share of questions whose gold answer is still held at each stage (any phase).</p>",
        f"<div class='plots' id='funnels'>{funnel_html}</div>",
        "<h2>Questions</h2>", "<div id='status'>decoding…</div>", filters,
        "<div class='pager'><button id='prev'>◀ previous</button><button id='next'>next ▶</button>"
        "<span id='count'></span></div>",
        "<table class='questions'><thead><tr id='qhead'><th>id</th><th>dataset</th><th>question</th>"
        "<th>gold</th></tr></thead><tbody id='qbody'></tbody></table>",
        f"<script type='application/x-gzip-base64' id='index-data'>{_pack(index)}</script>",
    ]
    parts += [f"<script type='application/x-gzip-base64' id='blk-{k}'>{_pack(block)}</script>"
              for k, block in enumerate(blocks)]
    parts.append(f"<script>{JS}</script></body></html>")
    return "\n".join(parts)

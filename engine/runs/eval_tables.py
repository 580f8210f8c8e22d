"""Scores as Markdown: one run's table of methods (`format_markdown`, what `eval` prints) and
several runs side by side (`format_comparison`, `eval RUN RUN ...`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from engine.runs.method_scores import support_label
from engine.runs.run_folder import read_run
from ingest.base.errors import InputError


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _num(value: float, digits: int = 1) -> str:
    return f"{value:,.{digits}f}"


LEGEND = (
    "n: scored records. abstained: answered \"not found\" (counted wrong below). Hits@1: best prediction = a "
    "gold answer (normalised, aliases). EM(set), F1(set): over answer sets (the entities a method commits to; "
    "\"Sochi\" vs \"Sochi, Russia\" scores 0). EM(tok), F1(tok): HotpotQA's official token-level EM and F1 of "
    "the prediction string, best over gold answers and aliases (that pair scores EM 0, F1 66.7). paper EM: "
    "ToG's lower-case substring match."
)


def format_markdown(summary: dict[str, Any]) -> str:
    """The evaluation as a Markdown table (rates in percent), with notes below it."""
    questions = summary.get("questions") or {}
    title = Path(questions["path"]).name if questions.get("path") else summary["run_dir"]
    lines = [f"### {title}: {questions.get('count', '?')} questions ({summary['run_dir']})", ""]
    shards = summary.get("shards")
    if shards:  # engine/runs/shards.py: several shard folders scored as one run
        lines += [f"Shards {', '.join(map(str, shards['present']))} of {shards['count']} merged "
                  f"({summary.get('status')}).", ""]
    header = ["method", "n", "missing", "errors", "abstained", "Hits@1", "EM(set)", "F1(set)", "EM(tok)", "F1(tok)",
              "paper EM", "LLM calls/q", "prompt tok/q", "compl. tok/q", "LLM s/q", "s/q", "path overlap",
              "KG / doc / both / LLM %"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
    notes: list[str] = []
    for method, s in summary["methods"].items():
        overlap = s.get("path_overlap")
        overlap_text = "–" if not overlap else (
            f"{_pct(overlap['mean_correct'])} ({overlap['correct']}); all {_pct(overlap['mean_all'])}")
        sources = s.get("answer_source") or {}
        source_text = " / ".join(_pct(sources.get(k, 0.0)) for k in ("kg", "doc", "both", "llm")) if sources else "–"
        missing = "?" if s.get("expected") is None else str(s["missing"])
        row = [method, str(s["scored"]), missing, str(s["errors"]), str(s.get("abstained", 0)), _pct(s["hits1"]),
               _pct(s["em"]), _pct(s["f1"]), _pct(s.get("em_tok")), _pct(s.get("f1_tok")), _pct(s["paper_em"]), _num(s["llm_calls"]), _num(s["prompt_tokens"], 0), _num(s["completion_tokens"], 0),
               _num(s.get("llm_seconds", 0.0), 2), _num(s["seconds"], 2), overlap_text, source_text]
        lines.append("| " + " | ".join(row) + " |")
        if s.get("abstained"):
            answered = s["scored"] - s["abstained"]
            notes.append(f"{method}: abstained on {s['abstained']} of {s['scored']} questions; Hits@1 over the "
                         f"{answered} it answered: {_pct(s.get('hits1_answered'))}")
        if s["records"] - s["scored"]:
            notes.append(f"{method}: {s['records'] - s['scored']} records have no gold answer (not scored)")
        if s["missing"]:
            notes.append(f"{method}: {s['missing']} questions have no record yet (e.g. {', '.join(s['missing_ids'][:3])})")
        for name, values in (s.get("by") or {}).items():
            parts = [f"{value} {_pct(v['hits1'])} ({round(v['hits1'] * v['n'])}/{v['n']})" for value, v in values.items()]
            notes.append(f"{method}: Hits@1 by {name}: " + ", ".join(parts))
        notes.extend(_hydra_notes(method, s))
        notes.extend(f"{method}: {p}" for p in s.get("problems", []))
    notes.extend(summary.get("problems", []))
    lines += [
        "",
        LEGEND + " Path overlap: mean share of gold relations explored, over correctly answered questions "
        "(their count), then over all with a gold path. LLM s/q: model time per question as computed (replays "
        "from the cache count their original time); s/q: wall time of this run.",
    ]
    if notes:
        lines += ["", *(f"- {n}" for n in notes)]
    return "\n".join(lines)


def _hydra_notes(method: str, s: dict[str, Any]) -> list[str]:
    """Report lines for calls by stage (any method), supporting sources and answering phase."""
    notes = []
    by_stage = s.get("calls_by_stage") or {}
    if by_stage:
        tokens = s.get("prompt_tokens_by_stage") or {}
        parts = [f"{stage} {_num(calls, 2)} ({_num(tokens.get(stage, 0.0), 0)} tok)"
                 for stage, calls in sorted(by_stage.items(), key=lambda kv: (-kv[1], kv[0]))]
        notes.append(f"{method}: LLM calls/q by stage (prompt tok/q): " + ", ".join(parts))
    support = s.get("support_sources")
    if support:
        def line(shares: dict[str, float]) -> str:
            shown = " / ".join(f"{support_label(c)} {_pct(v)}" for c, v in shares.items() if v)
            return shown + (", other categories 0" if not all(shares.values()) else "")
        text = f"{method}: supporting sources (HydraRAG Fig. 8, % of {support['n']} records): {line(support['shares'])}"
        if support.get("correct"):
            text += f"; of the {support['correct']} right: {line(support['shares_correct'])}"
        notes.append(text)
    phases = s.get("phases") or {}
    if phases:
        order = {p: i for i, p in enumerate(("initial", "refined", "predicted", "fallback"))}
        parts = [f"{p} {_pct(v['share'])} (n={v['n']}, Hits@1 {_pct(v.get('hits1'))})"
                 for p, v in sorted(phases.items(), key=lambda kv: (order.get(kv[0], 99), kv[0]))]
        notes.append(f"{method}: phase that answered (% of records): " + ", ".join(parts))
    return notes


# The metrics `eval RUN RUN ...` compares by default, and how each is named and printed.
COMPARE_METRICS = ("hits1", "em", "f1_tok", "abstained", "llm_calls", "prompt_tokens")
METRIC_NAMES = {
    "hits1": "Hits@1 (%)", "em": "EM(set) (%)", "f1": "F1(set) (%)", "em_tok": "EM(tok) (%)",
    "f1_tok": "F1(tok) (%)", "paper_em": "paper EM (%)", "hits1_answered": "Hits@1 of answered (%)",
    "cache_hit_rate": "cache hits (%)", "abstained": "abstained", "errors": "errors", "missing": "missing",
    "scored": "n", "llm_calls": "LLM calls/q", "prompt_tokens": "prompt tok/q",
    "completion_tokens": "compl. tok/q", "llm_seconds": "LLM s/q", "seconds": "s/q",
}
_RATES = frozenset({"hits1", "em", "f1", "em_tok", "f1_tok", "paper_em", "hits1_answered", "cache_hit_rate"})
_COUNTS = frozenset({"abstained", "errors", "missing", "scored"})
COMPARABLE = tuple(METRIC_NAMES)


def run_labels(summaries: list[dict[str, Any]]) -> list[str]:
    """Short distinct column names: the last parts of the run folders' paths, as few as tell them
    apart (`eval/metaqa-2-hop`, `eval-1.5b/metaqa-2-hop`); the whole paths if nothing shorter does."""
    parts = [Path(s["run_dir"]).parts for s in summaries]
    for depth in range(1, max((len(p) for p in parts), default=1) + 1):
        names = ["/".join(p[-depth:]) for p in parts]
        if len(set(names)) == len(names):
            return names
    return [s["run_dir"] for s in summaries]


def _cell(metric: str, value: Any) -> str:
    if value is None or isinstance(value, dict | list):
        return "–"
    if metric in _RATES:
        return _pct(float(value))
    if metric in _COUNTS:
        return str(int(value))
    return _num(float(value), 2 if metric.endswith("seconds") else 1)


def _config_differences(summaries: list[dict[str, Any]], labels: list[str]) -> list[str]:
    """Per run, the method config values that differ from the first run that has the method."""
    configs = [((read_run(Path(s["run_dir"])) or {}).get("methods") or {}) for s in summaries]
    lines = []
    for method in dict.fromkeys(m for c in configs for m in c):
        first = next(c[method].get("config") or {} for c in configs if method in c)
        for label, c in zip(labels, configs, strict=True):
            config = (c.get(method) or {}).get("config") or {}
            changed = [f"{k}={json.dumps(config.get(k))}" for k in sorted(set(first) | set(config))
                       if config and first.get(k) != config.get(k)]
            if changed:
                lines.append(f"{label}: {method} {', '.join(changed)}")
    return lines


def format_comparison(summaries: list[dict[str, Any]], metrics: Iterable[str] | None = None) -> str:
    """Several runs side by side: per metric one Markdown table of methods x runs, then what each
    run is (folder, model, questions) and where method configs differ between runs."""
    metrics = list(metrics or COMPARE_METRICS)
    unknown = [m for m in metrics if m not in METRIC_NAMES]
    if unknown:
        raise InputError(f"unknown metric {', '.join(unknown)}; known: {', '.join(COMPARABLE)}")
    labels = run_labels(summaries)
    methods = list(dict.fromkeys(m for s in summaries for m in s["methods"]))
    lines = [f"### {len(summaries)} runs side by side", ""]
    for metric in metrics:
        lines += [f"**{METRIC_NAMES[metric]}**", "", "| method | " + " | ".join(labels) + " |",
                  "|---|" + "---:|" * len(labels)]
        for method in methods:
            cells = [_cell(metric, (s["methods"].get(method) or {}).get(metric)) if method in s["methods"] else "–"
                     for s in summaries]
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
        lines.append("")
    lines.append("Runs:")
    for label, s in zip(labels, summaries, strict=True):
        model = (s.get("model") or {}).get("llm") or "default model"
        questions = s.get("questions") or {}
        asked = Path(questions["path"]).name if questions.get("path") else "?"
        lines.append(f"- {label}: {s['run_dir']} ({model}; {asked}, {questions.get('count', '?')} questions)")
    differences = _config_differences(summaries, labels)
    if differences:
        lines += ["", "Configs that differ from the first run:", *(f"- {d}" for d in differences)]
    notes = [f"{label}: {m}: {p}" for label, s in zip(labels, summaries, strict=True)
             for m, ms in s["methods"].items() for p in ms.get("problems", [])]
    notes += [f"{label}: {p}" for label, s in zip(labels, summaries, strict=True) for p in s.get("problems", [])]
    if notes:
        lines += ["", "Problems:", *(f"- {n}" for n in notes)]
    lines += ["", LEGEND]
    return "\n".join(lines)

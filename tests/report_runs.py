"""Hand-made run folders for the report tests, shaped like the records `batch` writes (tog with
KG paths, rag with document chunks, io without evidence, hydra with its stage trace), with the
awkward cases a real run can hold: an error record, a missing record, a torn last line, and
text that tries to break out of the page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HOSTILE = '</script><img src=x onerror="window.__pwned=1">'
QUESTIONS = [
    {"id": "q1", "question": "Who founded Norvale Motors?", "answers": ["Oskar Thelling"], "hops": 1},
    {"id": "q2", "question": f"Where is Kestrel Cell Works headquartered? {HOSTILE}", "answers": ["Torvassa"], "hops": 2},
    {"id": "q3", "question": "Which river runs through Torvassa?", "answers": ["Vell"], "hops": 2},
]


def _calls(*stages: str) -> list[dict[str, Any]]:
    return [{"stage": s, "prompt_tokens": 100 + 10 * i, "cached_tokens": 0, "completion_tokens": 12,
             "seconds": 0.5, "cache_hit": False, "error": None, "compute_seconds": 0.5}
            for i, s in enumerate(stages)]


def record(question: dict[str, Any], method: str, prediction: str, **fields: Any) -> dict[str, Any]:
    base = {"id": question["id"], "question": question["question"], "answers": question["answers"],
            "method": method, "prediction": prediction, "predictions": [prediction],
            "answer_source": "llm", "topic_entities": [], "paths": [], "llm_calls": _calls("answer"),
            "stage_seconds": {}, "seconds": 0.5, "config_hash": f"h-{method}", "correct": {},
            "error": None, "extra": {}, "abstained": False}
    base.update(fields)
    return base


def kg_path(*triples: tuple[str, str, str], source: str = "kg") -> dict[str, Any]:
    return {"source": source, "triples": [list(t) for t in triples], "sentences": [], "chunk_ids": [],
            "relation_ids": [f"rel/{t[1].replace(' ', '_')}" for t in triples], "score": 0.5,
            "triple_ids": [], "titles": []}


def doc_path(chunk_id: str, title: str, sentence: str, source: str = "domain") -> dict[str, Any]:
    return {"source": source, "triples": [], "sentences": [sentence], "chunk_ids": [chunk_id],
            "relation_ids": [], "score": 0.7, "triple_ids": [], "titles": [title]}


def topic(label: str) -> list[dict[str, Any]]:
    return [{"id": f"e/{label}", "label": label, "mention": label, "reason": "given"}]


def hydra_extra(gold_in_subgraph: bool, selected: bool) -> dict[str, Any]:
    return {"phase": "initial", "support": "KG", "support_sources": ["kg"],
            "subgraph": {"nodes": 10, "gold": ["x"] if gold_in_subgraph else []},
            "trace": [{"phase": "initial", "bfs": [{"entities": [], "gold": ["x"] if gold_in_subgraph else []}],
                       "relevance": {"gold": ["x"] if gold_in_subgraph else []},
                       "cross": {"gold": ["x"] if selected else []},
                       "selected": {"gold": ["x"] if selected else []}}]}


def write_run(folder: Path, records: dict[str, list[dict[str, Any]]], *, ids: list[str] | None = None,
              transcripts: dict[str, dict[str, list[dict[str, Any]]]] | None = None,
              torn: str | None = None) -> Path:
    """A run folder: run.json (its selection, the questions file) and one JSONL per method."""
    folder.mkdir(parents=True, exist_ok=True)
    questions = folder.parent / f"{folder.name}-questions.jsonl"  # outside: eval reads every *.jsonl
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    run = {"localkg_run": 1, "status": "complete",
           "questions": {"path": str(questions), "format": "jsonl", "count": len(ids or QUESTIONS),
                         "ids": ids or [q["id"] for q in QUESTIONS]},
           "methods": {m: {} for m in records}}
    (folder / "run.json").write_text(json.dumps(run), encoding="utf-8")
    for method, found in records.items():
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in found)
        if method == torn:
            text += '{"id": "q9", "meth'  # a run killed mid-write
        (folder / f"{method}.jsonl").write_text(text, encoding="utf-8")
    for method, by_id in (transcripts or {}).items():
        (folder / "calls").mkdir(exist_ok=True)
        lines = [{"id": qid, "method": method, "config_hash": "h", "calls": calls} for qid, calls in by_id.items()]
        (folder / "calls" / f"{method}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return folder


def awkward_run(folder: Path) -> Path:
    """Three questions x tog, rag, io, hydra: q3 has no tog record, rag errs on q2, io has no
    paths at all, hydra's file ends in a torn line, and q2's text and replies are hostile."""
    q1, q2, q3 = QUESTIONS
    tog = [record(q1, "tog", "Oskar Thelling", answer_source="kg", topic_entities=topic("Norvale Motors"),
                  paths=[kg_path(("Norvale Motors", "founded by", "Oskar Thelling"))],
                  llm_calls=_calls("relation_prune", "reasoning"), extra={"stopped": "sufficient", "depth": 1}),
           record(q2, "tog", f"Lumera {HOSTILE}", answer_source="kg", topic_entities=topic("Kestrel Cell Works"),
                  paths=[kg_path(("Kestrel Cell Works", "subsidiary of", "Lumera Industrial Trust"),
                                 ("Lumera Industrial Trust", "headquartered in", "Lumera"))])]
    rag = [record(q1, "rag", "Oskar Thelling", answer_source="doc",
                  paths=[doc_path("reports/norvale.md#0", "Norvale Motors", "Norvale Motors was founded by Oskar Thelling."),
                         doc_path("wiki/Thelling#2", "Oskar Thelling", f"A wiki line. {HOSTILE}", source="wiki")]),
           record(q2, "rag", "", error="RuntimeError: the model server went away"),
           record(q3, "rag", "Vell", answer_source="doc",
                  paths=[doc_path("web/torvassa#0", "Torvassa", "The Vell runs through Torvassa.", source="web")])]
    io = [record(q, "io", p) for q, p in ((q1, "Henry Ford"), (q2, "Torvassa"), (q3, "Danube"))]
    hydra = [record(q1, "hydra", "Oskar Thelling", answer_source="kg", topic_entities=topic("Norvale Motors"),
                    paths=[kg_path(("Norvale Motors", "founded by", "Oskar Thelling"))],
                    llm_calls=_calls("analysis", "selection", "answer"), extra=hydra_extra(True, True)),
             record(q2, "hydra", "Caspenne", answer_source="kg", extra=hydra_extra(True, False))]
    transcripts = {"tog": {"q2": [{"stage": "reasoning", "messages": [
        {"role": "system", "content": "You answer from triples."},
        {"role": "user", "content": f"Question: {HOSTILE}"}], "reply": f'{{"answer": "{HOSTILE}"}}',
        "error": None, "cache_hit": False}]}}
    return write_run(folder, {"tog": tog, "rag": rag, "io": io, "hydra": hydra}, transcripts=transcripts,
                     torn="hydra")

"""`eval`'s HydraRAG lines (supporting sources, answering phase, LLM calls by stage) and the
stage recall of `bench.trace_stats`, on hand-made records laid out as engine/methods/hydra/method.py
writes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import trace_stats
from engine.runs.eval_tables import format_markdown
from engine.runs.method_scores import record_support, score_method, support_category


def call(stage: str, prompt: int) -> dict[str, Any]:
    return {"stage": stage, "prompt_tokens": prompt, "cached_tokens": 0, "completion_tokens": 5,
            "seconds": 0.1, "cache_hit": False}


def record(rid: str, prediction: str, answers: list[str], extra: dict[str, Any] | None = None,
           calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"id": rid, "question": f"q {rid}", "answers": answers, "method": "hydra", "prediction": prediction,
            "predictions": [prediction] if prediction else [], "answer_source": "kg", "paths": [],
            "llm_calls": calls or [], "seconds": 1.0, "config_hash": "h", "extra": extra or {}}


# --- eval -------------------------------------------------------------------------------------

def test_support_category_follows_the_papers_order() -> None:
    assert support_category(["wiki", "kg"]) == "kg+wiki"
    assert support_category(["web", "KG", "wiki"]) == "kg+wiki+web"
    assert support_category([]) == "llm"
    assert support_category(["forum", "web"]) == "web+forum"
    assert record_support({"support_sources": ["web", "kg"]}) == "kg+web"
    assert record_support({"support": "KG+Wiki"}) == "kg+wiki"
    assert record_support({"support": "LLM"}) == "llm"
    assert record_support({"phase": "initial"}) is None


def hydra_records() -> list[dict[str, Any]]:
    return [
        record("a", "Paris", ["Paris"], {"support_sources": ["kg"], "phase": "initial"},
               [call("analysis", 300), call("selection", 500), call("answer", 400)]),
        record("b", "Rome", ["Rome"], {"support_sources": ["kg", "wiki"], "phase": "initial"},
               [call("analysis", 300), call("answer", 200)]),
        record("c", "Oslo", ["Bergen"], {"support_sources": ["kg"], "phase": "refined"},
               [call("analysis", 300), call("answer", 400), call("refine", 100), call("answer", 300)]),
        record("d", "Lima", ["Lima"], {"support": "LLM", "phase": "fallback"},
               [call("analysis", 300), call("answer_fallback", 250)]),
    ]


def test_supporting_sources_phases_and_calls_by_stage() -> None:
    s = score_method("hydra", hydra_records(), None)
    support = s.support_sources
    assert support is not None and support["n"] == 4 and support["correct"] == 3
    assert support["shares"]["kg"] == 0.5 and support["shares"]["kg+wiki"] == 0.25
    assert support["shares"]["llm"] == 0.25 and support["shares"]["web"] == 0.0
    assert list(support["shares"])[:8] == ["kg", "wiki", "web", "kg+wiki", "kg+web", "wiki+web",
                                           "kg+wiki+web", "llm"]
    # of the 3 right (a, b, d): one each of KG, KG+Wiki, LLM
    assert support["shares_correct"]["kg"] == pytest.approx(1 / 3)
    assert support["shares_correct"]["llm"] == pytest.approx(1 / 3)
    assert s.phases == {"fallback": {"n": 1, "share": 0.25, "hits1": 1.0},
                        "initial": {"n": 2, "share": 0.5, "hits1": 1.0},
                        "refined": {"n": 1, "share": 0.25, "hits1": 0.0}}
    assert s.calls_by_stage == {"analysis": 1.0, "answer": 1.0, "answer_fallback": 0.25,
                                "refine": 0.25, "selection": 0.25}
    assert s.prompt_tokens_by_stage["answer"] == pytest.approx((400 + 200 + 400 + 300) / 4)
    assert s.llm_calls == pytest.approx(11 / 4)  # the existing total is unchanged


def test_report_lines() -> None:
    s = score_method("hydra", hydra_records(), None).to_dict()
    table = format_markdown({"run_dir": "r", "questions": {}, "methods": {"hydra": s}, "problems": []})
    assert ("hydra: supporting sources (HydraRAG Fig. 8, % of 4 records): KG 50.0 / KG+Wiki 25.0 / LLM 25.0, "
            "other categories 0; of the 3 right: KG 33.3 / KG+Wiki 33.3 / LLM 33.3, other categories 0") in table
    # phases in the pipeline's order, not alphabetical; a phase no record ended in is left out
    assert ("hydra: phase that answered (% of records): initial 50.0 (n=2, Hits@1 100.0), "
            "refined 25.0 (n=1, Hits@1 0.0), fallback 25.0 (n=1, Hits@1 100.0)") in table
    assert "hydra: LLM calls/q by stage (prompt tok/q): analysis 1.00 (300 tok), answer 1.00 (325 tok)" in table
    # the table's columns are as before
    assert "| hydra | 4 | ? | 0 | 0 | 75.0 |" in table


def test_methods_without_hydra_fields_get_only_the_stage_line() -> None:
    plain = score_method("tog", [record("a", "Paris", ["Paris"], {}, [call("relation_prune", 100)])], None)
    assert plain.support_sources is None and plain.phases == {}
    assert plain.calls_by_stage == {"relation_prune": 1.0}
    table = format_markdown({"run_dir": "r", "questions": {}, "methods": {"tog": plain.to_dict()}, "problems": []})
    assert "supporting sources" not in table and "phase that answered" not in table
    assert "tog: LLM calls/q by stage (prompt tok/q): relation_prune 1.00 (100 tok)" in table
    silent = score_method("io", [record("a", "Paris", ["Paris"])], None)
    assert silent.calls_by_stage == {}


# --- trace_stats: stage recall ------------------------------------------------------------------

def hydra_trace(gold_up_to: str, phase: str = "initial", answer: str = "X") -> dict[str, Any]:
    """A hydra record whose gold answer "Gold" reaches the stages up to `gold_up_to`."""
    order = ["subgraph", "bfs", "relevance", "cross", "selected"]
    has = {k: order.index(k) <= order.index(gold_up_to) if gold_up_to in order else False for k in order}

    def stage(key: str) -> dict[str, Any]:
        return {"entities": ["A", "Gold"] if has[key] else ["A"], "gold": ["Gold"] if has[key] else []}

    step = {"phase": "initial", "bfs": [{"depth": 1, **stage("bfs")}], "relevance": {"n": 5, **stage("relevance")},
            "cross": {"n": 2, **stage("cross")}, "selected": {"texts": ["A - r - ?"], **stage("selected")}}
    steps = [step]
    if phase != "initial":
        steps.append({"phase": phase})
    extra = {"phase": phase, "subgraph": {"nodes": 9, **stage("subgraph")}, "trace": steps}
    return record(f"r{len(gold_up_to)}{phase}{answer}", answer, ["Gold"], extra)


def test_stage_recall_and_where_the_gold_was_lost() -> None:
    records = [hydra_trace("selected", answer="Gold"), hydra_trace("selected"), hydra_trace("bfs"),
               hydra_trace("nowhere", phase="fallback"),
               record("t", "x", ["y"], {"stopped": "sufficient"})]  # not a hydra record
    recall = trace_stats.stage_recall(records)
    assert recall["n"] == 4
    assert (recall["subgraph"], recall["bfs"], recall["relevance"], recall["cross"], recall["selected"],
            recall["answer"]) == (0.75, 0.75, 0.5, 0.5, 0.5, 0.25)
    assert recall["lost"] == {"selected": 1, "bfs": 1, "none": 1}


def test_later_phases_count_in_any_phase_but_not_in_initial() -> None:
    rec = hydra_trace("subgraph", phase="refined")
    rec["extra"]["trace"][1].update({"bfs": [{"gold": ["Gold"]}], "relevance": {"gold": ["Gold"]}})
    assert trace_stats.hydra_stages(rec)["relevance"] is True
    assert trace_stats.hydra_stages(rec, ["initial"])["relevance"] is False


def test_stage_without_gold_list_is_matched_by_names_and_texts() -> None:
    gold = {"oskar thelling"}
    assert trace_stats.holds_gold({"entities": ["Norvale", "Oskar  Thelling"]}, gold)
    assert trace_stats.holds_gold({"texts": ["Norvale Motors - founded by - Oskar Thelling"]}, gold)
    assert not trace_stats.holds_gold({"texts": ["Oskar Thellingsen"]}, gold)
    assert not trace_stats.holds_gold({"entities": ["Oskar Thelling"], "gold": []}, gold)  # gold list wins
    assert trace_stats.holds_gold([{"gold": []}, {"gold": ["x"]}], gold)


def test_aliases_count_as_gold() -> None:
    rec = hydra_trace("nowhere")
    rec["extra"]["gold"] = {"answer_groups": [["Gold", "The Gold"]]}
    rec["extra"]["trace"][0]["cross"] = {"entities": ["the gold"]}
    assert trace_stats.hydra_stages(rec)["cross"] is True


def test_trace_stats_prints_stage_recall(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "hydra.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [hydra_trace("selected", answer="Gold"),
                                                      hydra_trace("bfs")]), encoding="utf-8")
    assert trace_stats.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "stage recall over 2 hydra questions" in out
    assert "gold in the BFS paths: 100.0% / 100.0% (2)" in out
    assert "gold after the LLM's selection (W_max): 50.0% / 50.0% (1)" in out
    assert "gold in the final answer (Hits@1): 50.0% (1)" in out
    assert "wrong answers by the last stage that held the gold answer: bfs 1" in out
    assert "stopped None" not in out

"""`eval`: metrics per method from a run folder, with missing and extra records reported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli import main
from engine.runs.eval_tables import format_markdown
from engine.runs.evaluate import evaluate_run
from engine.runs.method_scores import explored_relations, score_method
from ingest.base.errors import InputError


def _record(rid: str, prediction: str, answers: list[str], **kwargs: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": rid, "question": f"q {rid}", "answers": answers, "method": "m", "prediction": prediction,
        "predictions": [prediction] if prediction else [], "answer_source": "kg", "paths": [], "llm_calls": [],
        "seconds": 1.0, "config_hash": "h1", "error": None, "extra": {},
    }
    record.update(kwargs)
    return record


def _call(prompt: int, completion: int, hit: bool = False) -> dict[str, Any]:
    return {"stage": "answer", "prompt_tokens": prompt, "cached_tokens": 0, "completion_tokens": completion,
            "seconds": 0.5, "cache_hit": hit}


def _kg_path(*relations: str) -> dict[str, Any]:
    return {"source": "kg", "triples": [["a", r, "b"] for r in relations], "sentences": [], "chunk_ids": [],
            "relation_ids": [f"https://localkg.example/relation/{r}" for r in relations], "score": None}


def _write_run(folder: Path, ids: list[str], files: dict[str, list[dict[str, Any]]], torn: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    run = {"questions": {"path": "/data/PQ-2H.txt", "count": len(ids), "ids": ids},
           "methods": {m: {"config": {}} for m in files}, "index": {"fingerprint": "i"},
           "model": {"fingerprint": "f"}, "status": "complete"}
    (folder / "run.json").write_text(json.dumps(run), encoding="utf-8")
    for method, records in files.items():
        text = "".join(json.dumps(r) + "\n" for r in records)
        (folder / f"{method}.jsonl").write_text(text + (torn if method == "tog" else ""), encoding="utf-8")


def test_metrics_costs_sources_and_overlap(tmp_path: Path) -> None:
    gold_rel = {"gold": {"relations": ["spouse", "nationality"]}}
    tog = [
        # right, explores both gold relations
        _record("q1", "United_Kingdom", ["united_kingdom"], extra=gold_rel, paths=[_kg_path("spouse", "nationality")],
                llm_calls=[_call(100, 10), _call(50, 5, hit=True)]),
        # right via the paper's substring only; explores one of two gold relations
        _record("q2", "the city of Paris", ["Paris"], extra=gold_rel, paths=[_kg_path("spouse")], answer_source="llm"),
        # right, multi-answer: the answer set is the prediction alone (no answer text names
        # "Nope"): 1 of 1 answers correct, 1 of 3 gold answers found
        _record("q3", "Tracker", ["Tracker", "River Queen", "Weekend"], predictions=["Tracker", "Nope"],
                extra=gold_rel, paths=[_kg_path("spouse")], answer_source="doc"),
        # an error
        _record("q4", "", ["x"], error="RuntimeError: boom", answer_source="none"),
        # a duplicate of q1 (ignored) and an id outside the run
        _record("q1", "wrong", ["united_kingdom"]),
        _record("zz", "x", ["x"]),
    ]
    _write_run(tmp_path, ["q1", "q2", "q3", "q4", "q5"], {"tog": tog}, torn='{"id": "q5", "pre')
    summary = evaluate_run(tmp_path)
    s = summary["methods"]["tog"]
    assert (s["records"], s["scored"], s["expected"], s["missing"], s["extra"], s["duplicates"], s["errors"]) == (4, 4, 5, 1, 1, 1, 1)
    assert s["missing_ids"] == ["q5"]
    assert s["hits1"] == pytest.approx(2 / 4)  # q1, q3
    assert s["paper_em"] == pytest.approx(3 / 4)  # + q2 by substring
    assert s["em"] == pytest.approx(1 / 4)  # only q1's set is exact
    f1_q3 = 2 * 1.0 * (1 / 3) / (1.0 + 1 / 3)
    assert s["f1"] == pytest.approx((1 + 0 + f1_q3 + 0) / 4)
    assert s["llm_calls"] == pytest.approx(2 / 4)
    assert s["prompt_tokens"] == pytest.approx(150 / 4) and s["completion_tokens"] == pytest.approx(15 / 4)
    assert s["cache_hit_rate"] == 0.5 and s["seconds"] == 1.0
    assert s["answer_source"] == {"kg": 0.25, "doc": 0.25, "both": 0.0, "llm": 0.25, "none": 0.25}
    overlap = s["path_overlap"]
    assert overlap["with_gold_path"] == 3 and overlap["correct"] == 2
    assert overlap["mean_correct"] == pytest.approx((1.0 + 0.5) / 2)
    assert overlap["mean_all"] == pytest.approx((1.0 + 0.5 + 0.5) / 3)
    assert overlap["buckets_correct"]["100"] == 0.5 and overlap["buckets_correct"]["(25,50]"] == 0.5
    assert any("torn" in p for p in s["problems"]) and any("duplicate" in p for p in s["problems"])
    # eval.json is written next to the records.
    assert json.loads((tmp_path / "eval.json").read_text())["methods"]["tog"]["hits1"] == s["hits1"]

    table = format_markdown(summary)
    assert "| tog | 4 | 1 | 1 | 0 | 50.0 | 25.0 |" in table
    assert "75.0 (2); all 66.7" in table  # path overlap over the 2 correct answers, then all 3
    assert "q5" in table and "duplicate" in table


def test_alias_groups_and_no_gold(tmp_path: Path) -> None:
    records = [
        _record("a", "metal music", ["heavy metal", "metal music"],
                extra={"gold": {"answer_groups": [["heavy metal", "metal music"]]}}),
        _record("b", "anything", []),
    ]
    s = score_method("m", records, None).to_dict()
    assert s["scored"] == 1 and s["hits1"] == 1.0 and s["em"] == 1.0 and s["f1"] == 1.0
    assert s["expected"] is None and s["path_overlap"] is None


def test_explored_relations_uses_kg_paths_only() -> None:
    record = {"paths": [_kg_path("spouse"), {"source": "wiki", "relation_ids": ["x"], "triples": []}]}
    assert explored_relations(record) == ["https://localkg.example/relation/spouse", "spouse"]


def test_eval_cli_markdown_json_and_errors(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _write_run(run, ["q1", "q2"], {"io": [_record("q1", "a", ["a"]), _record("q2", "b", ["c"])],
                                   "cot": [_record("q1", "a", ["a"])]})
    runner = CliRunner()
    result = runner.invoke(main, ["eval", str(run)])
    assert result.exit_code == 0, result.output
    assert "| io | 2 | 0 | 0 | 0 | 50.0 |" in result.output
    assert "| cot | 1 | 1 |" in result.output and "cot: 1 questions have no record yet" in result.output
    as_json = runner.invoke(main, ["eval", str(run), "--json"])
    assert json.loads(as_json.output)["methods"]["io"]["hits1"] == 0.5
    missing = runner.invoke(main, ["eval", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "no such run folder" in missing.output
    with pytest.raises(InputError, match="no record files"):
        evaluate_run(tmp_path)


def test_eval_without_run_json_says_so(tmp_path: Path) -> None:
    (tmp_path / "io.jsonl").write_text(json.dumps(_record("q1", "a", ["a"])) + "\n", encoding="utf-8")
    summary = evaluate_run(tmp_path, write=False)
    assert summary["methods"]["io"]["hits1"] == 1.0
    assert "missing records cannot be counted" in summary["problems"][0]
    assert not (tmp_path / "eval.json").exists()


def test_no_path_overlap_for_a_method_that_never_walks_the_kg() -> None:
    gold_rel = {"gold": {"relations": ["spouse"]}}
    io = [_record("q1", "Paris", ["Paris"], extra=gold_rel, answer_source="llm")]
    assert score_method("io", io, ["q1"]).path_overlap is None
    tog = [_record("q1", "Paris", ["Paris"], extra=gold_rel, paths=[_kg_path("spouse")])]
    overlap = score_method("tog", tog, ["q1"]).path_overlap
    assert overlap is not None and overlap["mean_correct"] == 1.0


def test_where_kg_runs_stopped_is_counted() -> None:
    from engine.runs.method_scores import score_method

    grounded = {"stopped": "sufficient", "depth": 1, "trace": [{"depth": 1, "sufficient": True}]}
    deeper = {"stopped": "sufficient", "depth": 2,
              "trace": [{"depth": 1, "ungrounded_answer": "Kill Bill"}, {"depth": 2, "sufficient": True}]}
    dead = {"stopped": "dead_end", "depth": 2, "trace": [{"depth": 1}, {"depth": 2}]}
    records = [_record("1", "a", ["a"], extra=grounded), _record("2", "b", ["a"], extra=deeper),
               _record("3", "c", ["a"], extra=dead), _record("4", "a", ["a"], extra=dict(grounded))]
    scores = score_method("tog", records, ["1", "2", "3", "4"])
    assert scores.stops == {"dead_end@2": 1, "sufficient@1": 2, "sufficient@2": 1}
    assert scores.ungrounded_rejected == 1
    plain = score_method("io", [_record("1", "a", ["a"])], ["1"])
    assert plain.stops == {} and plain.ungrounded_rejected is None


def test_hits_by_the_grouping_fields_of_a_jsonl_questions_file(tmp_path: Path) -> None:
    questions = tmp_path / "questions.jsonl"
    rows = [{"id": "a", "question": "?", "answers": ["x"], "needs": "kg", "hops": 1},
            {"id": "b", "question": "?", "answers": ["y"], "needs": "kg+doc", "hops": 2},
            {"id": "c", "question": "?", "answers": ["z"], "needs": "kg+doc", "hops": 2, "kind": True}]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n", encoding="utf-8")
    run = tmp_path / "run"
    _write_run(run, ["a", "b", "c"], {"m": [_record("a", "x", ["x"]), _record("b", "y", ["y"]), _record("c", "w", ["z"])]})
    meta = json.loads((run / "run.json").read_text())
    meta["questions"]["path"] = str(questions)
    (run / "run.json").write_text(json.dumps(meta))
    summary = evaluate_run(run, write=False)
    by = summary["methods"]["m"]["by"]
    assert by["needs"] == {"kg": {"n": 1, "hits1": 1.0}, "kg+doc": {"n": 2, "hits1": 0.5}}
    assert by["hops"] == {"1": {"n": 1, "hits1": 1.0}, "2": {"n": 2, "hits1": 0.5}}
    assert "kind" not in by  # booleans are no groups
    assert "m: Hits@1 by needs: kg 100.0 (1/1), kg+doc 50.0 (1/2)" in format_markdown(summary)
    # a questions file in another format (or gone): no breakdown
    meta["questions"]["path"] = str(tmp_path / "gone.jsonl")
    (run / "run.json").write_text(json.dumps(meta))
    assert evaluate_run(run, write=False)["methods"]["m"]["by"] == {}

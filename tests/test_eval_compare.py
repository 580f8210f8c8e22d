"""HotpotQA's token-level EM and F1 beside the set metrics, abstentions in `eval`, and
`eval RUN RUN ...` side by side (issue 10, items 6 and 9)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli import main
from engine.questions.answer_match import hotpot_normalise, score, token_em, token_f1, token_scores
from engine.runs.eval_tables import format_comparison, format_markdown
from engine.runs.evaluate import evaluate_run
from engine.runs.method_scores import score_method

# ---- token-level EM and F1, as HotpotQA's hotpot_evaluate_v1.py computes them ---------------


@pytest.mark.parametrize(("prediction", "gold", "f1", "em"), [
    ("Sochi", "Sochi, Russia", 2 / 3, False),          # P 1/1, R 1/2
    ("Sochi, Russia", "Sochi", 2 / 3, False),          # P 1/2, R 1/1
    ("the Eiffel Tower", "Eiffel Tower", 1.0, True),   # articles and case go
    ("Eiffel Tower.", "eiffel  tower", 1.0, True),     # punctuation and spaces go
    ("x x y", "x y y", 2 / 3, False),                 # a bag of tokens: min counts, 2 of 3 each side
    ("Paris", "London", 0.0, False),
    ("yes", "no", 0.0, False),                         # yes/no: all or nothing
    ("yes", "Yes.", 1.0, True),
    ("no", "no way", 0.0, False),                      # a special prediction scores 0 unless equal
    ("noanswer", "noanswer", 1.0, True),
    ("1,000 people", "1000 people", 1.0, True),        # the comma is punctuation to HotpotQA
    ("Anne-Marie", "Anne Marie", 0.0, False),          # "annemarie" vs "anne marie"
])
def test_token_metrics_match_hotpotqa(prediction: str, gold: str, f1: float, em: bool) -> None:
    assert token_scores(prediction, gold)[0] == pytest.approx(f1)
    assert token_em(prediction, [gold]) is em


def test_hotpot_normalisation_and_the_max_over_aliases() -> None:
    assert hotpot_normalise("The  Lord of the Rings!") == "lord of rings"
    assert hotpot_normalise("Anne-Marie") == "annemarie"
    # United States vs the aliases: 0 against "USA", P 2/2 R 2/4 against the long form
    assert token_f1("United States", ["USA", "United States of America"]) == pytest.approx(2 / 3)
    assert token_em("usa", ["United States of America", "USA"])
    assert token_f1("anything", []) == 0.0


def test_record_scores_carry_both_kinds() -> None:
    scored = score("Sochi", None, ["Sochi, Russia"])
    assert (scored.em, scored.f1) == (False, 0.0)          # the answer-set metrics: a different entity
    assert (scored.em_tok, scored.f1_tok) == (False, pytest.approx(0.666667))
    nothing = score("", [], ["a"])                          # an abstention: "" never matches (HotpotQA's "" == "a")
    assert (nothing.em_tok, nothing.f1_tok) == (False, 0.0)


# ---- eval: abstentions, two kinds of F1, several runs -----------------------------------------


def _record(rid: str, prediction: str, answers: list[str], **kwargs: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": rid, "question": f"q {rid}", "answers": answers, "method": "m", "prediction": prediction,
        "predictions": [prediction] if prediction else [], "answer_source": "doc" if prediction else "none",
        "paths": [], "llm_calls": [{"stage": "answer", "prompt_tokens": 10, "completion_tokens": 2}],
        "seconds": 1.0, "config_hash": "h", "error": None, "extra": {},
    }
    record.update(kwargs)
    return record


def _write_run(folder: Path, records: dict[str, list[dict[str, Any]]], llm: str, config: dict[str, Any]) -> Path:
    folder.mkdir(parents=True)
    ids = sorted({r["id"] for rs in records.values() for r in rs})
    run = {"questions": {"path": "/data/hotpot_dev.json", "count": len(ids), "ids": ids},
           "methods": {m: {"config": config} for m in records}, "model": {"llm": llm, "fingerprint": llm},
           "index": {"fingerprint": "i"}, "status": "complete"}
    (folder / "run.json").write_text(json.dumps(run), encoding="utf-8")
    for method, rs in records.items():
        (folder / f"{method}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs), encoding="utf-8")
    return folder


def test_abstentions_are_counted_and_scored_as_wrong() -> None:
    records = [_record("1", "Sochi", ["Sochi"]), _record("2", "Paris", ["Rome"]),
               _record("3", "", ["Oslo"], abstained=True), _record("4", "", ["Bern"], abstained=True)]
    s = score_method("rag", records, ["1", "2", "3", "4"])
    assert s.abstained == 2 and s.hits1 == 0.25 and s.hits1_answered == 0.5
    plain = score_method("rag", records[:2], ["1", "2"])
    assert plain.abstained == 0 and plain.hits1_answered == 0.5
    table = format_markdown({"run_dir": "r", "questions": {}, "methods": {"rag": s.to_dict()}, "problems": []})
    assert "| rag | 4 | 0 | 0 | 2 | 25.0 |" in table
    assert "rag: abstained on 2 of 4 questions; Hits@1 over the 2 it answered: 50.0" in table
    assert "EM(set)" in table and "F1(tok)" in table and "EM(tok), F1(tok): HotpotQA" in table


def test_eval_two_runs_side_by_side(tmp_path: Path) -> None:
    small = _write_run(tmp_path / "small" / "hotpot", {
        "rag": [_record("1", "Sochi", ["Sochi, Russia"]), _record("2", "", ["Rome"], abstained=True)],
        "io": [_record("1", "Moscow", ["Sochi, Russia"]), _record("2", "Rome", ["Rome"])],
    }, "qwen2.5-coder-0.5b", {"top_k": 5})
    large = _write_run(tmp_path / "large" / "hotpot", {
        "rag": [_record("1", "Sochi, Russia", ["Sochi, Russia"]), _record("2", "Rome", ["Rome"])],
    }, "qwen2.5-coder-1.5b", {"top_k": 8})
    runner = CliRunner()
    result = runner.invoke(main, ["eval", str(small), str(large)])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "2 runs side by side" in out and "| method | small/hotpot | large/hotpot |" in out
    hits = out.split("**Hits@1 (%)**")[1].split("**")[0]
    assert "| rag | 0.0 | 100.0 |" in hits and "| io | 50.0 | – |" in hits
    f1_tok = out.split("**F1(tok) (%)**")[1].split("**")[0]
    assert "| rag | 33.3 | 100.0 |" in f1_tok  # (66.7 + 0 abstained) / 2
    assert "| rag | 1 | 0 |" in out.split("**abstained**")[1].split("**")[0]
    assert "qwen2.5-coder-0.5b" in out and "qwen2.5-coder-1.5b" in out
    assert "large/hotpot: rag top_k=8" in out
    assert (small / "eval.json").exists() and (large / "eval.json").exists()
    chosen = runner.invoke(main, ["eval", str(small), str(large), "--metric", "em_tok", "--metric", "f1"])
    assert "**EM(tok) (%)**" in chosen.output and "**F1(set) (%)**" in chosen.output and "Hits@1" not in chosen.output.split("Runs:")[0]
    as_json = json.loads(runner.invoke(main, ["eval", str(small), str(large), "--json"]).output)
    assert [r["run_dir"] for r in as_json["runs"]] == [str(small), str(large)]
    single = json.loads(runner.invoke(main, ["eval", str(small), "--json"]).output)
    assert single["methods"]["rag"]["abstained"] == 1  # one run: the same JSON as before, at the top
    bad = runner.invoke(main, ["eval", str(small), str(large), "--metric", "hitz"])
    assert bad.exit_code == 2 and "unknown metric hitz" in bad.output
    none = runner.invoke(main, ["eval"])
    assert none.exit_code == 2


def test_same_folder_names_are_told_apart() -> None:
    summaries = [evaluate_run_stub("data/runs/a/m2"), evaluate_run_stub("data/runs/b/m2")]
    assert "| method | a/m2 | b/m2 |" in format_comparison(summaries, ["hits1"])


def evaluate_run_stub(run_dir: str) -> dict[str, Any]:
    return {"run_dir": run_dir, "questions": {}, "model": None, "methods": {"io": {"hits1": 0.5, "problems": []}},
            "problems": []}


def test_a_run_without_abstentions_scores_as_before(tmp_path: Path) -> None:
    run = _write_run(tmp_path / "r", {"io": [_record("1", "Sochi", ["Sochi"])]}, "m", {})
    s = evaluate_run(run, write=False)["methods"]["io"]
    assert s["abstained"] == 0 and s["hits1"] == s["em"] == s["em_tok"] == s["f1_tok"] == 1.0

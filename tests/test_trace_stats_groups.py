"""`bench.trace_stats --by`: chains records grouped by a field of the questions file, each group with
its own stage counts; MetaQA's `qtype` read from the `qa_dev_qtype.txt` beside `qa_dev.txt`, and
`--pool` joining values into one group against the rest."""

from __future__ import annotations

import json
from pathlib import Path

from bench import trace_stats


def _record(qid: str, right: bool, in_allowed: bool) -> dict:
    return {"id": qid, "correct": {"hits1": right}, "abstained": False,
            "extra": {"chains_shown": [{"route": "R1", "gold": ["x"] if in_allowed else []}], "choice": "R1 (no call)",
                      "gold_chain_rank": 1 if in_allowed else None,
                      "gold_in_candidates": ["x"] if in_allowed else [], "gold_in_windows": []}}


def _metaqa(tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "1-hop"
    folder.mkdir()
    questions = folder / "qa_dev.txt"
    questions.write_text("who directed [A]\tP\ndescribe [B] in a few words\tq\nwhat words describe [C]\tr\n",
                         encoding="utf-8")
    (folder / "qa_dev_qtype.txt").write_text("movie_to_director\nmovie_to_tags\nmovie_to_tags\n", encoding="utf-8")
    records = tmp_path / "chains.jsonl"
    rows = [_record("1-hop-qa_dev-1", True, True), _record("1-hop-qa_dev-2", False, True),
            _record("1-hop-qa_dev-3", False, False)]
    records.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return questions, records


def test_question_field_reads_metaqa_qtypes(tmp_path: Path) -> None:
    questions, _ = _metaqa(tmp_path)
    assert trace_stats.question_field(questions, "qtype") == {
        "1-hop-qa_dev-1": "movie_to_director", "1-hop-qa_dev-2": "movie_to_tags", "1-hop-qa_dev-3": "movie_to_tags"}


def test_by_gives_each_group_its_stage_counts(tmp_path: Path, capsys) -> None:
    questions, records = _metaqa(tmp_path)
    out = tmp_path / "stages.json"
    assert trace_stats.main([str(records), "--by", "qtype", "--questions", str(questions), "--json", str(out),
                             "--key", "run/set"]) == 0
    groups = json.loads(out.read_text(encoding="utf-8"))["run"]["set"]["by"]
    assert groups["qtype=movie_to_director"]["right"] == 1
    tags = groups["qtype=movie_to_tags"]
    assert (tags["right"], tags["questions"]) == (0, 2)
    assert tags["held"]["the allowed answers"] == 1 and tags["lost"] == {"the allowed answers": 1, "none": 1}
    assert "qtype=movie_to_tags: 0 of 2 right" in capsys.readouterr().out


def test_pool_joins_values_against_the_rest(tmp_path: Path) -> None:
    questions, records = _metaqa(tmp_path)
    out = tmp_path / "stages.json"
    trace_stats.main([str(records), "--by", "qtype", "--questions", str(questions), "--pool",
                      "tags=movie_to_tags,tag_to_movie", "--json", str(out), "--key", "run/set"])
    groups = json.loads(out.read_text(encoding="utf-8"))["run"]["set"]["by"]
    assert set(groups) == {"qtype=tags", "qtype=other"}
    assert (groups["qtype=tags"]["questions"], groups["qtype=other"]["questions"]) == (2, 1)


def test_jsonl_fields_still_group(tmp_path: Path) -> None:
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"id": "q1", "question": "Who?", "answers": ["x"], "needs": "kg+doc"}) + "\n",
                         encoding="utf-8")
    assert trace_stats.question_field(questions, "needs") == {"q1": "kg+doc"}

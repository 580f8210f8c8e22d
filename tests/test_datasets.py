"""Question readers: every benchmark file in ../shared/data parses, plus the demo questions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.questions.datasets import detect_format, metaqa_relations, read_questions
from ingest.base.errors import InputError

REPO = Path(__file__).resolve().parents[1]
DEMO_QUESTIONS = REPO / "data" / "demo" / "questions.jsonl"


def _question_files(shared_data: Path) -> list[Path]:
    files = sorted((shared_data / "metaqa" / "questions").glob("*/qa_*.txt"))
    files = [f for f in files if not f.stem.endswith("_qtype")]
    files += sorted((shared_data / "pathquestion").glob("PQ-*.txt"))
    files += sorted((shared_data / "paper_questions").glob("*/*.json"))
    return files


def test_every_shared_question_file_parses(shared_data: Path) -> None:
    files = _question_files(shared_data)
    assert len(files) >= 19, files
    no_gold: list[str] = []
    for path in [*files, DEMO_QUESTIONS]:
        questions = read_questions(path)
        assert questions, path
        assert all(q.question.strip() for q in questions), path
        ids = [q.id for q in questions]
        assert len(ids) == len(set(ids)), f"{path}: duplicate ids"
        if any(q.answers for q in questions):  # a file with answers: every question has one
            no_gold += [f"{path.name}:{q.id}" for q in questions if not q.answers]
        if path.stat().st_size < 1_000_000:  # ids are stable: reading again gives the same ones
            assert [q.id for q in read_questions(path)] == ids
    # The only question without a gold answer: QALD-10's "tallest egyptian pyramid" (answer {}).
    assert no_gold == ["qald_10-en.json:qald_10-en-255"], no_gold


def test_formats_are_detected(shared_data: Path) -> None:
    assert detect_format(shared_data / "metaqa/questions/1-hop/qa_dev.txt") == "metaqa"
    assert detect_format(shared_data / "pathquestion/PQ-3H.txt") == "pathquestion"
    assert detect_format(shared_data / "paper_questions/tog/cwq.json") == "json"
    assert detect_format(DEMO_QUESTIONS) == "jsonl"


def test_metaqa_fields_and_gold_relations(shared_data: Path) -> None:
    questions = read_questions(shared_data / "metaqa/questions/3-hop/qa_dev.txt")
    first = questions[0]
    assert first.id == "3-hop-qa_dev-1"
    assert first.question == "the films that share directors with the film [Black Snake Moan] were in which genres"
    assert first.answers == ["Drama", "Music"]
    assert first.topic_entities == ["Black Snake Moan"]
    assert first.extra["qtype"] == "movie_to_director_to_movie_to_genre"
    assert first.gold_relations == ["directed_by", "directed_by", "has_genre"]
    assert metaqa_relations("tag_to_movie") == ["has_tags"]
    assert metaqa_relations("actor_to_movie_to_year") == ["starred_actors", "release_year"]


def test_pathquestion_fields(shared_data: Path) -> None:
    questions = read_questions(shared_data / "pathquestion/PQ-3H.txt")
    first = questions[0]
    assert first.id == "PQ-3H-1"
    assert first.answers == ["burnham-on-sea"]
    assert first.topic_entities == ["sylvia_brett"]
    assert first.gold_relations == ["spouse", "parents", "place_of_birth"]
    multi = [q for q in questions if len(q.answers) > 1]
    assert multi and all(q.answers[0] in q.answers[1:] or len(set(q.answers)) == len(q.answers) for q in multi)


def test_paper_json_fields(shared_data: Path) -> None:
    base = shared_data / "paper_questions"
    cwq = read_questions(base / "tog/cwq.json")[0]
    assert cwq.id.startswith("WebQTest-832_")
    assert cwq.answers == ["2014 World Series"]
    assert cwq.topic_entities == ["Lou Seal"]
    assert cwq.extra["topic_entity_ids"] == {"m.03_dwn": "Lou Seal"}
    assert "sports.sports_team.team_mascot" in (cwq.gold_relations or [])
    assert not any(r.startswith("m.") for r in cwq.gold_relations or [])

    grail = read_questions(base / "tog/graliqa.json")[0]
    assert grail.id == "2101960008000" and grail.answers == ["The Illusion"]
    assert grail.gold_relations == ["theater.play.productions"]

    qald = read_questions(base / "tog/qald_10-en.json")[0]
    assert qald.answers == ["Bernhard Riemann"] and qald.gold_relations == ["P138"]

    trex = read_questions(base / "tog/T-REX.json")[0]
    assert trex.question == "Cirith Ungol [SEP] genre" and trex.extra["task"] == "slot"
    assert trex.answers == ["heavy metal"]

    zsre = [q for q in read_questions(base / "tog/Zero_Shot_RE.json") if len(q.answers) > 1]
    assert zsre and zsre[0].extra["answer_groups"] == [zsre[0].answers]  # aliases of one answer

    creak = read_questions(base / "tog/creak.json")[0]
    assert creak.id == "dev_0" and creak.answers == ["false"] and creak.extra["task"] == "claim"

    fever = read_questions(base / "tog2/fever_1000.json")[0]
    assert fever.id == "50888" and fever.answers == ["SUPPORTS"] and fever.question.startswith("Austin")

    webqsp = read_questions(base / "tog2/webqsp_test.json")[0]
    assert webqsp.id == "WebQTest-0" and "English" in webqsp.answers and webqsp.topic_entities == ["Jamaica"]

    hydra = read_questions(base / "hydra/hotpotadv.json")[0]
    assert hydra.answers == ["Sochi, Russia"]
    assert "Olympic Games" in hydra.topic_entities
    assert {"Q5389", "m.05nd_"} <= set(hydra.extra["topic_entity_ids"])

    webq = read_questions(base / "tog/WebQuestions.json")
    assert webq[1].id == "WebQuestions-2"  # no id field: <file stem>-<position>


def test_demo_questions() -> None:
    questions = read_questions(DEMO_QUESTIONS)
    assert questions[0].id == "demo-001"
    assert questions[0].topic_entities == ["Kestrel Cell Works"]
    assert questions[0].extra["hops"] == 1 and questions[0].extra["needs"] == "kg"


def test_plain_jsonl_and_shapes(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    rows = [
        {"question": "Who?", "answers": ["A", "B"]},
        {"id": "q2", "question": "Which?", "answer": {"Q1": "One", "Q2": "Two"}, "topic_entities": {"Q9": "Nine"}},
        {"id": "q3", "question": "What?", "answer": [{"answer": "X", "aliases": ["Ex"]}]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    first, second, third = read_questions(path)
    assert first.id == "mine-1" and first.answers == ["A", "B"]
    assert second.answers == ["One", "Two"] and second.topic_entities == ["Nine"]
    assert third.answers == ["X", "Ex"] and third.extra["answer_groups"] == [["X", "Ex"]]


def test_errors_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "ok", "answers": ["a"]}\n{"question": \n', encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.jsonl:2"):
        read_questions(bad)
    dup = tmp_path / "dup.jsonl"
    dup.write_text('{"id": "x", "question": "a"}\n{"id": "x", "question": "b"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="appears twice"):
        read_questions(dup)
    noq = tmp_path / "noq.json"
    noq.write_text('[{"answer": "a"}]', encoding="utf-8")
    with pytest.raises(InputError, match="item 1: no question text"):
        read_questions(noq)
    odd = tmp_path / "odd.txt"
    odd.write_text("just one field\n", encoding="utf-8")
    with pytest.raises(InputError, match="--format"):
        read_questions(odd)
    with pytest.raises(InputError, match="no such question file"):
        read_questions(tmp_path / "missing.txt")

"""`--format auto`: a MetaQA file whose first question starts with its `[topic entity]` is MetaQA.

432 of MetaQA's 9,992 1-hop dev questions start with `[` (`[Claire Skinner] appears in which
movies<TAB>Life Is Sweet`); a file that begins with one of them was read as JSON and failed. A
line counts as MetaQA when it has a tab, a `[...]` pair before it, and is not JSON itself; JSON
lists (one line or pretty-printed, tab-indented too) stay JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.questions.datasets import detect_format, read_questions
from ingest.base.errors import InputError

BRACKET_FIRST = [
    "[Cristina Flutur] appears in which movies\tBeyond the Hills",
    "[Claire Skinner] appears in which movies\tLife Is Sweet",
    "what movies did [Temuera Morrison] act in\tOnce Were Warriors|Tracker|River Queen",
    "[2012] was directed by who\tRoland Emmerich",
]


def test_a_metaqa_file_starting_with_a_bracketed_entity_is_metaqa(tmp_path: Path) -> None:
    path = tmp_path / "qa_dev.txt"
    path.write_text("\n".join(BRACKET_FIRST) + "\n", encoding="utf-8")
    assert detect_format(path) == "metaqa"
    questions = read_questions(path)
    assert [q.id for q in questions] == ["qa_dev-1", "qa_dev-2", "qa_dev-3", "qa_dev-4"]
    assert questions[0].topic_entities == ["Cristina Flutur"]
    assert questions[0].answers == ["Beyond the Hills"]
    assert questions[3].topic_entities == ["2012"] and questions[3].extra["format"] == "metaqa"


def test_a_bom_and_blank_lines_before_the_first_question(tmp_path: Path) -> None:
    path = tmp_path / "qa.txt"
    path.write_bytes(b"\xef\xbb\xbf\n\n" + "\n".join(BRACKET_FIRST).encode("utf-8"))
    assert detect_format(path) == "metaqa"
    assert len(read_questions(path)) == 4


@pytest.mark.parametrize("text", [
    '[{"question": "who directed [Heat]", "answers": ["Michael Mann"]}]',  # one line, no tab
    '[\n  {"question": "who directed [Heat]", "answers": ["Michael Mann"]}\n]',  # pretty-printed
    '[\t{"question": "who directed [Heat]",\t"answers": ["Michael Mann"]}]',  # tabs as JSON whitespace
    '[{"question": "[Heat]\twho directed it", "answers": ["Michael Mann"]}]',  # a raw tab in a string
])
def test_json_lists_stay_json(tmp_path: Path, text: str) -> None:
    path = tmp_path / "questions.txt"  # no .json suffix: the content decides
    path.write_text(text, encoding="utf-8")
    assert detect_format(path) == "json"
    (question,) = read_questions(path)
    assert question.answers == ["Michael Mann"] and "[Heat]" in question.question


def test_a_bracketed_line_without_a_tab_is_still_taken_for_json(tmp_path: Path) -> None:
    path = tmp_path / "odd.txt"
    path.write_text("[Heat] was directed by who\n", encoding="utf-8")
    assert detect_format(path) == "json"
    with pytest.raises(InputError, match=r"odd.txt: not valid JSON"):
        read_questions(path)
    with pytest.raises(InputError, match=r"odd.txt:1: expected 'question<TAB>answers'"):
        read_questions(path, "metaqa")


def test_jsonl_and_pathquestion_are_unchanged(tmp_path: Path) -> None:
    jsonl = tmp_path / "q.txt"
    jsonl.write_text("\n".join(json.dumps({"question": f"q{i}", "answers": ["a"]}) for i in range(3)), encoding="utf-8")
    assert detect_format(jsonl) == "jsonl"
    pq = tmp_path / "PQ.txt"
    pq.write_text("who is x's wife\tanna(anna/)\tx#spouse#anna#<end>#anna\n", encoding="utf-8")
    assert detect_format(pq) == "pathquestion"


def test_the_real_metaqa_1hop_dev_file(shared_data: Path, tmp_path: Path) -> None:
    real = shared_data / "metaqa" / "questions" / "1-hop" / "qa_dev.txt"
    assert detect_format(real) == "metaqa"
    questions = read_questions(real)
    lines = [line for line in real.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(questions) == len(lines) == 9992
    bracketed = [line for line in lines if line.startswith("[")]
    assert len(bracketed) == 432
    assert sum(q.question.startswith("[") for q in questions) == 432
    # The same questions, the bracketed ones first (the file as a shuffle or a filter leaves it).
    copy = tmp_path / "1-hop" / "qa_dev.txt"
    copy.parent.mkdir()
    copy.write_text("\n".join([*bracketed, *(line for line in lines if not line.startswith("["))]) + "\n",
                    encoding="utf-8")
    assert detect_format(copy) == "metaqa"
    again = read_questions(copy)
    assert len(again) == 9992
    assert again[0].id == "1-hop-qa_dev-1" and again[0].topic_entities
    assert all(q.topic_entities for q in again[:432])
    assert sorted(q.question for q in again) == sorted(q.question for q in questions)

"""Answer normalisation and the per-question metrics."""

from __future__ import annotations

import pytest

from engine.questions.answer_match import (
    answer_groups,
    exact_match,
    hits_at_1,
    matches,
    normalise_answer,
    normalise_relation,
    paper_em,
    path_overlap,
    prediction_list,
    score,
    set_scores,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Godfather", "godfather"),
        ("  Café  Müller ", "cafe muller"),
        ("united_kingdom", "united kingdom"),
        ("Sochi, Russia.", "sochi russia"),
        ("O'Brien", "o brien"),
        ("1,000.5", "1,000.5"),
        ("The The", "the the"),  # a name made only of articles stays a name
        ("ＡＢＣ", "abc"),  # full-width letters fold
    ],
)
def test_normalise_answer(text: str, expected: str) -> None:
    assert normalise_answer(text) == expected


def test_matches_uses_aliases_and_numbers() -> None:
    groups = answer_groups(["heavy metal"], [["heavy metal", "metal music"]])
    assert matches("Metal Music", groups)
    assert matches("1995", [["1995.0"]])
    assert matches("1,000", [["1000"]])
    assert not matches("", [["x"]])
    assert not matches("metal", groups)


def test_hits_em_f1_on_a_multi_answer_question() -> None:
    gold = answer_groups(["Once Were Warriors", "Tracker", "River Queen"])
    assert hits_at_1(["tracker", "Wrong"], gold)
    assert not hits_at_1(["Wrong", "tracker"], gold)
    assert not exact_match(["Tracker"], gold)  # EM is over the answer set
    assert exact_match(["river queen", "Tracker", "once were warriors"], gold)
    precision, recall, f1 = set_scores(["Tracker", "Wrong"], gold)
    assert (precision, recall) == (0.5, pytest.approx(1 / 3))
    assert f1 == pytest.approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3))
    assert set_scores([], gold) == (0.0, 0.0, 0.0)


def test_duplicate_predictions_count_once() -> None:
    gold = answer_groups(["Paris"])
    assert set_scores(["Paris", "paris", "PARIS"], gold) == (1.0, 1.0, 1.0)


def test_paper_em_is_tog_substring_match() -> None:
    # ToG eval/utils.py: remove spaces, lower-case, equality or substring either way.
    assert paper_em("The answer is Jamaican English", ["Jamaican English"])
    assert paper_em("Sochi", ["Sochi, Russia"])
    assert paper_em("NewYork", ["New York"])
    assert not paper_em("Moscow", ["Sochi, Russia"])
    assert not paper_em("", ["anything"])  # unlike ToG's code, empty never matches


def test_prediction_list_falls_back_to_the_prediction() -> None:
    assert prediction_list("a", []) == ["a"]
    assert prediction_list("a", ["b", " ", "c"]) == ["b", "c"]
    assert prediction_list("", None) == []


def test_score_bundles_every_metric() -> None:
    result = score("Tracker", ["Tracker", "River Queen", "Nope"], ["Tracker", "River Queen", "Weekend"],
                   answer_text="Tracker; River Queen")
    assert result.hits1 and not result.em and result.paper_em
    assert result.precision == 1.0 and result.recall == pytest.approx(2 / 3, abs=1e-6)


@pytest.mark.parametrize(
    ("relation", "expected"),
    [
        ("https://localkg.example/relation/directed_by", "directed_by"),
        ("directed_by_reverse", "directed_by"),
        ("directed by", "directed_by"),
        ("http://www.wikidata.org/prop/direct/P27", "p27"),
        ("wdt:P27", "p27"),
        ("http://rdf.freebase.com/ns/film.film.directed_by", "film.film.directed_by"),
        ("<https://localkg.example/relation/place_of_birth>", "place_of_birth"),
    ],
)
def test_normalise_relation(relation: str, expected: str) -> None:
    assert normalise_relation(relation) == expected


def test_path_overlap_is_share_of_gold_relations_found() -> None:
    gold = ["directed_by", "directed_by", "has_genre"]  # unduplicated: 2 relations
    explored = ["https://localkg.example/relation/directed_by", "starred_actors"]
    assert path_overlap(explored, gold) == 0.5
    assert path_overlap([*explored, "has genre"], gold) == 1.0
    assert path_overlap([], gold) == 0.0
    assert path_overlap(explored, []) is None


def test_answer_set_is_what_the_answer_names_not_every_explored_entity() -> None:
    from engine.questions.answer_match import answer_set

    gold = answer_groups(["Tracker", "River Queen"])
    # a KG method ranks everything its paths reached; its answer text names two of them
    ranked = ["Tracker", "River Queen", "Temuera Morrison", "Once Were Warriors"]
    committed = answer_set("Tracker", ranked, "Tracker and River Queen")
    assert committed == ["Tracker", "River Queen"]
    assert exact_match(committed, gold)
    assert not exact_match(ranked, gold)  # the whole ranking is not the answer
    # a free-text list answer (io/cot) is split into items; a title with "and" is not
    assert answer_set("A, B and C", ["A, B and C"]) == ["A", "B", "C"]
    assert answer_set("Romeo and Juliet", ["Romeo and Juliet"]) == ["Romeo and Juliet"]
    assert answer_set("1,000", ["1,000"]) == ["1,000"]
    # no answer text: the best prediction alone
    assert answer_set("X", ["X", "Y"], "") == ["X"]
    assert answer_set("", [], None) == []

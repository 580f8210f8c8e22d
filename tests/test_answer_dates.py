"""Answer checking of Wikidata dates, numbers and typed literals in their lexical forms."""

from __future__ import annotations

import itertools

import pytest

from engine.questions.answer_match import (
    answer_set,
    date_key,
    lexical_form,
    matches,
    paper_em,
    score,
)

SAME_DAY = [
    "1952-03-11T00:00:00Z",  # Wikidata (RDF dump, SPARQL)
    "+1952-03-11T00:00:00Z",  # Wikidata JSON
    '"1952-03-11T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime>',
    '"1952-03-11"^^xsd:date',
    "1952-03-11",
    "11 March 1952",
    "March 11, 1952",
    "march 11 1952",
    "11th of Mar. 1952",
    "Tuesday, 11 March 1952",
]


@pytest.mark.parametrize(("a", "b"), list(itertools.combinations(SAME_DAY, 2)))
def test_one_day_in_every_spelling_matches(a: str, b: str) -> None:
    assert matches(a, [[b]]) and matches(b, [[a]])


@pytest.mark.parametrize(
    ("prediction", "gold"),
    [
        ("1952-03-12", "11 March 1952"),  # another day
        ("1953-01-01", "1952"),  # another year
        ("1952-01-01T00:00:00Z", "1952"),  # a year is not a day of it: precision must agree
        ("1952", "1952-03-11T00:00:00Z"),
        ("March 1952", "11 March 1952"),
        ("11 March", "11 March 1952"),  # no year: no date
        ("1952-03-11T10:30:00Z", "1952-03-11"),  # another time of day is another answer
    ],
)
def test_different_dates_and_precisions_do_not_match(prediction: str, gold: str) -> None:
    assert not matches(prediction, [[gold]])


def test_month_and_year_precision_values() -> None:
    assert matches("March 1952", [["1952-03"]])
    assert matches("1952-03-00T00:00:00Z", [["March 1952"]])  # Wikidata month precision
    assert matches("1952-00-00T00:00:00Z", [["1952"]])  # Wikidata year precision is the year
    assert date_key("1952-02-30") is None and date_key("Apollo 1969") is None
    assert date_key("-0044-03-15T00:00:00Z") == "@-0044-03-15"  # BCE dates keep their sign


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("1,000", "1000"),
        ("1000", "1000.0"),
        ("1,000", "1000.0"),
        ("1e3", "1000"),
        ('"42"^^<http://www.w3.org/2001/XMLSchema#integer>', "42"),
        ('"42"^^xsd:integer', "42.0"),
        ('"1.5E2"^^xsd:double', "150"),
    ],
)
def test_numbers_compare_by_value(a: str, b: str) -> None:
    assert matches(a, [[b]]) and matches(b, [[a]])


def test_numbers_stay_exact() -> None:
    assert not matches("1234567", [["1234568"]])  # once merged by a 6-digit "%g"
    assert not matches("12,5", [["125"]])  # a comma only separates thousands
    assert not matches("1,00", [["100"]])


def test_lexical_form_of_literals() -> None:
    assert lexical_form('"Paris"@en') == "Paris"
    assert lexical_form('"Saint-Denis"@fr-FR') == "Saint-Denis"
    assert lexical_form('"x"^^<urn:t>') == "x"
    assert lexical_form('"quoted" words') == '"quoted" words'  # not a literal: as it is
    assert matches('"Paris"@en', [["paris"]])


def test_a_date_answer_is_one_item_of_the_answer_set() -> None:
    assert answer_set("March 11, 1952", []) == ["March 11, 1952"]
    assert answer_set("March 11, 1952; April 2, 1960", []) == ["March 11, 1952", "April 2, 1960"]
    assert answer_set("1952, 1953", []) == ["1952", "1953"]  # a list of years stays a list
    result = score("He was born on March 11, 1952", [], ["1952-03-11T00:00:00Z"], answer_text="March 11, 1952")
    assert (result.hits1, result.em, result.f1) == (False, True, 1.0)  # hits@1 reads the prediction
    result = score("March 11, 1952", [], ["1952-03-11T00:00:00Z"])
    assert (result.hits1, result.em, result.f1) == (True, True, 1.0)
    # ToG's lenient string match stays the paper's: no date parsing there
    assert not paper_em("March 11, 1952", ["1952-03-11T00:00:00Z"])
    assert paper_em("1952-03-11", ["1952-03-11T00:00:00Z"])

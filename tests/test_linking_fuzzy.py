"""Linking a misspelt name: the character-trigram matcher beside exact, alias, normalised and
label-embedding matching."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.access.linking import EntityLinker
from engine.access.name_search import FUZZY_MAX_EDITS, FuzzyNames, _edit_distance
from index.entities import EntityTable

_TOPIC = re.compile(r"\[([^\]]+)\]")

NAMES = {
    "e:zwick": ("Joel Zwick", [], 12),
    "e:zwicky": ("Joel Zwicky", [], 3),
    "e:tate": ("Sharon Tate", ["S. Tate"], 40),
    "e:tate-film": ("Sharon Tate", [], 2),  # two entities of one name: the better connected first
    "e:her": ("Her", [], 9),
    "e:mann": ("Anthony Mann", [], 30),
    "e:anna": ("Anthony Man", [], 1),  # one letter from "Anthony Mann": exact matches keep winning
    "e:fert": ("Altmoor Fertilizer Company", [], 5),
    "e:kusturica": ("Emir Kusturica", [], 20),
}


@pytest.fixture(scope="module")
def table() -> EntityTable:
    ids = list(NAMES)
    return EntityTable(
        ids=ids,
        labels=[NAMES[i][0] for i in ids],
        aliases=[NAMES[i][1] for i in ids],
        degrees=[NAMES[i][2] for i in ids],
        descriptions=[None] * len(ids),
        wikipedia_titles=[None] * len(ids),
    )


@pytest.fixture
def linker(table: EntityTable) -> EntityLinker:
    return EntityLinker(table)


def test_edit_distance_counts_typos() -> None:
    assert _edit_distance("joel zwick", "joel zwck", 2) == 1  # dropped
    assert _edit_distance("sharon tate", "sahron tate", 2) == 1  # swapped neighbours: one edit
    assert _edit_distance("kitten", "sitting", 5) == 3
    assert _edit_distance("abcdefgh", "hgfedcba", 2) == 3  # stops early, at limit + 1


def test_fuzzy_names_finds_names_a_few_edits_away() -> None:
    names = FuzzyNames(["joel zwick", "joel zwicky", "emir kusturica", "ab", "café müller"])
    assert names.search("joel zwck") == [("joel zwick", 1), ("joel zwicky", 2)]
    assert names.search("emir kustrica", 1) == [("emir kusturica", 1)]
    assert names.search("cafe müller") == [("café müller", 1)]  # any code point, no hashing
    assert names.search("unrelated words") == []
    assert names.search("zz") == []


def test_a_dropped_letter_links_by_spelling(linker: EntityLinker) -> None:
    found = linker.link("what films did Joel Zwck direct")
    assert (found[0].entity, found[0].score) == ("e:zwick", 0.9)
    assert found[0].reason == "n-gram: fuzzy match, 1 edit from 'joel zwick'"
    assert linker.link("when did the movies written by Emir Kustrica release")[0].label == "Emir Kusturica"
    bracketed = linker.link("who acted in [Sahron Tate]")
    assert [c.entity for c in bracketed] == ["e:tate", "e:tate-film"]
    assert bracketed[0].reason.startswith("bracket: fuzzy match") and bracketed[0].score > bracketed[1].score
    assert linker.resolve("anthony man")[0].reason == "mention: normalised match"


def test_correct_names_keep_their_exact_matches(linker: EntityLinker) -> None:
    assert [(c.entity, c.reason) for c in linker.link("what films did Joel Zwick direct")] == [
        ("e:zwick", "n-gram: exact match")]
    assert linker.link("[Anthony Man]")[0].entity == "e:anna"  # the fuzzy neighbour does not take it
    assert linker.link("[Anthony Mann]")[0].entity == "e:mann"


def test_fuzzy_respects_the_threshold_and_the_edit_budget(table: EntityTable) -> None:
    linker = EntityLinker(table)
    assert linker.link("who is Hr") == []  # short names are never corrected
    assert linker.resolve("Joel Zwk") != [] and all(c.score >= linker.threshold for c in linker.resolve("Joel Zwk"))
    # "Co" for "Company" is a variant, not a typo: more edits than FUZZY_MAX_EDITS (label
    # embeddings handle it when the index has them)
    assert len("mpany") > FUZZY_MAX_EDITS and linker.resolve("Altmoor Fertilizer Co") == []
    strict = EntityLinker(table, threshold=0.95)
    assert strict.resolve("Joel Zwck") == []  # 0.9 < 0.95
    assert strict.resolve("Altmoor Fertilizer Compny")[0].entity == "e:fert"  # 1 - 1/26 >= 0.95


def test_the_trigram_index_is_built_once_in_memory(linker: EntityLinker) -> None:
    assert "fuzzy_names" not in vars(linker)  # not built before a name needs it
    linker.link("what films did [Joel Zwick] direct")
    assert "fuzzy_names" not in vars(linker)  # a bracketed exact match never builds it
    linker.link("what films did Joel Zwck direct")
    first = linker.fuzzy_names
    linker.link("what films did Emir Kustrica write")
    assert linker.fuzzy_names is first


def test_metaqa_topics_with_a_dropped_letter(metaqa_index: Path, shared_data: Path) -> None:
    """The embed bench's misspelling (the letter after the middle of a 6+ character topic
    dropped, brackets removed) on every 30th 1-hop dev question."""
    linker = EntityLinker.open(metaqa_index)
    lines = (shared_data / "metaqa" / "questions" / "1-hop" / "qa_dev.txt").read_text(encoding="utf-8").splitlines()
    right = total = 0
    for line in lines[::30]:
        question = line.split("\t", 1)[0]
        name = _TOPIC.search(question).group(1)  # type: ignore[union-attr]
        if len(name) < 6:
            continue
        cut = len(name) // 2 + 1
        found = linker.link(_TOPIC.sub(name[:cut] + name[cut + 1:], question))
        right += bool(found) and found[0].label == name
        total += 1
    assert right / total >= 0.9, f"{right}/{total}"

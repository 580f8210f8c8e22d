"""What kind of answer a question asks for, read from its wording (English question grammar, no
dataset's templates): the phrase a chain's end set is compared with by the `chains` scorer.

    asked_for("the films written by X were directed by who")  # "person"
    asked_for("what type of film is X")                       # "type of film"
    asked_for("X 's wife 's father 's nationality is what")   # "nationality"
    asked_for("the place of birth of X 's other half 's father")  # "place of birth"

The topic entity is masked as "X" first (see `chain_scoring.masked_question`). Rules, in order: who/whom/whose
asks for a person unless "who is the N" names N; when, a year or date; where, a place; how many /
how much, a number; what/which, the noun phrase after it ("which directors", "what type of
film"); otherwise the noun phrase the question opens with ("the place of birth of X ..."), else
the one after its last possessive ("X's mother's nationality"). None when nothing is found.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_TOKEN = re.compile(r"[a-z0-9]+|'s")
_SKIPPED = frozenset({"is", "are", "was", "were", "the", "a", "an", "did", "does", "do", "has", "have",
                      "had", "some", "be", "been"})
_VERBS = frozenset({"did", "does", "do", "is", "are", "was", "were", "has", "have", "had"})
_STOPS = frozenset({"x", "'s", "what", "which", "who"})
_TRAILING = frozenset({"of", "for", "by", "in", "with", "to", "that"})


def _noun_phrase(words: list[str], longest: int = 3) -> str:
    """The first `longest` words after leading articles and auxiliaries, up to the entity, a
    possessive, a verb or another question word, without a trailing preposition."""
    out: list[str] = []
    for word in words:
        if not out and word in _SKIPPED:
            continue
        if word in _STOPS or (out and word in _VERBS):
            break
        out.append(word)
        if len(out) >= longest:
            break
    while out and out[-1] in _TRAILING:
        out.pop()
    return " ".join(out)


def asked_for(masked_question: str) -> str | None:
    """The phrase naming what the question asks for (module docstring), or None."""
    words = _TOKEN.findall(masked_question.lower())
    for i, word in enumerate(words):
        if word in ("who", "whom", "whose"):
            named = _noun_phrase(words[i + 2:]) if i + 1 < len(words) and words[i + 1] in _VERBS else ""
            return named or "person"
        if word == "when":
            return "year date"
        if word == "where":
            return "place location"
        if word == "how" and i + 1 < len(words) and words[i + 1] in ("many", "much"):
            return "number"
        if word in ("what", "which") and (named := _noun_phrase(words[i + 1:])):
            return named
    if opening := _noun_phrase(words):
        return opening
    if "'s" in words:
        last = len(words) - 1 - words[::-1].index("'s")
        return _noun_phrase(words[last + 1:]) or None
    return None


def asked_class(masked_question: str) -> str | None:
    """The class noun of a "what/which N ..." question ("what films did X write": "films";
    "which kind of film is X": "kind of film"): the answer's kind, never a relation of the
    chain. None otherwise: in "what is the nationality of X" or "X's mother's job" the asked
    noun names the last relation."""
    words = _TOKEN.findall(masked_question.lower())
    for i, word in enumerate(words[:-1]):
        if word in ("what", "which") and words[i + 1] not in _SKIPPED and words[i + 1] not in _STOPS:
            return _noun_phrase(words[i + 1:]) or None
    return None


_PARTICIPLES = frozenset(["born", "written", "made", "led", "built", "held", "sold", "known", "given", "taken",
                          "owned", "run", "grown", "shown", "chosen"])
_RELATIVE = frozenset(["that", "which", "who", "whom", "whose"])
ARTICLES = frozenset(["the", "a", "an"])  # also `chain_scoring`'s `verb_mentions`


def participle(word: str) -> bool:
    """A past participle: after a noun it opens a reduced relative clause ("the company founded
    by X")."""
    return word in _PARTICIPLES or (len(word) > 4 and word.endswith("ed"))


def mention_words(masked_question: str) -> tuple[list[str], int | None]:
    """The masked question's words, lower-cased without punctuation, and the index of the topic's
    mask "X" (None without one)."""
    words = [w.strip("?,.;:!\"").lower() for w in masked_question.split()]
    return words, next((i for i, w in enumerate(words) if w == "x"), None)


def described_phrase(masked_question: str) -> tuple[str, str] | None:
    """The description the question gives of the entities next to its topic X: a noun phrase
    whose relative clause holds X, from its determiner to X ("the steel maker that supplies X":
    ("steel maker that supplies", "maker"); "the wind turbine maker founded by X"; "the
    telecommunications company that X completed ..."), with the phrase's head noun; None where X
    is not in such a clause ("the parent company of X")."""
    words, at = mention_words(masked_question)
    if at is None:
        return None
    start = next((i for i in range(at - 1, -1, -1) if words[i] in ARTICLES), None)
    if start is None:
        return None
    between = words[start + 1:at]
    opens = next((i for i, w in enumerate(between) if i > 0 and (w in _RELATIVE or participle(w))), None)
    if opens is None:
        return None
    return " ".join(between), between[opens - 1]


_PHRASE_ENDS = frozenset({*_VERBS, *ARTICLES, *_TRAILING, "x", "on", "at", "from", "as", "and", "or"})


def described_kind(masked_question: str, names_relation: Callable[[str], bool], longest: int = 4) -> str | None:
    """The phrase after "which"/"what" that describes the kind asked for beyond its noun
    ("which mining company supplies X": "mining company"), read up to a word that names a
    relation (`names_relation`), a participle, an auxiliary, an article or a preposition, or a
    present-tense verb after the noun ("which company owns ..."); None where the phrase is one
    word, its modifiers are words of two letters at most ("which US state") or it runs past
    `longest` words."""
    words, _ = mention_words(masked_question)
    start = next((i + 1 for i, w in enumerate(words) if w in ("which", "what")), None)
    if start is None:
        return None
    phrase: list[str] = []
    for word in words[start:]:
        if word in _PHRASE_ENDS or names_relation(word) or participle(word) \
                or (phrase and word.endswith("s") and not word.endswith("ss")):
            break
        phrase.append(word)
        if len(phrase) > longest:
            return None
    modifiers = [w for w in phrase[:-1] if len(w) > 2]
    return " ".join(phrase) if len(phrase) >= 2 and modifiers else None

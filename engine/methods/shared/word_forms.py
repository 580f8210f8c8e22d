"""Word forms for matching a question's words with relation labels, without a lemmatiser's data
files: English morphology only (no dataset's vocabulary).

    word_stems("who wrote the screenplays")  # {"writ", "screenplay"}: wrote, written, writer -> "writ"
    same_word("screenwrit", "writ")          # True: a compound ends with the relation's word

A word is lower-cased, an irregular verb form mapped to its base ("wrote", "written" -> "write"), then
one common suffix is cut (-ing, -ers, -ors, -er, -or, -ed, -es, -s, -ion, -e, -y), a doubled final
consonant and a final e are dropped: "directed", "director", "directing" -> "direct"; "starred",
"stars" -> "star"; "acted", "actors" -> "act". Short and function words are left out.
`converse_forms` gives the other side of a relational noun ("parent" and "subsidiary"), `kin_forms`
the gendered and informal nouns of a general kin noun ("son" and "daughter" of "child").
"""

from __future__ import annotations

import re

_IRREGULAR = {
    "wrote": "write", "written": "write", "writing": "write", "born": "bear", "bore": "bear",
    "sang": "sing", "sung": "sing", "made": "make", "led": "lead", "won": "win", "spoke": "speak",
    "spoken": "speak", "took": "take", "taken": "take", "gave": "give", "given": "give", "grew": "grow",
    "grown": "grow", "drew": "draw", "drawn": "draw", "fought": "fight", "found": "find",
    "built": "build", "bought": "buy", "taught": "teach", "held": "hold", "sold": "sell", "told": "tell",
    "thought": "think", "went": "go", "gone": "go", "ran": "run", "saw": "see", "seen": "see",
    "became": "become", "came": "come", "chose": "choose", "chosen": "choose", "wore": "wear",
    "worn": "wear", "shot": "shoot", "died": "die", "married": "marry", "lived": "live",
    "children": "child", "wives": "wife", "women": "woman", "men": "man", "people": "person",
}
_SUFFIXES = ("ings", "ing", "ers", "ors", "er", "or", "ed", "es", "s", "ion", "e", "y")
_FUNCTION = frozenset(
    ["a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with", "about", "as", "into", "is", "are", "was", "were", "be", "been", "what", "which", "who", "whom", "whose", "where", "when", "why", "how", "did", "do", "does", "that", "this", "these", "those", "it", "its", "their", "they", "them", "also", "and", "or", "x", "reverse", "then", "has", "have", "had", "can", "some", "same", "share", "shared"])
_WORD = re.compile(r"[a-z0-9]+")


def word_form(word: str) -> str:
    """The form a word is matched by (module docstring)."""
    word = _IRREGULAR.get(word, word)
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2]:
        word = word[:-1]
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word


def word_list(text: str) -> list[str]:
    """The forms of the content words of `text` in order, repeats kept (three letters or more,
    function words left out)."""
    return [word_form(w) for w in _WORD.findall(text.lower()) if content_word(w)]


def content_word(word: str) -> bool:
    """A lower-case word that can name something: three letters or more, not a function word."""
    return len(word) > 2 and word not in _FUNCTION


def word_stems(text: str) -> set[str]:
    """The forms of the content words of `text` (`word_list` as a set)."""
    return set(word_list(text))


# converse relational nouns: "the parent of X" asks for the Y of "X subsidiary of Y". English
# lexicon, not a dataset's vocabulary; read only where the question's word names no relation itself
_CONVERSE = (
    ("parent", "subsidiary"), ("parent", "child"), ("parent", "offspring"), ("grandparent", "grandchild"),
    ("ancestor", "descendant"), ("employer", "employee"), ("teacher", "student"), ("teacher", "pupil"),
    ("supplier", "customer"), ("seller", "buyer"), ("predecessor", "successor"), ("mentor", "protege"),
    ("master", "apprentice"), ("creditor", "debtor"), ("landlord", "tenant"), ("lessor", "lessee"),
    ("licensor", "licensee"), ("host", "guest"), ("husband", "wife"), ("superior", "subordinate"),
    ("advisor", "advisee"), ("sender", "recipient"),
)


def _converse_table() -> dict[str, frozenset[str]]:
    table: dict[str, set[str]] = {}
    for a, b in _CONVERSE:
        if word_form(a) == word_form(b):  # "employer", "employee": one form names both sides already
            continue
        table.setdefault(word_form(a), set()).add(word_form(b))
        table.setdefault(word_form(b), set()).add(word_form(a))
    return {k: frozenset(v) for k, v in table.items()}


_CONVERSES = _converse_table()


def converse_forms(form: str) -> frozenset[str]:
    """The forms of the nouns that name the other side of the relation a word form names
    ("subsidiar" -> {"parent"}; "parent" -> {"subsidiar", "child", "offspr"}); empty for most words."""
    return _CONVERSES.get(form, frozenset())


# gendered and informal kin nouns under their general noun: "the son of X" asks for a child of X,
# "X's husband" for a spouse (`chains`' `kin_terms`). English lexicon, not a dataset's vocabulary
_KIN = {
    "child": ("son", "daughter", "kid", "offspring"), "parent": ("father", "mother", "dad", "mom", "mum"),
    "spouse": ("husband", "wife"), "sibling": ("brother", "sister"), "grandchild": ("grandson", "granddaughter"),
    "grandparent": ("grandfather", "grandmother", "grandpa", "grandma"),
}
_KIN_FORMS = {word_form(general): frozenset(word_form(w) for w in words) for general, words in _KIN.items()}
# a general kin noun's synonyms as a thesaurus lists them, beyond its gendered and informal nouns:
# "the heir of X" asks for a child of X, "X's consort" for a spouse (`chains`' `kin_synonyms`).
# English lexicon (single words; idioms such as "other half" are not read), not a dataset's vocabulary
_KIN_SYNONYMS = {"child": ("heir", "descendant", "progeny", "scion"), "spouse": ("partner", "consort", "mate")}
_KIN_SYNONYM_FORMS = {word_form(general): frozenset(word_form(w) for w in words)
                      for general, words in _KIN_SYNONYMS.items()}


def kin_forms(form: str, synonyms: bool = False) -> frozenset[str]:
    """The forms of the gendered and informal nouns of a general kin noun's form ("child" ->
    {"son", "daught", "kid", "offspr"}), with `synonyms` also its thesaurus synonyms ("heir",
    "descendant", ...); empty for any other word."""
    forms = _KIN_FORMS.get(form, frozenset())
    return forms | _KIN_SYNONYM_FORMS.get(form, frozenset()) if synonyms else forms


def same_word(a: str, b: str) -> bool:
    """Two forms name the same thing: equal, or one (of four letters or more) ends the other, as
    in a compound ("screenwrit" and "writ")."""
    return a == b or (len(b) >= 4 and a.endswith(b)) or (len(a) >= 4 and b.endswith(a))


"""The `chains` scorer: relation chains against the question, without the LLM (see `ChainScorer`).

Its terms and weights are `chains` config keys (`ScoreWeights`); `chains.py` builds the scorer,
`chain_plans.enumerate_chains` calls it on each level's chains, `bench.chain_rank` measures it.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine.access.retrieval import DenseScorer
from engine.methods.shared.chain_plans import Chain, step_text
from engine.methods.shared.question_shape import (
    ARTICLES,
    asked_class,
    asked_for,
    mention_words,
    participle,
)
from engine.methods.shared.word_forms import (
    content_word,
    converse_forms,
    kin_forms,
    same_word,
    word_form,
    word_list,
    word_stems,
)

_QUESTION_WORDS = frozenset(["who", "whom", "whose", "what", "which", "when", "where"])
# a noun right after "which"/"what" or right before a relative pronoun names a kind of entity
# ("which company ...", "the company that supplies ..."), not a relation
_KIND_BEFORE = frozenset(["which", "what"])
_KIND_AFTER = frozenset(["that", "which", "who", "whom", "whose"])
# `frame_words`: the words a question uses to ask, not what it asks ("can you name ...", "list ...")
_REQUEST_WORDS = frozenset(["you", "your", "name", "list", "tell", "give", "show"])
# words before a mention that are not a verb of it ("the director of X", "written by X")
_FOLLOWED = frozenset(["of", "by", "the", "a", "an", "in", "to", "for", "with", "on", "at", "from", "and", "is",
                       "was", "are", "were"])
_WORD = re.compile(r"[a-z0-9]+")
# `unasked_last`: nouns that ask for a classification without naming its relation ("what types are
# the movies ...": their genres)
_CLASSIFIERS = frozenset(word_form(w) for w in ("type", "kind", "sort", "category", "class", "variety"))
_SAME = re.compile(r"\bsame\s+([a-z]+)")  # `same_twice`: the noun after "same"
_CO = re.compile(r"\bco-([a-z]+)")  # `co_words`: the word after "co-" ("co-starred", "co-writers")
_TOGETHER = re.compile(r"((?:\b[a-z]+\s+){1,3})together\b")  # `co_words`: the words before "together"
_MASK = re.compile(r"\[[^\]]*\]")


def masked_question(question: str, labels: Sequence[str]) -> str:
    """The question with the topic entities' mentions (a dataset's `[brackets]`, then their names)
    replaced by "X": chains are scored on what the question asks about the entity, not on its name."""
    text = _MASK.sub("X", question)
    for label in sorted(labels, key=len, reverse=True):
        if label and len(label) > 2:
            text = re.sub(re.escape(label), "X", text, flags=re.IGNORECASE)
    return " ".join(text.split())


def _stems(text: str) -> set[str]:
    return {w[:5] for w in _WORD.findall(text.lower()) if len(w) > 2}


class ChainScorer:
    """Scores chains against the masked question, without the LLM (dense cosine of the relation
    words, or word overlap with `scorer=lexical`). Besides the whole chain against the whole
    question, order-aware and answer-aware terms:

    - `last_step`: the question's first words ("who directed ...") against the chain's last step;
    - `first_step`: the words around the entity's mention ("... the writer of X") against its
      first step;
    - `asked_type`: what the question asks for (`question_shape.asked_for`: "person", "year
      date", "type of film", "nationality") against the chain's end set as its last relation and
      first names ("has genre: Drama, Comedy"): a chain that ends at films does not answer "who";
    - `word_overlap`: the share of the chain's steps whose relation words the question uses
      (word stems): a chain must account for what the question says, not only resemble it;
    - `relation_cover`, the other way round: the share of the question's relation words (its words
      that name a relation of the question subgraph: "directed", "director", "actors" of "the
      actors in the films directed by the director of X") that the chain's steps name
      (`word_forms`: "wrote" and "screenwriters" name "written by"): a chain must not leave out a
      relation the question names, so one step ("starred actors") does not answer a question
      that names three. With `cover_counts` a word counts as often as the question says it:
      "the films directed by the director of X" says "direct" twice and asks for two steps
      that name it (there, and back to the films).
    - `relation_order`: which of those relation words go first and last. English puts the
      relation of the first hop next to the entity's mention ("... the films directed by [X]":
      3 words before the mention, 1 after) and the asked relation next to the question word
      ("who starred in ...": 3 words before it, 4 after). The term is the mean of two
      indicators: the first step names a relation word of the mention's window, and the last step
      names one of the question word's window (a window without relation words counts 0).
    - `meaning_cover` (0.5 in `chains` and `CHAINS_WEIGHTS`, off in `DEFAULT_WEIGHTS`, which `hydra` reads with `chain_weights: first`): `relation_cover` with the relation words found by meaning
      too ("kid" names `children`: the embedding model's closest label, cosine at least
      `meaning_threshold`), each mention answered by a distinct step (`_meaning_words`).
    - `unnamed_step` (off by default), a cost: each step that none of those mentions answers for
      (each mention one step, less one step per word that names nothing: `_unnamed`), so a chain
      does not go on past what the question asks for.

    - `step_direction` (0.3 in `chains`, off in `DEFAULT_WEIGHTS`): the first step goes the way the words around the
      mention say (`_expected_direction`): "founded by X" makes X the agent, "supplies X" its
      object, "the parent of X" (a converse noun) a step out of X.

    With `kin_terms` (on in `chains`, off in `DEFAULT_WEIGHTS`) a relation labelled by a general
    kin noun is also named by its gendered and informal nouns (`word_forms.kin_forms`: "son" and
    "daughter" name `children`, "husband" `spouse`), for every word term; with `kin_synonyms` (on in
    `chains`, off in the weights `hydra` reads) also by its thesaurus synonyms ("heir" names
    `children`, "consort" `spouse`).

    `unasked_last` (0.5 in `chains`, off in the weights `hydra` reads), a cost: a route of two or
    more steps whose last step no question word names (beyond those its earlier steps use), where
    every word of the question is accounted for (`_unasked_last`: "what movies was X the writer of"
    does not ask for the actors of the films X wrote).

    `co_words` (on in `chains`, off in the weights `hydra` reads): a relation word prefixed "co-" or
    said among the three words before "together" asks for its relation at least twice, there and back,
    as "the same N" does with `same_twice` ("who co-starred with X": X's films, then their actors).

    `repeat_mentions` (on in `chains`, off in the weights `hydra` reads) makes neighbouring words that
    each name a relation's whole label a mention each ("the child of kid of X" names `children`
    twice). Offered, off by default (ours): `reverse_words` makes the whole-chain cosine read a
    reverse step as "things <label> it" (`_chain_text`); `doc_words` weighs the unnamed steps of a
    question whose silent words are words of the topic's own documents (`_unstated`: "the chief
    executive of ..." asks the report); `mention_order` weighs how many of the question's relation
    mentions, in the order English nests them from the entity out, the chain's steps answer in that
    order (`_step_order`, `_in_order`: "X 's mom 's parents 's kid" is parents, parents, children).

    With `frame_words` (on in `chains`, off in the weights `hydra` reads) the words that frame the
    question are not `silent_words`: a request ("can you name ...", "list ...") and a noun between an
    article and the topic ("the release date of the movie X"), which says what the topic is.

    With `inverses` (`relation_inverses`, the `chains` option `inverse_steps`) every term reads a
    reverse step of a relation that has an inverse as a forward step of the inverse (`_read`).

    A step beyond the first costs `hop_penalty`, and a chain through a large set (a release year
    shared by 900 films) `hub_penalty` per tenfold size: a longer or vaguer chain must earn its
    place. Where the question names no relation of the subgraph (no relation word, no mention by
    meaning) and says no "the same N" (there and back), a step beyond the first also costs
    `unnamed_hops` (1.0 in `chains`, off in `DEFAULT_WEIGHTS`): with nothing named, only the
    dense terms tell chains apart, and they favour a step into the class noun's domain ("what
    films are about X": the films tagged X, then their genres, "films" being as close to `has
    genre`)."""

    def __init__(self, kind: str, query: str, relation_label: Any, dense: DenseScorer | None,
                 weights: ScoreWeights, label: Any = None, relations: Sequence[str] = (),
                 inverses: Mapping[str, str] | None = None, stated: set[str] | None = None) -> None:
        self.kind = kind if dense is not None else "lexical"
        self.inverses = dict(inverses or {})
        self.query = query
        words = query.split()
        at = next((i for i, w in enumerate(words) if "X" in w), None)
        self.head = " ".join(words[:4])
        self.around = " ".join(words[max(0, at - 4):at + 3]) if at is not None else query
        self.asked = asked_for(query)
        self.query_stems = _stems(query)
        self.relation_label = relation_label
        self.label = label or (lambda node: node)
        self.dense = dense
        self.weights = weights
        self._forms: dict[str, set[str]] = {}  # relation -> the word forms of its label, computed once
        self._parts: dict[str, list[set[str]]] = {}  # relation -> the forms of each label word (`_part_forms`)
        self._directions: dict[str, str | None] = {}  # relation -> `_expected_direction`, once
        self._mention = mention_words(query)  # `step_direction` reads the words before the mention
        # `converse_nouns`: the forms the relations' labels say themselves; the converse nouns of a
        # label's word ("parent" of "subsidiary") name its relation only where the subgraph has no
        # relation named by one of them (PathQuestion's `parents` and `children` keep their own)
        self._direct = set().union(*(word_stems(relation_label(r)) for r in relations)) \
            if weights.converse_nouns else set()
        self.foreign_relations: set[str] = set()
        self.kind_at: set[int] = set()  # `kind_nouns`: the token positions that say a kind, `_foreign_pairs`
        self.foreign = self._foreign_pairs(relations) if weights.kind_nouns else set()
        self.relation_words = [q for q in sorted(word_stems(query)) if any(self._names({q}, r) for r in relations)]
        said = set(self.relation_words)
        # how often the question says each relation word (`cover_counts`; a kind said, "which
        # company", is no relation word there); else once each
        tokens = _WORD.findall(query.lower())
        self.said_times = Counter(f for j, t in enumerate(tokens) if content_word(t) and (f := word_form(t)) in said
                                  and j not in self.kind_at) if weights.cover_counts else Counter(said)
        # `same_twice`: "the same N" (as X) is N's relation there and back ("which films share the
        # same actor of X": X's actors, then their films), so N asks for two steps
        same = _SAME.findall(query.lower()) if weights.same_twice else []
        for form in map(word_form, same):
            if form in said:
                self.said_times[form] += 1
        # `co_words`: "co-starred with X", "starred together with X" ask for the relation there and
        # back: at least twice, however often the question says it ("the actor X acted together with")
        co = [w for w in [*_CO.findall(query.lower()), *(w for ws in _TOGETHER.findall(query.lower())
                                                            for w in ws.split())]
              if word_form(w) in said] if weights.co_words else []
        for form in map(word_form, co):
            self.said_times[form] = max(self.said_times[form], 2)
        self.said_total = sum(self.said_times.values())
        asks = next((i for i, w in enumerate(words) if w.lower() in _QUESTION_WORDS), None)
        self.near_mention = word_stems(" ".join(words[max(0, at - 3):at] + words[at + 1:at + 2])) & said \
            if at is not None else set()
        self.near_question_word = word_stems(" ".join(words[max(0, asks - 3):asks] + words[asks + 1:asks + 5])) \
            & said if asks is not None else set()
        self.silent_words: list[str] = []
        self.stated = stated or set()  # `doc_words`: the word forms the topics' documents use
        self._relations = list(relations)
        self._meaning_read = bool(weights.meaning_cover or weights.unnamed_step)
        self._mention_at: list[int] = []  # each mention's first token, beside `meaning_words`
        self.meaning_words = self._meaning_words(relations) if self._meaning_read else []
        for word in same:  # said once, named twice
            named = next((entry for entry in self.meaning_words if entry[0] == word), None)
            if named is not None:
                self._mention_again(named)
        for word in co:  # named twice at least
            named = next((entry for entry in self.meaning_words if entry[0] == word), None)
            if named is not None and sum(1 for _, names in self.meaning_words if names == named[1]) < 2:
                self._mention_again(named)
        self.step_order = self._step_order(tokens) if weights.mention_order else []
        self.named_relations = {r for _, names in self.meaning_words for r in names}
        # `unnamed_hops`: the question names no relation (by word form or meaning), nor asks for one
        # there and back ("the same movie")
        self.names_none = bool(weights.unnamed_hops) and self.names_no_relation
        # `unasked_last`, read once: how many mentions name each relation, and whether the question
        # leaves the cost out (words it cannot place, a classifier noun asked, no relation named)
        self._said_relations = Counter(r for _, names in self.meaning_words for r in names)
        classifier = any(word_form(w) in _CLASSIFIERS for w in _WORD.findall((asked_class(query) or "").lower()))
        self._last_unasked_free = not self.named_relations or bool(self.silent_words) or classifier

    @property
    def names_no_relation(self) -> bool:
        """No question word names a relation of the subgraph, by word form or meaning, nor asks for one
        there and back ("the same movie"): `unnamed_hops` weighs this; read whatever the weights."""
        return not self.relation_words and not self.question_relations() and not _SAME.search(self.query.lower())

    @property
    def names_each_word(self) -> bool:
        """Every content word of the question names a relation of the subgraph or the kind asked, the
        kind asked is no classifier noun, and some relation is named: what the question asks is all
        in the relations it names (`unasked_last` weighs routes there; `chains`' `unasked_spans`
        reads it)."""
        return not self._last_unasked_free

    def __call__(self, chains: Sequence[Chain]) -> list[float]:
        w, label = self.weights, self.relation_label
        chains = [self._read(c) for c in chains] if self.inverses else chains
        scores = self._similarity(self.query, [self._chain_text(c) for c in chains])
        last = self._similarity(self.head, [step_text(c.steps[-1], label) for c in chains])
        first = self._similarity(self.around, [step_text(c.steps[0], label) for c in chains])
        kinds = (self._similarity(self.asked, [self._end_text(c) for c in chains])
                 if self.asked and w.asked_type else [0.0] * len(chains))
        result = []
        for c, s, a, b, k in zip(chains, scores, last, first, kinds, strict=True):
            widest = max((len(x) for x in c.sets[1:-1]), default=1)
            result.append(s + w.last_step * a + w.first_step * b + w.asked_type * k
                          + w.word_overlap * self._overlap(c) + w.relation_cover * self._cover(c)
                          + w.relation_order * self._order(c) + w.meaning_cover * self._meaning_cover(c)
                          - w.unnamed_step * self._unnamed(c) + w.step_direction * self._direction(c)
                          - w.doc_words * self._unstated(c) - w.unasked_last * self._unasked_last(c)
                          + w.mention_order * self._in_order(c)
                          - (w.hop_penalty + (w.unnamed_hops if self.names_none else 0.0)) * (c.hops - 1)
                          - w.hub_penalty * math.log10(max(widest, 1)))
        return result

    def _chain_text(self, chain: Chain) -> str:
        """The chain's relation words as the whole-chain cosine reads them; with `reverse_words`
        a reverse step reads as what has the relation ("written by (reverse)" is "things written
        by it"), as `_end_text` reads an end set."""
        if not self.weights.reverse_words:
            return chain.relation_words(self.relation_label)
        def said(c: Chain) -> str:
            return ", then ".join(self.relation_label(r) if d == "out" else f"things {self.relation_label(r)} it"
                                  for r, d in c.steps)
        return said(chain) + (f"; and also {said(chain.also)}" if chain.also is not None else "")

    def _read(self, chain: Chain) -> Chain:
        """The chain as the terms read it: a reverse step of a relation with an inverse
        (`relation_inverses`) is a forward step of the inverse (`parents (reverse)` is
        `children`); the entity sets are the chain's own."""
        steps = tuple((self.inverses[r], "out") if d == "in" and r in self.inverses else (r, d) for r, d in chain.steps)
        also = self._read(chain.also) if chain.also is not None else None
        return replace(chain, steps=steps, also=also)

    def _end_text(self, chain: Chain) -> str:
        """The end set as the `asked_type` term reads it: the last relation and the first three
        names ("release year: 1989, 1947"; a reverse step's ends are what has the relation:
        "things written by it: Jaws")."""
        names = ", ".join(dict.fromkeys(self.label(e) for e in chain.ends[:3]))
        relation, direction = chain.steps[-1]
        said = self.relation_label(relation)
        return f"{said}: {names}" if direction == "out" else f"things {said} it: {names}"

    def _overlap(self, chain: Chain) -> float:
        steps = chain.all_steps
        used = sum(1 for s in steps if _stems(self.relation_label(s[0])) & self.query_stems
                   and s[0] not in self.foreign_relations)
        return used / len(steps)

    def _foreign_pairs(self, relations: Sequence[str]) -> set[tuple[str, str]]:
        """`kind_nouns`: the (question word form, relation) pairs where the word matches one word of
        the head noun of the relation's label (its last content word) by form but names a kind of
        entity, not the relation. A label of several content words is named by its head only where
        the question says the others too, or where the word stands alone: not as the kind asked for
        or described ("which company ...", "the company that supplies ...", "the company founded
        by ..."), and not as the head of a compound with another modifier ("parent company" is not
        `sibling company`, "mining company" neither). A word matching a label of one content word
        ("what language": `in language`) is untouched. `foreign_relations` are the relations the question names only through such
        words. With `kind_once`, where the question says the head both ways, as the kind it asks for
        and in the label ("which company is recorded as a sibling company of X"), the position after
        "which"/"what" is in `kind_at`: it counts as no mention of the relation (`cover_counts`,
        `meaning_cover`); the label's own words still name it."""
        tokens = _WORD.findall(self.query.lower())
        said = [word_form(t) for t in tokens if content_word(t)]
        pairs: set[tuple[str, str]] = set()
        for relation in relations:
            label = word_list(self.relation_label(relation))
            if len(set(label)) < 2:
                continue
            head, others = label[-1], label[:-1]
            at = [j for j, t in enumerate(tokens) if content_word(t) and same_word(word_form(t), head)]
            kinds = [j for j in at if self._kind_word(tokens, j, label)]
            if at and len(kinds) == len(at) and not all(any(same_word(o, w) for w in said) for o in others):
                pairs.update((word_form(tokens[j]), relation) for j in at)
            elif self.weights.kind_once and len(kinds) < len(at):  # the kind asked ("which company"), the label there
                self.kind_at.update(j for j in kinds if j > 0 and tokens[j - 1] in _KIND_BEFORE)
        named = {r for r in relations for w in said if self._names({w}, r, pairs)}
        self.foreign_relations = {r for _, r in pairs} - named
        return pairs

    def _modifies_foreign(self, tokens: Sequence[str], word: str, relation: str) -> bool:
        """`word` modifies a compound whose head does not name `relation` (`_foreign_pairs`): "parent"
        of "parent company" does not name `sibling company` by meaning either."""
        return any(t == word and i + 1 < len(tokens) and (word_form(tokens[i + 1]), relation) in self.foreign
                   for i, t in enumerate(tokens))

    @staticmethod
    def _kind_word(tokens: Sequence[str], at: int, label: Sequence[str]) -> bool:
        """The question's word at `at` names a kind of entity (`_foreign_pairs`)."""
        before = tokens[at - 1] if at > 0 else ""
        after = tokens[at + 1] if at + 1 < len(tokens) else ""
        if before in _KIND_BEFORE or after in _KIND_AFTER or participle(after):
            return True
        return content_word(before) and before != "x" and not any(same_word(word_form(before), w) for w in label)

    def _meaning_words(self, relations: Sequence[str]) -> list[tuple[str, set[str]]]:
        """`meaning_cover`: the question's words that name a relation of the subgraph, each with
        the relations it names: by word form (`word_forms`), or, with the dense scorer, the
        relation whose label the embedding model puts closest to the word, at a cosine of at
        least `meaning_threshold` and `meaning_margin` above the next relation's ("kid" names
        `children`, "dad" `parents`, "job" `profession`). A word
        said twice is kept twice ("the parents of X 's parents"); neighbouring words that name the
        same relation are one mention ("place of birth")."""
        tokens = _WORD.findall(self.query.lower())
        at = [i for i, w in enumerate(tokens) if content_word(w)]
        words = [tokens[i] for i in at]
        if not words or not relations:
            return []
        distinct = sorted(set(words))
        named = {w: {r for r in relations if self._names({word_form(w)}, r)} for w in distinct}
        # the class noun of "what films ..." names the answer's kind (`asked_type` reads it); the
        # embedding model finds it close to every relation of its domain, so it names a relation
        # only by word form
        kind = set(_WORD.findall((asked_class(self.query) or "").lower()))
        if self.weights.kind_nouns:  # kinds described ("the company that ..."), heads of compounds ("parent company")
            kind |= {w for w in distinct if all(self._kind_word(tokens, i, ()) for i, t in enumerate(tokens) if t == w)}
        guessed = [w for w in distinct if w not in kind]
        if self.kind == "dense" and self.dense is not None and guessed:
            labels = [self.relation_label(r) for r in relations]
            rows = self.dense.vectors(guessed) @ self.dense.vectors(labels).T
            floor, margin = self.weights.meaning_threshold, self.weights.meaning_margin
            for w, row in zip(guessed, rows, strict=True):
                order = row.argsort()[::-1]
                best = float(row[order[0]])
                second = float(row[order[1]]) if len(order) > 1 else -1.0
                # a word as close to several relations ("film": directed by, starred actors) names
                # their domain, not one of them
                if best >= floor and best - second >= margin and not self._modifies_foreign(tokens, w, relations[int(order[0])]):
                    named[w].add(relations[int(order[0])])
        # the words that name nothing of the subgraph (not the class noun): each may stand for a
        # relation in words the model does not place ("couple" for `spouse`), `unnamed_step`
        self.silent_words = [w for w in words if not named[w] and w not in kind]
        if self.weights.verb_mentions:  # "complete a bulk transaction": the mention's verb names no other relation
            verbs = {tokens[i] for i in at if i + 2 < len(tokens) and tokens[i + 1] in ARTICLES
                     and named.get(tokens[i + 2]) and tokens[i + 2] not in kind}
            self.silent_words = [w for w in self.silent_words if w not in verbs]
        if self.weights.frame_words:  # "can you name ...", "the release date of the movie X": nothing asked
            apposed = {tokens[i] for i in range(1, len(tokens) - 1) if tokens[i + 1] == "x" and tokens[i - 1] in ARTICLES}
            self.silent_words = [w for w in self.silent_words if w not in apposed and w not in _REQUEST_WORDS]
        mentions: list[tuple[str, set[str]]] = []
        self._mention_at = []
        last = -9
        for i, w in zip(at, words, strict=True):
            if i in self.kind_at:  # "which company" of "which company is recorded as a sibling company of X"
                continue
            # neighbours naming the same relation are one mention ("place of birth"), not two
            joined = all(t in ("of", "the") for t in tokens[last + 1:i]) and i - last <= 3
            if joined and self.weights.repeat_mentions and mentions:
                # `repeat_mentions`: two words are one mention only as different words of the
                # label ("place of birth"), not as the label said twice ("the child of kid of X")
                joined = any(not self._label_parts(tokens[last], r) & self._label_parts(w, r)
                             for r in mentions[-1][1] & named[w])
            if mentions and named[w] and joined and mentions[-1][1] & named[w]:
                mentions[-1] = (f"{mentions[-1][0]} {w}", mentions[-1][1] & named[w])
            elif named[w]:
                mentions.append((w, set(named[w])))
                self._mention_at.append(i)
            if named[w]:
                last = i
        return mentions

    def question_relations(self) -> set[str]:
        """The relations the question's words name (by word form or meaning, `_meaning_words`),
        read even where no term weighs them (`meaning_cover=0`): the answer stage asks it
        (`chains`' `evidence_last=named`)."""
        if self._meaning_read:
            return self.named_relations
        return {r for _, names in self._meaning_words(self._relations) for r in names}

    def _meaning_cover(self, chain: Chain) -> float:
        """The share of the question's relation-naming words (`_meaning_words`) that a distinct
        step of the chain answers to (greedy matching, the rarest words first)."""
        if not self.meaning_words:
            return 0.0
        free = [s[0] for s in chain.all_steps]
        covered = 0
        for _, names in sorted(self.meaning_words, key=lambda wn: len(wn[1])):
            hit = next((i for i, r in enumerate(free) if r in names), None)
            if hit is not None:
                covered += 1
                free.pop(hit)
        return covered / len(self.meaning_words)

    def _mention_again(self, mention: tuple[str, set[str]]) -> None:
        """One more mention of a relation the question says once ("the same N", `co_words`), at
        the place where it says it."""
        self._mention_at.append(self._mention_at[self.meaning_words.index(mention)])
        self.meaning_words.append(mention)

    def _step_order(self, tokens: Sequence[str]) -> list[set[str]]:
        """`mention_order`: the relations of the question's mentions (`_meaning_words`) in the order
        English nests them from the entity out. The nouns before the mention, nearest first ("the
        films directed by the director of X": director, then directed; not a noun right before it,
        which names its kind: "the film X"); a possessive chain after it goes first, in its own
        order ("the nation of the child of X 's father": father, child, nation). Other words after
        the mention ("which films did X direct") are left unordered.
        A relation asked there and back ("the same N", `co_words`: `_mention_again`) is one word in
        one place: it is ordered once. Empty where the question holds the entity's mask other than
        once or orders fewer than two."""
        where = [i for i, t in enumerate(tokens) if t == "x"]
        if len(where) != 1:
            return []
        x = where[0]
        # a mention said again in the same place (`_mention_again`, the same relations) is placed once
        placed = list({at: names for at, (_, names) in zip(self._mention_at, self.meaning_words, strict=True)}.items())
        # a noun right before the mention names its kind, not a step ("the film X", "actor X")
        before = [names for at, names in sorted(placed, key=lambda p: -p[0]) if at < x - 1]
        after = [names for at, names in sorted(placed, key=lambda p: p[0]) if at > x] \
            if x + 1 < len(tokens) and tokens[x + 1] == "s" else []
        order = [*after, *before]
        return order if len(order) > 1 else []

    def _in_order(self, chain: Chain) -> float:
        """`mention_order`: the longest run of the chain's steps, in order, that answers the ordered
        mentions (`_step_order`) in order, as a share of them (a common subsequence): "X 's mom 's
        parents 's kid" reads parents, parents, children, not parents, children, parents."""
        order = self.step_order
        if not order or chain.also is not None:
            return 0.0
        steps = [relation for relation, _ in chain.steps]
        best = [[0] * (len(order) + 1) for _ in range(len(steps) + 1)]
        for i, relation in enumerate(steps, 1):
            for j, names in enumerate(order, 1):
                best[i][j] = best[i - 1][j - 1] + 1 if relation in names else max(best[i - 1][j], best[i][j - 1])
        return best[-1][-1] / len(order)

    def _unasked_last(self, chain: Chain) -> float:
        """`unasked_last`: 1 for a chain of two or more steps whose last step no question word
        names (by word form or meaning, `_meaning_words`) beyond those its earlier steps use
        (`_asks_last`), where every content word of the question names a relation or the kind
        asked: "what movies was X the writer of" names `written by` and asks for movies, so a
        route that goes on from the films X wrote to their actors, or through `written by` again
        to the co-writers, answers what it does not ask. 0 where some word names nothing
        (`silent_words`: "couple" may name `spouse` in words the model does not place), where the
        kind asked is a classifier noun ("what types are the movies ...": it asks for a relation,
        their genres, without naming it), and where the question names no relation at all
        (`unnamed_hops` weighs those)."""
        if chain.hops < 2 or self._last_unasked_free:
            return 0.0
        return float(not any(self._asks_last(c) for c in chain.parts))

    def _asks_last(self, chain: Chain) -> bool:
        """A question word names the chain's last step that its earlier steps have not used up: "what
        movies did X write" names `written by` once, and its first step takes it, so a step on
        through `written by` again (to the co-writers) is not asked for."""
        relation = chain.steps[-1][0]
        return self._said_relations[relation] > sum(1 for r, _ in chain.steps[:-1] if r == relation)

    def _unnamed(self, chain: Chain) -> int:
        """`unnamed_step`: the chain's steps that no mention of the question answers for
        (`_meaning_words`, each mention one step): a step the question does not ask for ("what
        films did X write": `written by`, then `starred actors`, or `written by` again to the
        co-writers) must not ride on the dense terms. The question's words that name nothing
        (`silent_words`: "couple" where the label is `spouse`) excuse as many steps: they may
        stand for a relation the scorer cannot place. A question that names no relation (a
        documents-only index's `mentions` graph) costs nothing: the term cannot tell its chains
        apart, and `hop_penalty` already weighs their length."""
        return max(0, self._unnamed_steps(chain) - len(self.silent_words))

    def _unnamed_steps(self, chain: Chain) -> int:
        """The chain's steps that no mention of the question answers for (`_unnamed`, not excused)."""
        if not self.named_relations:
            return 0
        free = [names for _, names in self.meaning_words]
        unnamed = 0
        for relation, _ in chain.all_steps:
            hit = next((i for i, names in enumerate(free) if relation in names), None)
            if hit is None:
                unnamed += 1
            else:
                free.pop(hit)
        return unnamed

    def _unstated(self, chain: Chain) -> int:
        """`doc_words`: where some of the question's words that name no relation (`silent_words`)
        are words the topics' documents use ("the chief executive of ...", "the flagship product
        of ...": every company report states one), those words ask for what the documents state,
        not for a step of the graph: only the other silent words excuse an unnamed step."""
        if not self.stated:
            return 0
        stated = [w for w in self.silent_words if word_form(w) in self.stated]
        if not stated:
            return 0
        return max(0, self._unnamed_steps(chain) - (len(self.silent_words) - len(stated)))

    def _direction(self, chain: Chain) -> float:
        """`step_direction`: 1 where the chain's first step goes the way the question's grammar
        says, else 0 (also where it says nothing)."""
        relation, direction = chain.steps[0]
        if relation not in self._directions:
            self._directions[relation] = self._expected_direction(relation)
        return float(self._directions[relation] == direction)

    def _expected_direction(self, relation: str) -> str | None:
        """The direction of a first step through `relation` that the words before the mention
        ask for, or None. A label ending in "by" is passive (`film directed by person`); one
        ending in "of" names its subject (`A supplier of B`, `A subsidiary of B`):

        - "<participle> by X" naming the relation ("founded by X"): X is the agent, a step in
          through a passive label, out through another;
        - "<noun> of X" naming it: out, except the label's own noun of an "of" label ("the
          supplier of X" is `A supplier of X`: in); a converse noun ("the parent of X") goes out;
        - "<verb> X" naming it ("supplies X", "directed X"): X is the object, out through a
          passive label, in through an "of" label."""
        words, at = self._mention
        if not at:
            return None
        text = self.relation_label(relation)
        last = text.lower().split()[-1:]
        passive, noun_of = last == ["by"], last == ["of"]
        label = word_list(text)
        before, word = (words[at - 2] if at >= 2 else ""), words[at - 1]
        if word == "by" and participle(before) and self._names({word_form(before)}, relation):
            return "in" if passive else "out"
        if word == "of" and before and self._names({word_form(before)}, relation):
            own = any(same_word(word_form(before), f) for f in label)
            return "in" if own and noun_of else "out"
        if word not in _FOLLOWED and self._names({word_form(word)}, relation):
            return "out" if passive else "in" if noun_of else None
        return None

    def _relation_forms(self, relation: str) -> set[str]:
        if relation not in self._forms:
            self._forms[relation] = set().union(*self._part_forms(relation))
        return self._forms[relation]

    def _part_forms(self, relation: str) -> list[set[str]]:
        """The forms that name each content word of the relation's label: its own form, its
        converse nouns' (`converse_nouns`) and its kin nouns' (`kin_terms`); computed once."""
        if relation in self._parts:
            return self._parts[relation]
        parts = []
        for form in word_list(self.relation_label(relation)):
            forms = {form}
            other_side = converse_forms(form) if self.weights.converse_nouns else frozenset()
            if not any(same_word(c, d) for c in other_side for d in self._direct):
                forms |= other_side
            if self.weights.kin_terms:  # "son" and "daughter" name `children`, "husband" `spouse`
                forms |= set().union(*(kin_forms(f, self.weights.kin_synonyms) for f in forms))
            parts.append(forms)
        self._parts[relation] = parts
        return parts

    def _label_parts(self, word: str, relation: str) -> set[int]:
        """The positions of the label's content words that `word` names by form; every position
        where it names the relation by meaning only (the whole label)."""
        parts = self._part_forms(relation)
        form = word_form(word)
        hit = {k for k, forms in enumerate(parts) if any(same_word(form, f) for f in forms)}
        return hit or set(range(len(parts)))

    def _cover(self, chain: Chain) -> float:
        if not self.relation_words:
            return 0.0
        steps = chain.all_steps
        covered = sum(min(times, sum(1 for s in steps if self._names({word}, s[0])))
                      for word, times in self.said_times.items())
        return covered / self.said_total

    def _names(self, words: set[str], relation: str, foreign: set[tuple[str, str]] | None = None) -> bool:
        foreign = self.foreign if foreign is None else foreign
        return any(same_word(q, r) for q in words if (q, relation) not in foreign for r in self._relation_forms(relation))

    def _order(self, chain: Chain) -> float:
        first = self._names(self.near_mention, chain.steps[0][0])
        last = self._names(self.near_question_word, chain.steps[-1][0])
        return (first + last) / 2

    def _similarity(self, query: str, texts: list[str]) -> list[float]:
        if self.kind == "dense" and self.dense is not None:
            return self.dense.scores(query, texts)
        stems = _stems(query)
        return [len((own := _stems(t)) & stems) / (len(own) or 1) for t in texts]


@dataclass(frozen=True)
class ScoreWeights:
    """The chain scorer's weights (config keys of the same names)."""

    last_step: float
    first_step: float
    hop_penalty: float
    hub_penalty: float
    asked_type: float = 0.0
    word_overlap: float = 0.0
    relation_cover: float = 0.0
    relation_order: float = 0.0
    cover_counts: bool = False
    meaning_cover: float = 0.0
    meaning_threshold: float = 0.55
    meaning_margin: float = 0.0
    unnamed_step: float = 0.0
    kind_nouns: bool = False
    converse_nouns: bool = False
    step_direction: float = 0.0
    kin_terms: bool = False
    same_twice: bool = False
    kind_once: bool = False
    unnamed_hops: float = 0.0
    repeat_mentions: bool = False
    reverse_words: bool = False
    doc_words: float = 0.0
    kin_synonyms: bool = False
    unasked_last: float = 0.0
    co_words: bool = False
    mention_order: float = 0.0
    verb_mentions: bool = False
    frame_words: bool = False

    KEYS = ("last_step", "first_step", "hop_penalty", "hub_penalty", "asked_type", "word_overlap", "relation_cover",
            "relation_order")

    @classmethod
    def of(cls, config: Any) -> ScoreWeights:
        """From a `ChainsConfig` (its keys of the same names)."""
        return cls(*(float(getattr(config, k)) for k in cls.KEYS), cover_counts=bool(config.cover_counts),
                   meaning_cover=float(config.meaning_cover), meaning_threshold=float(config.meaning_threshold),
                   meaning_margin=float(config.meaning_margin),
                   unnamed_step=float(config.unnamed_step), kind_nouns=bool(config.kind_nouns),
                   converse_nouns=bool(config.converse_nouns), step_direction=float(config.step_direction),
                   kin_terms=bool(config.kin_terms), same_twice=bool(config.same_twice),
                   kind_once=bool(config.kind_once), unnamed_hops=float(config.unnamed_hops),
                   repeat_mentions=bool(config.repeat_mentions),
                   reverse_words=bool(config.reverse_words), doc_words=float(config.doc_words),
                   kin_synonyms=bool(config.kin_synonyms), unasked_last=float(config.unasked_last),
                   co_words=bool(config.co_words), mention_order=float(config.mention_order),
                   verb_mentions=bool(config.verb_mentions), frame_words=bool(config.frame_words))


DEFAULT_WEIGHTS = ScoreWeights(last_step=0.6, first_step=0.6, hop_penalty=0.06, hub_penalty=0.1, asked_type=0.6,
                               word_overlap=0.3, relation_cover=1.0, relation_order=0.5, cover_counts=True)
"""The `chains` defaults of the weights when `hydra`'s `path_relevance: chains` was built (the
weighted terms; `hydra`'s `chain_weights: first` reads them)."""

CHAINS_WEIGHTS = replace(DEFAULT_WEIGHTS, meaning_cover=0.5, kind_nouns=True, converse_nouns=True, step_direction=0.3,
                         kin_terms=True, same_twice=True)
"""The `chains` method's defaults now: its config keys read them, and so does `hydra`'s
`chain_weights: chains`."""

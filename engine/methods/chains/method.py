"""`chains`: a method built for small local models (ours, not a paper's): plan once, the graph
executes, read once.

Small models (0.5B-8B) fail at step-by-step agentic exploration and do well when retrieval and
scoring without the LLM do the exploring and the model is asked once to choose among a few
complete, readable candidates (SLM-ToG 2025, GCR, TARGA, SubgraphRAG). So:

1. Topic entities: linking (a dataset's pre-linked ids first), else the entities of the
   question's best passages (as `tog2` / `hydra` do on a corpus whose KG is its titles).
2. Chains, no LLM: the question subgraph (`subgraph_within`, `max_hops` hops); every relation
   chain of 1..`max_hops` steps leaving each topic entity, both directions, walked over entity
   sets (`chain_plans.enumerate_chains`, a beam of the best `beam` per level); with two topic
   entities, also the pairs of chains whose end sets meet.
   With `doc_steps` (on by default) the entities whose documents name a topic entity join the
   subgraph through a `mentions` step (`_document_steps`): a fact the graph lost is still reached
   through the document that states it. Each chain's relation words are
   scored against the question with the index's embedding model (cosine; `scorer=dense`) or by
   word overlap (`scorer=lexical`), and the best `shown_chains` with distinct end sets are kept.
   With `inverse_steps` a reverse step of a relation that has an inverse reads as a forward step of
   the inverse; `inverse_scope=graph` (the default) finds the inverse pairs over the whole graph
   (`relation_inverses.graph_inverses`), `subgraph` in the question subgraph alone.
3. The choice: by default the scorer's best route (`choose=top`, no call: with the 0.5B model a
   choice call picked the right route less often than the scorer ranked it first, docs/methods/
   chains.md). `choose=llm`: one choice call, the chains as readable routes ("Kill Bill -written
   by-> Quentin Tarantino -written by (reverse)-> Pulp Fiction, … -directed by-> …"), under an enum
   of route ids or "none"; skipped when one chain is left.
4. The graph executes the chosen chain: its end entities are the candidates. With
   `described_sets` (on by default), where the question describes the entities next to its topic
   ("the aluminium smelter that supplies X"), the chain's first set keeps those whose entity
   descriptions match the description best, and the chain is walked again from them
   (`described`). With `asked_sets` (on by default; ours), where the question describes the kind
   it asks for ("which mining company supplies X"), the end set keeps those whose descriptions
   match that phrase best (`asked_ends`).
5. Evidence from documents (when the index has them): sentence windows of the candidates' and
   the topic entities' documents and of the question's own best passages (dense search, BM25
   without vectors), ranked against the question at query time; the best `windows` are shown.
   With `topic_docs=also` (the default; ours), where the question names no relation of the graph
   and the route's first step is a graph fact, the topic entities' own documents are read beside
   the route's: "who is the chief executive of X" over a graph that only says X's parent is
   answered by X's report, not by the parent's.
   With `window_words` (offered, off by default; ours) the question's words that the route's
   relations do not name, weighed by how few of the windows say them, add to the cosine. With
   `merge_windows` (offered, off by default; ours) shown windows of one document that share a
   sentence are one passage, each sentence said once.
6. One answer call: the chosen chain's facts and the windows; the reply is an enum of the
   candidate names, answer-shaped spans of the shown windows (`answer_spans`; with
   `definite_kinds` also what a window says a thing "is the"; with `subject_names`, offered, a
   name with the nouns after it that open a copular clause: "the AF-28 microcontroller remains its
   flagship product"), yes/no for a yes/no question, and,
   only when no route was chosen, "not found" (an abstention, counted; `abstain=false`: never
   offered). With `date_grain` a "when" answer that is the year of a date a window states is given
   as the window states the date ("1845" -> "August 6, 1845"). With `unasked_spans` (on by
   default), where every question word names a relation or the kind asked, a window span naming an
   entity that the graph links to the topic or the route only through relations the question does
   not name is not offered ("1942", the release year, in a window beside the route to the films X
   wrote); with `graph_spans=false` no span naming an entity next to the route that is not one of
   its ends is. With `past_ends` (on by default) no span naming what the route's last relation
   reaches once more from its ends is offered (the parent's parent, the co-writer). A chosen
   route is the model's own judgement that the evidence answers the question (it could have said
   "none"): a 0.5B model then said "not found" beside a route that listed the answer, so the
   answer call keeps to the evidence.

LLM calls: 0-1 answer by default; with `choose=llm`, 0-1 choice + 0-1 answer (none when nothing
was found): at most 2 per question.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.access.graph import EvidencePath, Subgraph, subgraph_within
from engine.access.retrieval import sentence_windows, shared_scorer, with_rare_words
from engine.methods.chains import prompts as cp
from engine.methods.method_config import MethodConfig, option
from engine.methods.shared.answer_spans import allowed_answers, date_at_grain, echoes
from engine.methods.shared.chain_plans import (
    Chain,
    distinct_best,
    enumerate_chains,
    joined_chains,
    starts_with_fact,
    step_text,
    walk_sets,
)
from engine.methods.shared.chain_scoring import (
    CHAINS_WEIGHTS,
    ChainScorer,
    ScoreWeights,
    masked_question,
)
from engine.methods.shared.common import (
    abstain,
    ask,
    gold_held,
    new_record,
    optional_docs,
    optional_embedder,
    question_text,
    rank_answers,
    search_passages,
    timed,
)
from engine.methods.shared.labels import display_text, entity_text
from engine.methods.shared.question_shape import described_kind, described_phrase
from engine.methods.shared.relation_inverses import graph_inverses, inverse_relations
from engine.methods.shared.topics import linked_or_searched
from engine.methods.shared.word_forms import word_form, word_list, word_stems
from engine.methods.spec import MethodSpec
from engine.questions.record import AnswerRecord, Question
from index.chunking import sentence_spans
from ingest.base.errors import LocalkgError

if TYPE_CHECKING:
    from engine.access.protocols import DocumentStore
    from engine.methods.context import Context

CHOOSERS = ("llm", "top", "answer")
# `doc_steps`: (document's entity, MENTIONED, entity its text names), found at query time, not
# stored; the KG reads it as "mentions" (`readable_relation`)
MENTIONED = "localkg:mentions"
SCORERS = ("dense", "lexical")
_SOURCES = ("wiki", "web", "domain")
_STATED_CHUNKS = 20  # `doc_words`: the topic documents' chunks read for their words

EVIDENCE_LAST = ("facts", "named")
_W = {"low": 0.0, "high": 2.0}  # the scorer's weights
_D = CHAINS_WEIGHTS  # their defaults (`chain_scoring`: `hydra`'s `chain_weights=chains` reads them too)


@dataclass(frozen=True)
class ChainsConfig(MethodConfig):
    """`chains` (ours): the chain search, the scorer's weights, the choice, the windows, the answer."""

    max_hops: int = option(3, "longest chain (D_max)", low=1)
    max_topic_entities: int = option(2, "topic entities to start from", low=1)
    topic_search: int = option(5, "nothing linked: entities of the question's best passages (0: off)", low=0)
    max_degree: int = option(500, "subgraph: facts read per node and direction", low=1)
    max_nodes: int = option(20_000, "subgraph: node budget", low=1)
    beam: int = option(40, "chains kept per level to extend further", low=1)
    scorer: str = option("dense", "chain scorer: the index's embedding model, or word overlap", choices=SCORERS)
    last_step: float = option(_D.last_step, "weight: the question's first words against the chain's last step", **_W)
    first_step: float = option(_D.first_step, "weight: the words around the entity's mention against the first step", **_W)
    hop_penalty: float = option(_D.hop_penalty, "per step beyond the first: a longer chain must earn its steps", **_W)
    hub_penalty: float = option(_D.hub_penalty, "per tenfold size of the widest set a chain passes through", **_W)
    asked_type: float = option(_D.asked_type, "weight: what the question asks for (\"person\") against the chain's end set",
                               **_W)
    word_overlap: float = option(_D.word_overlap, "weight: share of the chain's steps whose relation words the question uses",
                                 **_W)
    relation_cover: float = option(_D.relation_cover, "weight: share of the question's relation words (words naming a relation "
                                   "of the subgraph) that the chain's steps name", **_W)
    cover_counts: bool = option(_D.cover_counts, "relation_cover counts each time the question says a relation word: said "
                                "twice (\"the director of the director of X\"), it asks for two steps naming it")
    relation_order: float = option(_D.relation_order, "weight: the first step is named next to the mention, the last next to "
                                   "the question word", **_W)
    meaning_cover: float = option(_D.meaning_cover, "weight: share of the question's relation-naming words (word form, or the "
                                  "embedding model's cosine >= meaning_threshold: \"kid\" names children) that "
                                  "distinct steps of the chain answer to (0: the scorer before it was the default)",
                                  **_W)
    meaning_threshold: float = option(_D.meaning_threshold, "meaning_cover: cosine of a question word and a relation label that "
                                      "counts as naming it", low=0.0, high=1.0)
    meaning_margin: float = option(0.0, "meaning_cover: how much closer than to any other relation a word must be to "
                                   "name one (\"film\" is as close to directed by as to starred actors)", low=0.0,
                                   high=1.0)
    unnamed_step: float = option(0.0, "per step that no relation-naming word of the question answers for (each word "
                                 "one step, as meaning_cover reads them), less one per word that names nothing: a "
                                 "step the question does not ask for costs this", **_W)
    kind_nouns: bool = option(_D.kind_nouns, "a question word that names a kind of entity (\"which company\", \"the company "
                              "that ...\", \"parent company\") does not name a relation of several words by one of "
                              "them (`sibling company`) unless the question says the others too")
    converse_nouns: bool = option(_D.converse_nouns, "a relational noun names the relation its converse noun labels, where no "
                                  "relation of the question subgraph is named by the noun itself (\"parent\" names "
                                  "`subsidiary of`; English converse pairs in `word_forms`)")
    described_sets: float = option(0.05, "where the question describes the entities next to its topic (\"the steel "
                                   "maker that supplies X\"), the chosen route's first set keeps the entities whose "
                                   "descriptions are within this cosine of the best match, the rest of the route "
                                   "walked again from them (0: off; an entity without a description stays)", low=0.0,
                                   high=1.0)
    asked_sets: float = option(0.05, "where the question describes the kind it asks for in words beyond the kind's "
                               "noun and its relation words (\"which mining company supplies X\"), the chosen route's "
                               "end set keeps the entities whose descriptions are within this cosine of the best "
                               "match (0: off; an entity without a description stays; ours)", low=0.0, high=1.0)
    step_direction: float = option(_D.step_direction, "weight: the first step goes the way the words around the mention say "
                                   "(\"founded by X\": X the agent; \"supplies X\": X the object)", **_W)
    bare_counts: bool = option(True, "a \"how many N\" question is offered a window's span \"<number> N\" as the "
                               "bare number (the question names the unit: \"16,400 employees\" -> \"16,400\")")
    date_grain: bool = option(True, "the answer to a \"when\" question that is part of a date or period a shown "
                              "window states (its year) is given as the window states it (\"August 6, 1845\", \"from "
                              "1973 to 1996\"); a whole date answering \"what year\" is given as its year")
    echo_retry: bool = option(True, "an answer that is words the question itself says (not part of a longer name "
                              "there; not for a yes/no or \"A or B\" question) is asked for once more, among the "
                              "allowed answers the question does not say (ours)")
    definite_kinds: bool = option(True, "a window's \"is the ...\" phrase is offered as an answer as its \"is a ...\" "
                                  "one is (\"The flagship product is the Weaver-6 welding arm\": a name span stops at "
                                  "\"welding\")")
    same_twice: bool = option(_D.same_twice, "\"the same N\" asks for N's relation twice, there and back (\"which films "
                              "share the same actor of X\": X's actors, then their films): relation_cover and "
                              "meaning_cover count N as said twice")
    kind_once: bool = option(True, "kind_nouns: where the question says a relation label's head noun both as a kind "
                             "and in the label (\"which company is recorded as a sibling company of X\"), the "
                             "kind counts as no mention of the relation (the chains method's own: hydra's "
                             "chain_weights=chains reads the scorer without it)")
    kin_terms: bool = option(_D.kin_terms, "a relation labelled by a general kin noun is also named by its gendered and "
                             "informal nouns (\"son\" and \"daughter\" name `children`, \"husband\" `spouse`; "
                             "English kin nouns in `word_forms`)")
    kin_synonyms: bool = option(True, "kin_terms: a general kin noun's thesaurus synonyms name its relation too (\"heir\", "
                                "\"descendant\", \"progeny\", \"scion\" name `children`; \"partner\", \"consort\", "
                                "\"mate\" `spouse`; English single words in `word_forms`; ours)")
    unasked_last: float = option(0.5, "weight: a route of two or more steps whose last step no question word names "
                                 "(beyond those its earlier steps use) costs this, where every word of the question "
                                 "names a relation or the kind asked (\"what movies was X the writer of\": not on to "
                                 "the films' actors or co-writers), the kind asked is no classifier noun (\"what "
                                 "types are ...\") and the question names some relation (ours)", **_W)
    co_words: bool = option(True, "a relation word prefixed \"co-\" or said before \"together\" asks for its "
                            "relation there and back, as \"the same N\" does (\"who co-starred with X\": X's films, "
                            "then their actors; ours)")
    mention_order: float = option(0.3, "weight: the share of the question's relation mentions, in the order English "
                                  "nests them from the entity out (the nouns before it nearest first, a possessive "
                                  "chain after it first: \"the kid of the parents of X 's mom\": mom, parents, kid), "
                                  "that the route's steps answer in that order (ours)", **_W)
    verb_mentions: bool = option(True, "a word right before an article and a relation mention (\"complete a bulk "
                                 "transaction with\") is the mention's verb, not a word that names nothing: it "
                                 "excuses no unnamed step and leaves unasked_last on (ours)")
    frame_words: bool = option(True, "the words that frame the question are no words it leaves unplaced: a request "
                               "(\"can you name ...\", \"list ...\") and a noun between an article and the topic "
                               "entity, which says what the topic is (\"the release date of the movie X\"); they excuse "
                               "no unnamed step and leave unasked_last on (ours)")
    unnamed_hops: float = option(1.0, "per step beyond the first, beside hop_penalty, where the question names no "
                                 "relation of the question subgraph, by word form or meaning, and asks for none there "
                                 "and back (\"the same N\"): the fewest steps then (\"what films are about X\"; ours)",
                                 **_W)
    repeat_mentions: bool = option(True, "meaning_cover: neighbouring words that name a relation's label as a whole are "
                                   "a mention each (\"the child of kid of X\" names `children` twice), different words "
                                   "of its label one mention (\"place of birth\"; ours)")
    doc_words: float = option(0.0, "weight: where question words that name no relation are words of the topic's own "
                              "documents (\"the chief executive of ...\"), each step no question word names costs "
                              "this, excused only by the other such words (ours)", **_W)
    reverse_words: bool = option(False, "the whole-chain cosine reads a reverse step as what has the relation "
                                 "(\"things written by it\", not \"written by (reverse)\"; ours)")
    inverse_steps: bool = option(True, "the scorer reads a reverse step of a relation that has an inverse in the "
                                 "graph (`inverse_scope`) as a forward step of that inverse (parents (reverse) is "
                                 "children; ours)")
    inverse_scope: str = option("graph", "where inverse_steps finds inverse relations: the whole graph (up to 1000 "
                                "facts of each relation, read once per KG) or the question subgraph, where a small "
                                "neighbourhood often holds too few pairs to tell (ours)",
                                choices=("graph", "subgraph"))
    doc_steps: int = option(20, "a step through the documents: the entities whose documents name a topic entity "
                            "(of its best `doc_steps` sparse-search passages) join the question subgraph, linked "
                            "to it by a `mentions` step (0: off)", low=0)
    shown_chains: int = option(5, "chains the model chooses among", low=1)
    choose: str = option("top", "top: the scorer's best route, no call; llm: one choice call; answer: no call, "
                                "the answer call reads the best `answer_routes` routes", choices=CHOOSERS)
    answer_routes: int = option(3, "choose=answer: routes the answer call reads", low=1)
    max_shown: int = option(2, "entity names shown per set of a route", low=1)
    max_candidates: int = option(30, "end entities offered as answers", low=1)
    windows: int = option(4, "document windows shown to the answer call (0: none)", low=0)
    window_words: float = option(0.0, "weight of the question's rare words in ranking windows (ours): the words of "
                                 "the question a window says, each weighed by how few of the windows read say it, "
                                 "beside the cosine; the words the route's relations name do not count (0, the "
                                 "default: the cosine alone; 0.1 measured)", low=0.0)
    window_sentences: int = option(2, "sentences per document window", low=1)
    question_passages: int = option(3, "the question's own best passages searched for windows (0: off)", low=0)
    max_window_chars: int = option(320, "characters kept of a window", low=1)
    max_chunks_per_entity: int = option(4, "chunks read per entity for windows", low=1)
    merge_windows: bool = option(False, "shown windows of one document that share a sentence are shown as one "
                                 "passage, each sentence once (ours): the same sentence twice costs prompt tokens "
                                 "and reads as two statements")
    topic_docs: str = option("also", "whose documents the windows come from where the question names no relation "
                             "of the graph: the route's entities (route; the topic's only when theirs have none), "
                             "the topic's and the route's (also), or the topic's first, the route's only when the "
                             "topic has none (first; ours), where the route's first step is a fact of the graph (not "
                             "a document's mention): an unnamed route is the scorer's guess, and \"who is the chief "
                             "executive of X\" is answered by X's own report, not by its parent's",
                             choices=("route", "also", "first"))
    window_entities: int = option(5, "entities per set of the route whose documents are read", low=1)
    abstain: bool = option(True, '"none" of the routes, then "not found" in the documents: an abstention')
    graph_spans: bool = option(True, "offer the window spans that name an entity next to the chosen route in the "
                               "question subgraph (false: only the route's ends among them; the graph holds the "
                               "others under relations the route did not take)")
    whole_names: bool = option(True, "where a window says whole the name of an entity next to the topic or the chosen "
                               "route in the question subgraph and a span falls inside it, the name is offered in "
                               "place of the spans it alone holds (\"Harry L. Fraser\", not \"Harry L\"; \"Sinbad "
                               "and the Eye of the Tiger\", not \"Tiger\"); the topic's own name cuts its parts and is "
                               "not offered (ours)")
    subject_names: bool = option(False, "a window's name with the nouns after it that open a copular clause (\"the "
                                 "AF-28 microcontroller remains its flagship product\") is offered in place of the "
                                 "name alone where the window says the name only there (ours)")
    unasked_spans: bool = option(True, "where every question word names a relation or the kind asked, a window span "
                                 "that names an entity the graph links to the chosen route (or the topic) only "
                                 "through relations the question does not name is not offered (\"1942\", the "
                                 "release year of the film X wrote, for \"what movies was X the writer of\"; ours)")
    past_ends: bool = option(True, "a window span that names an entity the route's last relation reaches once more "
                             "from its ends (either way; not on the route) is not offered: the route says how far "
                             "the question goes (the parent's parent for \"the parent of the steel maker that "
                             "supplies X\"; the co-writer of the film X wrote; ours)")
    alternatives: bool = option(False, "a question that offers alternatives (\"... north or south of Y?\") is offered "
                                "them as answers in place of yes and no")
    evidence_last: str = option("named", "what the answer call reads last, nearest the question: the graph's facts "
                                "(facts), or the facts only where a question word names the chosen route's last "
                                "step and else the document passages (named)", choices=EVIDENCE_LAST)
    max_tokens: int = option(48, "token limit of the answer call", low=1)
    seed: int = option(0, "sampling seed", low=0)


CHAINS_DEFAULTS: dict[str, Any] = ChainsConfig.defaults()


@dataclass(frozen=True)
class ShownWindow:
    """A document window as the answer call reads it, with where it comes from."""

    text: str
    chunk_id: str
    title: str
    collection: str


def _fact_step(chain: Chain) -> bool:
    """`starts_with_fact`, `doc_steps`' `MENTIONED` a mention too."""
    return starts_with_fact(chain.steps, (MENTIONED,))


def _shown(chunk: Any, text: str) -> ShownWindow:
    """A window of `chunk` as the answer call reads it: its text, after its title unless it says it."""
    shown = f"{chunk.title}: {text}" if chunk.title and chunk.title not in text else text
    return ShownWindow(shown, chunk.chunk_id, chunk.title, chunk.collection)


@dataclass
class Evidence:
    """What the answer call reads: the chosen chain's facts and the document windows."""

    facts: list[str]
    windows: list[ShownWindow]


class ChainsRun:
    """One question's run (see the module docstring)."""

    def __init__(self, question: Question, ctx: Context, config: dict[str, Any]) -> None:
        self.question, self.ctx = question, ctx
        self.config = ChainsConfig.from_config(config)
        self.kg = ctx.kg
        self.record = new_record(question, "chains")
        self.text = question_text(question)
        self.docs: DocumentStore | None = optional_docs(ctx)
        embedder = optional_embedder(ctx, self.docs)
        self.dense = shared_scorer(embedder) if embedder is not None else None
        self.sub: Subgraph | None = None
        self.named_relations: set[str] = set()  # the relations the question names (the scorer's)
        self.masked = self.text  # the question with the topic entities masked (set by `plan`)
        self.scorer: ChainScorer | None = None

    def label(self, node: str) -> str:
        return entity_text(self.kg, node)

    def run(self) -> AnswerRecord:
        cfg = self.config
        topics = linked_or_searched(self.question, self.ctx, self.record, cfg.max_topic_entities,
                                    cfg.topic_search, lambda e: display_text(self.kg, e))
        shown = self.plan(topics)
        if cfg.choose == "answer" and shown:  # no choice call: the answer call reads the best routes
            read = shown[: cfg.answer_routes]
            self.record.extra["choice"] = f"R1-R{len(read)} (no call: the answer chooses)"
            per_route = max(1, cfg.max_candidates // len(read))
            candidates = list(dict.fromkeys(e for c in read for e in c.ends[:per_route]))
            evidence = self.evidence(topics, read, candidates)
            self.answer(topics, read[0], candidates, evidence, self._withheld(topics, read, candidates))
            return self.record
        chosen = self.choose(shown)
        if chosen is not None and cfg.described_sets:
            chosen = self.described(chosen)
        if chosen is not None and cfg.asked_sets:
            chosen = self.asked_ends(chosen)
        candidates = chosen.ends[: cfg.max_candidates] if chosen else []
        routes = [chosen] if chosen else []
        evidence = self.evidence(topics, routes, candidates)
        self.answer(topics, chosen, candidates, evidence, self._withheld(topics, routes, candidates))
        return self.record

    # ---- 2. chains, no LLM ----------------------------------------------------------------------

    def plan(self, topics: list[str]) -> list[Chain]:
        cfg = self.config
        if not topics:
            return []
        with timed(self.record, "subgraph"):
            sub = subgraph_within(self.kg, topics, cfg.max_hops, max_degree=cfg.max_degree,
                                  max_nodes=cfg.max_nodes)
            if cfg.doc_steps and self.docs is not None and cfg.max_hops > 1:
                self._document_steps(sub, topics)
        self.sub = sub
        self.record.extra["subgraph"] = sub.summary()
        query = masked_question(self.question.question, [self.label(t) for t in topics])
        relations = sorted({key for _, _, key in sub.graph.edges(keys=True)})
        inverses = ({} if not cfg.inverse_steps else inverse_relations(sub.graph) if cfg.inverse_scope == "subgraph"
                    else graph_inverses(self.kg, [r for r in relations if r != MENTIONED]))
        if inverses:
            self.record.extra["inverse_relations"] = inverses
        scorer = ChainScorer(cfg.scorer, query, self.kg.relation_label, self.dense, ScoreWeights.of(cfg),
                             self.label, relations, inverses, stated=self._stated_words(topics))
        self.named_relations = scorer.question_relations() if cfg.evidence_last == "named" else set()
        self.scorer = scorer
        with timed(self.record, "chains"):
            per_topic = [self._chains_of(sub, t, scorer) for t in topics]
            every = [c for chains in per_topic for c in chains]
            for i in range(len(per_topic)):
                for j in range(i + 1, len(per_topic)):
                    every.extend(joined_chains(per_topic[i], per_topic[j]))
            shown = distinct_best(every, cfg.shown_chains)
        self.record.extra["chains_scored"] = len(every)
        self.record.extra["chains_shown"] = [
            {"route": f"R{i}", "text": self.route(c), "relations": c.relation_words(self.kg.relation_label),
             "score": round(c.score, 4), "ends": len(c.ends), "gold": self.gold_in(c.ends)}
            for i, c in enumerate(shown, 1)]
        ranked = distinct_best(every, len(every))
        self.record.extra["gold_chain_rank"] = next(
            (i for i, c in enumerate(ranked, 1) if self.gold_in(c.ends[:1])), None)
        self.record.extra["scored_query"] = query
        self.masked = query
        return shown

    def _document_steps(self, sub: Subgraph, topics: list[str]) -> None:
        """`doc_steps`: the entities whose documents name a topic entity, in the subgraph with their own
        neighbourhood (one hop less), each linked to the topic by an edge `MENTIONED` (document's
        entity -> topic): a fact the graph lost may still be written in a document."""
        assert self.docs is not None
        linked: dict[str, str] = {}
        for topic in topics:
            name = self.label(topic)
            if len(name) < 3:
                continue
            pattern = re.compile(rf"(?<!\w){re.escape(name)}(?!\w)", re.IGNORECASE)
            try:
                hits = search_passages(self.docs, name, self.config.doc_steps, first="sparse")
            except LocalkgError:  # neither search was built
                continue
            for hit in hits:
                entity = hit.chunk.entity
                if entity and entity not in topics and pattern.search(hit.chunk.text):
                    linked.setdefault(entity, topic)
        if not linked:
            return
        more = subgraph_within(self.kg, list(linked), self.config.max_hops - 1, max_degree=self.config.max_degree,
                               max_nodes=self.config.max_nodes)
        for node, d in more.depth.items():
            sub.depth.setdefault(node, d + 1)
        sub.graph.add_edges_from(more.graph.edges(keys=True))
        for entity, topic in linked.items():
            sub.graph.add_edge(entity, topic, key=MENTIONED)
        self.record.extra["doc_linked"] = len(linked)

    def gold_in(self, entities: Sequence[str], texts: Sequence[str] = ()) -> list[str]:
        """The gold answers among these entities (or, documents, said by these texts): for the
        stage-recall statistics only; nothing in the method reads it."""
        return gold_held(self.question.answers, [self.label(e) for e in entities], texts)

    def _chains_of(self, sub: Subgraph, topic: str, scorer: ChainScorer) -> list[Chain]:
        return enumerate_chains(sub, topic, self.config.max_hops, scorer=scorer,
                                beam=self.config.beam)

    def route(self, chain: Chain) -> str:
        return chain.sentence(self.label, self.kg.relation_label, self.config.max_shown)

    # ---- 3. one choice ----------------------------------------------------------------------------

    def choose(self, shown: list[Chain]) -> Chain | None:
        if not shown:
            self.record.extra["choice"] = None
            return None
        if len(shown) == 1 or self.config.choose == "top":
            self.record.extra["choice"] = "R1 (no call)"
            return shown[0]
        parsed = ask(self.ctx.llm, self.record, system=cp.CHOOSE_SYSTEM,
                     user=cp.choose_user(self.text, [self.route(c) for c in shown]),
                     schema=cp.choose_schema(len(shown)), stage="choose", temperature=0.0,
                     max_tokens=12, seed=self.config.seed)
        route = str(parsed.get("route", "")) if isinstance(parsed, dict) else ""
        self.record.extra["choice"] = route or "R1 (reply invalid)"
        if route == cp.NONE_CHAIN:
            return None
        if route.startswith("R") and route[1:].isdigit() and 1 <= int(route[1:]) <= len(shown):
            return shown[int(route[1:]) - 1]
        return shown[0]

    def described(self, chain: Chain) -> Chain:
        """`described_sets`: where the question describes the entities one step from its topic
        ("the steel maker that supplies X", `question_shape.described_phrase`) in words beyond
        the phrase's head noun and its relation words, the route's first set keeps the entities
        whose descriptions the embedding model puts within `described_sets` of the best cosine to
        that phrase, and the route's later steps are walked again from them; the route as it was
        where nothing is dropped, a later step then reaches nothing, or fewer than two of the
        entities have descriptions (one without a description is kept)."""
        found = described_phrase(self.masked)
        if found is None or chain.also is not None or self.dense is None or self.sub is None \
                or len(chain.sets[1]) < 2:
            return chain
        phrase, head = found
        said = set(self.scorer.relation_words) if self.scorer is not None else set()
        if not [w for w in word_list(phrase) if w != word_form(head) and w not in said]:
            return chain  # "the company founded by X": nothing describes the company
        first = chain.sets[1]
        kept = self._closest_described(first, phrase, self.config.described_sets)
        if kept is None:
            return chain
        sets = walk_sets(self.sub, kept, chain.steps[1:], chain.topic) if len(kept) < len(first) else None
        if sets is None:
            return chain
        self.record.extra["described"] = {"phrase": phrase, "kept": [self.label(e) for e in kept],
                                          "of": len(first)}
        return Chain(chain.topic, chain.steps, [chain.sets[0], *sets], chain.truncated, chain.score)

    def asked_ends(self, chain: Chain) -> Chain:
        """`asked_sets`: where the question describes the kind of entity it asks for beyond the
        kind's noun and the words that name the route's relations ("which mining company supplies
        X": "mining"), the route's end set keeps the entities whose descriptions the embedding
        model puts within `asked_sets` of the best cosine to that phrase ("mining company"); the
        route as it was where fewer than two of the ends have descriptions (one without a
        description is kept), where every description says the phrase's modifiers ("which stock
        exchange": each is a "stock exchange of ..."; the cosine would choose among equals) or
        the route joins two topics."""
        if chain.also is not None or self.dense is None or len(chain.ends) < 2:
            return chain
        said = set(self.scorer.relation_words) if self.scorer is not None else set()
        phrase = described_kind(self.masked, lambda w: word_form(w) in said)
        if phrase is None:
            return chain  # "which company supplies X": nothing describes the company
        # "which stock exchange": where every end's description says "stock", nothing to choose
        modifiers = {word_form(w) for w in phrase.split()[:-1]}
        kept = self._closest_described(chain.ends, phrase, self.config.asked_sets, modifiers)
        if kept is None or len(kept) == len(chain.ends):
            return chain
        self.record.extra["asked_ends"] = {"phrase": phrase, "kept": [self.label(e) for e in kept],
                                           "of": len(chain.ends)}
        return Chain(chain.topic, chain.steps, [*chain.sets[:-1], kept], chain.truncated, chain.score)

    def _closest_described(self, entities: list[str], phrase: str, margin: float,
                           modifiers: set[str] | frozenset[str] = frozenset()) -> list[str] | None:
        """The entities whose descriptions the embedding model puts within `margin` of the best
        cosine to `phrase` (`described_sets`, `asked_sets`); an entity without a description is
        not judged: it stays. None where fewer than two have descriptions, or where every
        description says each of `modifiers` (word forms): the cosine would choose among equals."""
        table = self.ctx.linker.table
        if self.dense is None:
            return None
        described = {e: text for e in entities if (text := table.description(e))}
        if len(described) < 2:
            return None
        if modifiers and all(modifiers <= set(word_stems(text)) for text in described.values()):
            return None
        scores = dict(zip(described, self.dense.scores(phrase, list(described.values())), strict=True))
        best = max(scores.values())
        return [e for e in entities if e not in scores or scores[e] >= best - margin]

    # ---- 4-5. candidates and evidence ---------------------------------------------------------

    def evidence(self, topics: list[str], routes: list[Chain], candidates: list[str]) -> Evidence:
        keep = set(candidates)
        facts = [self._fact(c, [e for e in c.ends if e in keep]) for c in routes]
        self.record.paths.extend(self._kg_evidence(c, candidates) for c in routes)
        readers = self._route_entities(routes[0]) if routes else []
        windows = self._windows(topics, readers, routes) if self.docs is not None else []
        for window in windows:
            self.record.paths.append(EvidencePath(
                source=window.collection if window.collection in _SOURCES else "domain",  # type: ignore[arg-type]
                sentences=[window.text.removeprefix(f"{window.title}: ") if window.title else window.text],
                chunk_ids=[window.chunk_id], titles=[window.title],  # the source's words only
                score_kind="cosine to the question"))
        return Evidence(facts, windows)

    def _stated_words(self, topics: list[str]) -> set[str]:
        """`doc_words`: the word forms of the topic entities' own documents."""
        if not self.config.doc_words or self.docs is None:
            return set()
        return {f for t in topics for chunk in self.docs.chunks_of(t, _STATED_CHUNKS) for f in word_stems(chunk.text)}

    def _route_words(self, routes: list[Chain]) -> set[str]:
        """The word forms of the routes' relation labels: the words of the question the graph
        answers, which `window_words` does not look for in the windows ("written" of "the directors
        of the films written by the writer of X": the route states who wrote them)."""
        steps = [s for c in routes for s in c.all_steps]
        return {f for relation, _ in steps if relation != MENTIONED for f in word_stems(self.kg.relation_label(relation))}

    def _route_entities(self, chain: Chain) -> list[str]:
        """Every entity the route passes through, the last step's first: the answer may be a fact
        of an entity on the way that only its documents hold ("the chief executive of the
        company that supplies X": the graph reaches the company, its report names the CEO)."""
        sets = [s for c in chain.parts for s in reversed(c.sets[1:])]
        return list(dict.fromkeys(e for s in sets for e in s[: self.config.window_entities]))

    def _fact(self, chain: Chain, candidates: list[str]) -> str:
        """The chosen chain as one line, its end set in full up to the candidates."""
        names = ", ".join(dict.fromkeys(self.label(e) for e in candidates))
        steps = " -> ".join(step_text(s, self.kg.relation_label) for s in chain.steps)
        head = f"{self.label(chain.topic)} -> {steps}"
        if chain.also is not None:
            other = " -> ".join(step_text(s, self.kg.relation_label) for s in chain.also.steps)
            head += f"; {self.label(chain.also.topic)} -> {other}"
        return f"{head}: {names}"

    def _kg_evidence(self, chain: Chain, candidates: list[str]) -> EvidencePath:
        """The chain as record evidence: its relation ids and, per step, a few stored triples."""
        triples: list[list[str]] = []
        ids: list[list[str]] = []
        for c in chain.parts:
            for i, (relation, direction) in enumerate(c.steps):
                heads, tails = c.sets[i][:3], c.sets[i + 1]
                if relation == MENTIONED:  # a document's words, not a stored fact (the windows show them)
                    continue
                for head in heads:
                    for tail in tails[:3]:
                        fact = (head, relation, tail) if direction == "out" else (tail, relation, head)
                        if self._holds(fact):
                            ids.append(list(fact))
                            triples.append([display_text(self.kg, fact[0]), self.kg.relation_label(relation),
                                            display_text(self.kg, fact[2])])
        return EvidencePath(source="kg", triples=triples, triple_ids=ids,
                            relation_ids=[r for r, _ in chain.steps if r != MENTIONED], score=round(chain.score, 6),
                            score_kind="cosine of the chain's relations to the question")

    def _holds(self, fact: tuple[str, str, str]) -> bool:
        return self.sub is not None and self.sub.graph.has_edge(fact[0], fact[2], key=fact[1])

    def _windows(self, topics: list[str], readers: list[str], routes: list[Chain]) -> list[ShownWindow]:
        """The best `windows` sentence windows of the documents of the entities along the chosen
        route (no route: of the topic entities' documents and the question's own best passages),
        by cosine to the question with the topic entities masked: the topic's own report names
        its own chief executive, which is not what "the chief executive of its supplier" asks.
        Where the question names no relation (`unnamed_hops`) and the route's entities have no
        documents, the topic entities' documents are read: "who is the chief executive of X" names
        nothing of the graph, and its route to X's founder reaches a person without a document. With
        `topic_docs` (`also`, the default) they are read where the question names no relation and the
        route's first step is a graph fact, whether the route's entities have documents or not: its
        route to X's parent reaches the parent's report, which names the parent's chief executive."""
        cfg = self.config
        if cfg.windows <= 0 or self.docs is None:
            return []
        docs = self.docs
        with timed(self.record, "retrieval"):
            chunks: dict[str, Any] = {}  # chunk id -> ChunkRecord

            def read(entities: list[str]) -> None:
                for entity in entities:
                    for chunk in docs.chunks_of(entity, cfg.max_chunks_per_entity):
                        chunks.setdefault(chunk.chunk_id, chunk)

            unnamed = self.scorer is not None and self.scorer.names_none
            if unnamed and readers and cfg.topic_docs != "route" and routes and _fact_step(routes[0]):
                read(topics)
                if not chunks or cfg.topic_docs == "also":
                    read(readers)
            else:
                read(readers or topics)
            if not chunks and readers and unnamed:
                # the question names no relation and the route's entities have no documents: what it
                # asks may be a fact of the topic that only the topic's own report states ("who is the
                # chief executive of X": the route to X's founder, a person without a document)
                read(topics)
            if not routes and cfg.question_passages > 0:
                for hit in search_passages(docs, self.text, cfg.question_passages):
                    chunks.setdefault(hit.chunk.chunk_id, hit.chunk)
            units: list[ShownWindow] = []
            starts: list[int] = []  # each unit's first sentence in its chunk (`merge_windows`)
            size = cfg.window_sentences
            limit = cfg.max_window_chars
            for chunk in chunks.values():
                for window in sentence_windows(chunk, size, stride=max(1, size - 1)):
                    units.append(_shown(chunk, " ".join(window.text.split())[:limit]))
                    starts.append(window.first_sentence)
            if not units or self.dense is None:
                return units[: cfg.windows]
            ranked = self.dense.rank(self.masked, [u.text for u in units])
            if cfg.window_words > 0:
                asked = word_stems(self.masked) - self._route_words(routes)
                ranked = with_rare_words(asked, [word_stems(u.text) for u in units], ranked, cfg.window_words)
            picked: list[int] = []
            seen: set[str] = set()
            for i, _ in ranked:
                if units[i].text not in seen:
                    seen.add(units[i].text)
                    picked.append(i)
                if len(picked) >= cfg.windows:
                    break
            if cfg.merge_windows:
                return self._merged([(units[i], starts[i]) for i in picked], chunks)
        return [units[i] for i in picked]

    def _merged(self, picked: list[tuple[ShownWindow, int]], chunks: dict[str, Any]) -> list[ShownWindow]:
        """`merge_windows`: the picked windows (best first, each with its first sentence), those of
        one chunk that share a sentence joined into one passage of their sentences in the
        document's order, at the place of the best of them (at most twice `max_window_chars`)."""
        size = self.config.window_sentences
        groups: list[tuple[ShownWindow, set[int]]] = []  # the best window of a group, its sentences
        for unit, start in picked:
            covered = set(range(start, start + size))
            meet = [n for n, (best, sentences) in enumerate(groups) if best.chunk_id == unit.chunk_id
                    and sentences & covered]
            if not meet:
                groups.append((unit, covered))
                continue
            first = meet[0]  # the window joins the best group it meets; a window between two joins them
            joined = covered.union(*(groups[n][1] for n in meet))
            groups[first] = (groups[first][0], joined)
            groups = [g for n, g in enumerate(groups) if n not in meet[1:]]
        merged: list[ShownWindow] = []
        for best, sentences in groups:
            if len(sentences) == size:
                merged.append(best)
                continue
            chunk = chunks[best.chunk_id]
            spans = sentence_spans(chunk.text)
            text = " ".join(" ".join(chunk.text[a:b] for a, b in spans[min(sentences):max(sentences) + 1]).split())
            merged.append(_shown(chunk, text[: self.config.max_window_chars * 2]))
        return merged

    def _withheld(self, topics: list[str], routes: list[Chain], candidates: list[str]) -> set[str]:
        """The names (lower case) the answer call is not offered as window spans: with `graph_spans` on
        (the default), `past_ends`' (`_past_ends`) and `unasked_spans`' (`_unasked_values`); with
        `graph_spans=false` (which covers both):
        the entities next to the chosen routes in the question subgraph (neighbours of the topics and of
        the entities whose documents gave the windows) that are not the routes' ends. The graph holds
        them under a relation the routes did not take: "Tennessee Johnson release year 1942" in a
        window beside the route to the films Alvin Meyers wrote. The documents add what the graph does
        not hold (the chief executive that a supplier's report names). No route: nothing withheld."""
        if not routes or self.sub is None:
            return set()
        if self.config.graph_spans:
            past = self._past_ends(topics, routes) if self.config.past_ends else set()
            return past | (self._unasked_values(topics, routes, candidates) if self.config.unasked_spans else set())
        around = self._around([*topics, *(e for c in routes for e in self._route_entities(c))])
        ends = {self.label(e).lower() for e in candidates}
        return {name for name in (self.label(n).lower() for n in around | set(topics)) if name not in ends}

    def _past_ends(self, topics: list[str], routes: list[Chain]) -> set[str]:
        """`past_ends`: the names (lower case) of the entities the question subgraph links to the chosen
        routes' ends by the route's own last relation (either way), on no route and no topic: that
        relation taken once more goes past what the question asks ("Brennvald Holdings", the parent
        of the steel maker's parent, for "the parent of the steel maker that supplies X"; the
        co-writer of the film X wrote, for "what films did X write")."""
        graph = self.sub.graph if self.sub is not None else None
        if graph is None:
            return set()
        legs = [leg for c in routes for leg in (c, c.also) if leg is not None]
        on_route = {*topics, *(e for leg in legs for s in leg.sets for e in s)}
        past: set[str] = set()
        for leg in legs:
            last = leg.steps[-1][0]
            if last == MENTIONED:
                continue
            for end in (e for e in leg.sets[-1] if e in graph):
                past.update(n for _, n, key in graph.out_edges(end, keys=True) if key == last)
                past.update(n for n, _, key in graph.in_edges(end, keys=True) if key == last)
        keep = {self.label(e).lower() for e in on_route}
        return {name for name in (self.label(e).lower() for e in past - on_route) if name not in keep}

    def _unasked_values(self, topics: list[str], routes: list[Chain], candidates: list[str]) -> set[str]:
        """`unasked_spans`: the names (lower case) of the entities that the question subgraph links to
        the topics or to the chosen routes' entities only through relations the question does not
        name, where every word of the question names a relation or the kind asked (the scorer's
        `names_each_word`): "what movies was X the writer of" names `written by` alone, so "1942", the
        release year of the film X wrote, is no answer a window may offer. A name the graph also
        links through a named relation (a director who wrote it too), a route's end and a topic stay
        offered; the documents' own `mentions` links say no relation and are not read."""
        scorer = self.scorer
        if scorer is None or self.sub is None or not scorer.names_each_word:
            return set()
        named = set(scorer.question_relations())
        named |= {scorer.inverses[r] for r in named if r in scorer.inverses}
        named |= {r for r, inverse in scorer.inverses.items() if inverse in named}
        graph = self.sub.graph
        near = {*topics, *(e for c in routes for e in self._route_entities(c))}
        asked: set[str] = set(near) | set(candidates)
        unasked: set[str] = set()
        for entity in near:
            if entity not in graph:
                continue
            edges = [(n, key) for _, n, key in graph.out_edges(entity, keys=True)]
            edges += [(n, key) for n, _, key in graph.in_edges(entity, keys=True)]
            for other, relation in edges:
                if relation == MENTIONED:
                    continue
                (asked if relation in named else unasked).add(other)
        keep = {self.label(e).lower() for e in asked}
        return {name for name in (self.label(e).lower() for e in unasked - asked) if name not in keep}

    # ---- 6. one answer ----------------------------------------------------------------------------

    def _names_last_step(self, chosen: Chain | None) -> bool:
        """`evidence_last=named`: a question word names the chosen route's last step (by word form
        or meaning: the scorer's `meaning_cover` words), so the graph's facts likely answer ("who
        directed X": `directed by`); else the question asks for something the route's last step
        only guesses ("the chief executive of ...", which no relation of the graph names) and
        the document passages go last."""
        if chosen is None:
            return True
        lasts = [chosen.steps[-1][0], *([chosen.also.steps[-1][0]] if chosen.also is not None else [])]
        return any(r in self.named_relations for r in lasts)

    def _known_names(self, topics: list[str], chosen: Chain | None) -> tuple[set[str], set[str]]:
        """`whole_names`: the names of the topics, of the chosen route's entities and of their
        neighbours in the question subgraph (the entities their documents name), and the topics'
        own names in lower case."""
        near = [*topics, *(self._route_entities(chosen) if chosen is not None else [])]
        return {self.label(e) for e in {*near, *self._around(near)}}, {self.label(t).lower() for t in topics}

    def _around(self, near: list[str]) -> set[str]:
        """The neighbours of `near` in the question subgraph (either way)."""
        graph = self.sub.graph if self.sub is not None else None
        if graph is None:
            return set()
        return {n for e in near if e in graph for n in (*graph.successors(e), *graph.predecessors(e))}

    def answer(self, topics: list[str], chosen: Chain | None, candidates: list[str], evidence: Evidence,
               withheld: set[str] | None = None) -> None:
        record, cfg = self.record, self.config
        names = [self.label(e) for e in candidates]
        passages = [w.text for w in evidence.windows]
        known, topic_names = self._known_names(topics, chosen) if cfg.whole_names and passages else (set(), set())
        allowed = allowed_answers(self.text, names, passages, choices=cfg.alternatives, withheld=withheld or set(),
                                  counts=cfg.bare_counts, definite=cfg.definite_kinds, known=known,
                                  unoffered=topic_names, subjects=cfg.subject_names)
        record.extra["candidates"] = allowed
        record.extra["gold_in_candidates"] = gold_held(self.question.answers, allowed)
        record.extra["gold_in_windows"] = self.gold_in([], passages)
        if not allowed:
            abstain(record, "no chain and no document window")
            return
        # "not found" is offered where the evidence may not hold the answer: no route was chosen
        # (documents only). A chosen route reaches entities: the model answers from them or from
        # the windows (a 0.5B model said "not found" beside a route that listed the answer).
        offer = not names and cfg.abstain
        facts_last = cfg.evidence_last == "facts" or self._names_last_step(chosen)
        record.extra["evidence_last"] = "facts" if facts_last else "passages"
        user = cp.answer_user(self.text, evidence.facts, passages, facts_last=facts_last)

        def answer_among(options: list[str], stage: str) -> str:
            parsed = ask(self.ctx.llm, record, system=cp.ANSWER_SYSTEM if offer else cp.ANSWER_ROUTE_SYSTEM,
                         user=user, schema=cp.answer_schema(options, offer), stage=stage, temperature=0.0,
                         max_tokens=cfg.max_tokens, seed=cfg.seed)
            return str(parsed.get("answer", "")) if isinstance(parsed, dict) else ""

        answer = answer_among(allowed, "answer")
        record.extra["model_answer"] = answer
        asked = [self.label(t) for t in topics]
        # the question does not ask for what it says: once more, without its own words (a topic
        # entity named with route ends to offer is `rank_answers`' to set aside: the first end answers)
        echo = cfg.echo_retry and echoes(self.text, answer) and not (names and answer in asked)
        others = [a for a in allowed if not echoes(self.text, a)] if echo else []
        if others:
            record.extra["echo"] = answer
            answer = answer_among(others, "answer_echo")
        if answer == cp.NOT_FOUND:
            abstain(record, "the model found no answer in the documents")
            return
        if not answer and not names:
            abstain(record, "no valid reply")
            return
        if cfg.date_grain and answer not in names and (dated := date_at_grain(self.text, answer, passages)) != answer:
            record.extra["date_grain"] = f"{answer} -> {dated}"  # the model's pick, at the asked grain
            answer = dated
        record.prediction, record.predictions = rank_answers(answer, list(dict.fromkeys(names)), asked)
        in_kg = any(n == record.prediction for n in names)
        in_docs = any(record.prediction.lower() in p.lower() for p in passages)
        record.answer_source = "both" if in_kg and in_docs else "kg" if in_kg else "doc" if in_docs else "llm"


def run_chains(question: Question, ctx: Context, config: dict[str, Any]) -> AnswerRecord:
    """Plan once (one choice among scored relation chains), the graph executes, read once."""
    return ChainsRun(question, ctx, config).run()


CHAINS = MethodSpec.typed(
    "chains", run_chains, ChainsConfig,
    "ours, for small models: LLM-free chain search and ranking, one answer call (choose=llm: a choice call first)",
    hash_when_set=("answer_routes",), hash_unless={"topic_docs": "route", "inverse_scope": "subgraph", "merge_windows": False, "window_words": 0.0, "subject_names": False, "whole_names": False, "frame_words": False, "past_ends": False, "asked_sets": 0.0, "verb_mentions": False, "mention_order": 0.0, "co_words": False, "unasked_spans": False, "unasked_last": 0.0, "kin_synonyms": False, "doc_words": 0.0, "reverse_words": False, "repeat_mentions": False, "unnamed_hops": 0.0, "echo_retry": False, "kind_once": False, "same_twice": False, "definite_kinds": False, "date_grain": False, "bare_counts": False, "kin_terms": False, "step_direction": 0.0, "described_sets": 0.0, "converse_nouns": False, "evidence_last": "facts", "kind_nouns": False, "doc_steps": 0, "alternatives": False, "meaning_cover": 0.0, "meaning_threshold": 0.55, "meaning_margin": 0.0, "unnamed_step": 0.0, "inverse_steps": False, "graph_spans": True, "relation_cover": 0.0, "relation_order": 0.0, "cover_counts": False},
)

"""Think-on-Graph 2.0 (ToG-2 §3, Algorithm 1): graph search and document retrieval, tightly
coupled, in rounds.

Initialisation: entity linking, topic prune (the model keeps the good starting entities; it may
keep none), the top-K units of the topic entities' documents, and one reasoning call: answered
already? Then per round i = 1..D: relation discovery (both directions) for every topic entity;
relation prune (all topic entities in one call by default, Eq. 3; one call per entity with
`relation_prune=per_entity`, Eq. 2), each relation scored 0..10, a threshold, the top W per
entity; entity discovery (tails of the kept relations, a deterministic sample of a hub's; literal
tails stay candidates); context retrieval (`tog2_context`: the candidates' document units
scored against triple sentence + question) and the context-based entity prune (`tog2_score`,
Eq. 6); the top W candidates are the next topic entities; reasoning over the clues, the triple
paths and the top-K units: an answer, or clues and (between rounds) a re-formed query.

LLM calls: topic prune 1, initial judgement 1, per round relation prune 1 + reasoning 1, query
re-forming D-1: at most 2D + (D-1) + 1 plus the initial judgement (per-entity prune: W per
round). The last round asks for a best answer when the knowledge is not enough (no extra call),
unless `abstain`. `prune_tool=bm25|embedding` (ours, after ToG's pruning tools) scores relations
against the question without the LLM and skips the topic prune: D + (D-1) + 1 calls. Options of
the authors' released code (off by default): `sc_gate`,
`chunk_query=question`, `context_unit=chunk`, `clues=false` / `reform_query=false`,
`drop_literals`, `drop_docless`; `context_scorer=bm25` in place of the bi-encoder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from engine.access.graph import EvidencePath, GraphPath, Hop, Source
from engine.access.kg_protocol import Relation, is_literal
from engine.access.retrieval import shared_scorer
from engine.methods import prompts
from engine.methods import tog2_prompts as p2
from engine.methods.common import (
    abstain,
    answer_of,
    ask,
    cot_once,
    found_in,
    majority,
    names_any,
    new_record,
    optional_docs,
    optional_embedder,
    question_text,
    timed,
)
from engine.methods.labels import (
    SCHEMA_RELATION_PREFIXES,
    display_text,
    entity_text,
    relation_text,
    triple_text,
    unique_texts,
)
from engine.methods.method_config import MethodConfig, option
from engine.methods.prune import PRUNE_TOOLS, Pruner
from engine.methods.spec import MethodSpec
from engine.methods.tog2_context import (
    CHUNK_QUERIES,
    SCORERS,
    UNITS,
    Candidate,
    ContextRetriever,
    Scored,
)
from engine.methods.tog2_score import entity_scores, kept_relations, triple_sentence
from engine.methods.topics import linked_or_searched
from engine.questions.record import AnswerRecord, AnswerSource, Question
from index.entities import normalise

if TYPE_CHECKING:
    from engine.access.protocols import DocumentStore
    from engine.methods.context import Context

_DOC_SOURCES = ("wiki", "web", "domain")

_T = {"low": 0.0, "high": 2.0}  # temperatures


@dataclass(frozen=True)
class Tog2Config(MethodConfig):
    """`tog2`: rounds of graph search and context retrieval; the paper's values, the code's
    choices (off by default) and ours."""

    width: int = option(3, "W: relations per entity and topic entities kept per round", "ToG-2 §3", low=1)
    depth: int = option(3, "D: rounds", "ToG-2 §3", low=1)
    top_k: int = option(10, "K: context units per round (and at initialisation)", "ToG-2 §3", low=1)
    alpha: float = option(0.3, "decay of the entity score (the paper gives no value)", "ToG-2 Eq. 6", low=0.0)
    relation_threshold: float = option(0.2, "relation scores (0..10 -> 0..1) under it are pruned", "ToG-2 §3",
                                       low=0.0, high=1.0)
    relation_prune: str = option("combined", "combined: one call for all entities (Eq. 3); per_entity: one "
                                              "call each (Eq. 2)", "ToG-2 Eq. 2-3",
                                 choices=("combined", "per_entity"))
    prune_tool: str = option("llm", "llm (the paper), or relations scored against the question without a "
                                    "call (then no topic prune)", "ours, after ToG Table 5", choices=PRUNE_TOOLS)
    max_relations: int = option(12, "relations shown per entity, most similar to the question first", low=1)
    max_tails: int = option(20, "tails per (entity, relation): a deterministic sample of a hub's", low=1)
    max_topic_entities: int = option(5, "linked entities offered to the topic prune", low=1)
    topic_prune: bool = option(True, "the model picks the starting entities (may pick none)", "ToG-2 §3")
    topic_search: int = option(5, "nothing linked: entities of the question's top passages (0: off)", low=0)
    context_unit: str = option("sentence", "sentence (paper: K sentences) or chunk (code: paragraphs)", "ToG-2 §3",
                               choices=UNITS)
    chunk_query: str = option("triple+question", "what a unit is scored against: triple+question, "
                                                 "triple+chunk (Eq. 5) or question (code)", "ToG-2 Eq. 5",
                              choices=CHUNK_QUERIES)
    context_scorer: str = option("dense", "unit scorer: the index's bi-encoder, or BM25", choices=SCORERS)
    max_chunks_per_entity: int = option(20, "chunks read per candidate entity", low=1)
    max_unit_chars: int = option(400, "characters of a unit as shown to the model", low=1)
    clues: bool = option(True, "carry the reasoning's clues into the next round", "ToG-2 §3")
    reform_query: bool = option(True, "re-form the retrieval query between rounds (D-1 calls)", "ToG-2 §3")
    drop_literals: bool = option(False, "literal tails are no candidates", "ToG-2 code")
    drop_docless: bool = option(False, "entities without documents are no candidates", "ToG-2 code")
    require_grounded_answer: bool = option(True, '"sufficient" only when the evidence shown says the answer')
    confirm_initial: bool = option(True, "an initialisation answer waits for round 1 (taken if it finds none)")
    abstain: bool = option(False, 'nothing sufficient: "not found" instead of a best guess')
    sc_gate: bool = option(False, "self-consistency gate before any graph search", "ToG-2 code")
    sc_samples: int = option(10, "sc_gate: CoT samples", "ToG-2 code", low=1)
    sc_agreement: float = option(0.8, "sc_gate: share of the samples that must agree to stop", "ToG-2 code",
                                 low=0.0, high=1.0)
    sc_temperature: float = option(0.7, "sc_gate: sampling temperature", "ToG-2 code", **_T)
    temperature_exploration: float = option(0.0, "temperature of the prune calls (the paper: 0 for every "
                                                 "generation)", "ToG-2 §3", **_T)
    temperature_reasoning: float = option(0.0, "temperature of the reasoning and query calls", "ToG-2 §3", **_T)
    topic_prune_max_tokens: int = option(64, "token limit of the topic prune call", low=1)
    relation_prune_max_tokens: int = option(200, "token limit of a relation prune call", low=1)
    reasoning_max_tokens: int = option(160, "token limit of a reasoning call", low=1)
    query_max_tokens: int = option(64, "token limit of a query re-forming call", low=1)
    seed: int = option(0, "sampling seed")


TOG2_DEFAULTS: dict[str, Any] = Tog2Config.defaults()
ENTITY_SCORE = "entity score: sum over the top-K units of cosine x exp(-alpha x rank) (Eq. 6)"
UNIT_SCORE = {"triple+question": "cosine to triple sentence + question",
              "triple+chunk": "cosine of triple sentence + unit to the question",
              "question": "cosine to the question"}


class _Run:
    """State of one ToG-2 question."""

    def __init__(self, question: Question, ctx: Context, config: dict[str, Any]) -> None:
        self.question, self.ctx = question, ctx
        self.config = cfg = Tog2Config.from_config(config)
        self.kg = ctx.kg
        self.text = question_text(question)
        self.record = new_record(question, "tog2")
        self.width, self.k = cfg.width, cfg.top_k
        self.trace: list[dict[str, Any]] = []
        self.clues = ""
        self.query = ""  # the re-formed query of the last round
        self.topic_labels: list[str] = []
        docs = self._docs()
        self.embedder = optional_embedder(ctx, docs)
        self.retriever = ContextRetriever(
            docs, self.embedder, unit=cfg.context_unit, chunk_query=cfg.chunk_query,
            scorer=cfg.context_scorer, max_chunks_per_entity=cfg.max_chunks_per_entity)
        # what the last reasoning call saw (a dead end's final answer reuses it)
        self.seen_triples: list[str] = []
        self.seen_units: list[Scored] = []
        self.seen_paths: list[GraphPath] = []
        self.pruner: Pruner | None = None  # prune_tool bm25 | embedding

    def _docs(self) -> DocumentStore | None:
        docs = optional_docs(self.ctx)
        if docs is None:  # an index without documents: KG and triple sentences only
            self.record.extra["note"] = "the index has no documents; entities scored by triple sentences"
        return docs

    def label(self, node: str) -> str:
        return entity_text(self.kg, node)

    def name(self, node: str) -> str:
        return display_text(self.kg, node)

    # -- calls -------------------------------------------------------------------------------
    def _ask(self, system: str, user: str, schema: dict[str, Any], stage: str, temperature: float,
             max_tokens: int, seed: int | None = None) -> Any | None:
        return ask(self.ctx.llm, self.record, system=system, user=user, schema=schema, stage=stage,
                   temperature=temperature, max_tokens=max_tokens,
                   seed=self.config.seed if seed is None else seed)

    def sc_gate(self) -> bool:
        """The released code's gate: `sc_samples` CoT answers; enough agreement answers."""
        answers = []
        for i in range(self.config.sc_samples):
            parsed = cot_once(self.question, self.ctx, self.record, temperature=self.config.sc_temperature,
                              max_tokens=self.config.reasoning_max_tokens,
                              seed=self.config.seed + i, stage="sc_gate")
            answers.append(answer_of(parsed))
        votes = majority(answers)
        share = votes[0][1] / len(answers) if votes else 0.0
        self.record.extra["sc_gate"] = {"votes": votes[:5], "share": round(share, 4)}
        if votes and share >= self.config.sc_agreement:
            self.record.extra["stopped"] = "sc_gate"
            self.finish(votes[0][0], "llm", 0)
            return True
        return False

    # -- 1. initialisation ---------------------------------------------------------------------
    def topic_entities(self) -> list[str]:
        limit = self.config.max_topic_entities
        found = linked_or_searched(self.question, self.ctx, self.record, limit, self.config.topic_search,
                                   self.name)
        if not found or not self.config.topic_prune:
            return found
        if self.config.prune_tool != "llm":  # LLM-free exploration: the linker's choice stands
            self.record.extra["topic_prune"] = {"tool": self.config.prune_tool, "kept": [self.name(e) for e in found]}
            return found
        by_text = unique_texts(found, [self.label(e) for e in found])
        parsed = self._ask(p2.TOPIC_PRUNE_SYSTEM, p2.topic_prune_user(self.text, list(by_text)),
                           p2.topic_prune_schema(list(by_text)), "topic_prune",
                           self.config.temperature_exploration, self.config.topic_prune_max_tokens)
        if parsed is None:  # a failed call keeps the linker's choice
            return found
        kept = [e for t in dict.fromkeys(parsed["entities"]) for e in by_text[t]]
        self.record.extra["topic_prune"] = {"offered": list(by_text), "kept": [self.name(e) for e in kept]}
        return kept

    # -- 2. graph search -----------------------------------------------------------------------
    def relations(self, path: GraphPath) -> list[Relation]:
        """Relations of the path's end, both directions, schema relations and the arrival
        relation backwards aside; past `max_relations`, the most similar to the question (in the
        KG's order: on the demo, names like "supplier of (reverse)" rank poorly by similarity)."""
        arrived = path.hops[-1] if path.hops else None
        found = [r for r in self.kg.relations_of(path.end, "both")
                 if not self.kg.relation_label(r.id).startswith(SCHEMA_RELATION_PREFIXES)
                 and not (arrived and r.id == arrived.relation and r.direction != arrived.direction)]
        cap = self.config.max_relations
        if len(found) <= cap or self.embedder is None:
            return found[:cap]
        texts = [relation_text(self.kg, r).replace("_", " ") for r in found]
        with timed(self.record, "relation_order"):
            ranked = shared_scorer(self.embedder).rank(self.text, texts, cap)
        return [found[i] for i in sorted(i for i, _ in ranked)]  # the most similar, in the KG's order

    def prune_relations(self, frontier: Sequence[GraphPath],
                        found: dict[str, list[Relation]]) -> list[tuple[GraphPath, Relation, float]]:
        """Relation prune: (path, relation, score 0..1) kept, best first per entity."""
        groups = [(path, unique_texts(found[path.end], [relation_text(self.kg, r) for r in found[path.end]]))
                  for path in frontier if found.get(path.end)]
        if all(len(g) <= self.width for _, g in groups):  # nothing to choose: no call
            return [(path, rel, 1.0) for path, g in groups for rels in g.values() for rel in rels]
        if self.config.prune_tool != "llm":
            return self._prune_relations_free(groups)
        batches = [groups] if self.config.relation_prune == "combined" else [[g] for g in groups]
        kept: list[tuple[GraphPath, Relation, float]] = []
        for batch in batches:
            entities = [(self.label(path.end), list(g)) for path, g in batch]
            parsed = self._ask(p2.RELATION_PRUNE_SYSTEM, p2.relation_prune_user(self.text, entities, self.width),
                               p2.relation_prune_schema([rels for _, rels in entities], self.width),
                               "relation_prune", self.config.temperature_exploration,
                               self.config.relation_prune_max_tokens)
            for i, (path, g) in enumerate(batch, 1):
                if parsed is None:  # a failed call: the first W in the shown (similarity) order
                    scored: list[tuple[str, int | float]] = [(t, 10) for t in list(g)[: self.width]]
                else:
                    scored = [(item["relation"], item["score"]) for item in parsed[f"entity_{i}"]]
                for text, score in kept_relations(scored, self.config.relation_threshold, self.width):
                    kept.extend((path, rel, score) for rel in g[text])
        return kept

    def _prune_relations_free(self, groups: Sequence[tuple[GraphPath, dict[str, list[Relation]]]]
                              ) -> list[tuple[GraphPath, Relation, float]]:
        """Relation prune without the LLM: the top W relations of each entity by BM25 or cosine to
        the question (`prune.Pruner`; weights summing to 1 per entity, as in ToG)."""
        if self.pruner is None:  # one per question: it embeds the question once
            self.pruner = Pruner(self.config.prune_tool, self.text, self.ctx, self.record)
        kept: list[tuple[GraphPath, Relation, float]] = []
        for path, g in groups:
            for text, weight in self.pruner.relations(self.label(path.end), list(g), self.width):
                kept.extend((path, rel, weight) for rel in g[text])
        return kept

    def candidates(self, kept: Sequence[tuple[GraphPath, Relation, float]],
                   visited: set[str]) -> list[tuple[GraphPath, str]]:
        """Entity discovery: (path to the candidate, its triple sentence), one per entity."""
        result: list[tuple[GraphPath, str]] = []
        seen = set(visited)
        cap = self.config.max_tails
        for path, rel, score in sorted(kept, key=lambda item: -item[2]):
            tails = self.kg.tails(path.end, rel.id, rel.direction, limit=cap + len(path.nodes))
            for tail in [t for t in tails if t not in path.nodes][:cap]:
                if tail in seen or (self.config.drop_literals and is_literal(tail)):
                    continue
                if self.config.drop_docless and not self.retriever.units_of(tail):
                    continue
                seen.add(tail)
                hop = Hop(path.end, rel.id, rel.direction, tail)
                s, r, o = hop.triple()
                sentence = triple_sentence(self.label(s), self.kg.relation_label(r), self.label(o))
                result.append((path.extend(hop, path.score * score), sentence))
        return result

    # -- 3. reasoning --------------------------------------------------------------------------
    def triples_text(self, paths: Sequence[GraphPath]) -> list[str]:
        lines = []
        for path in paths:
            for hop in path.hops:
                s, r, o = hop.triple()
                lines.append(triple_text([self.label(s), self.kg.relation_label(r), self.label(o)]))
        return list(dict.fromkeys(lines))

    def reason(self, round_: int, paths: Sequence[GraphPath], units: Sequence[Scored],
               step: dict[str, Any], last: bool) -> str | None:
        """One reasoning call. The answer when it is taken (sufficient and, by default, said by
        the evidence; or any answer in the last round), else None (clues kept)."""
        triples = self.triples_text(paths)
        passages = [s.unit.shown(self.config.max_unit_chars) for s in units]
        self.seen_triples, self.seen_units, self.seen_paths = triples, list(units), list(paths)
        best_guess = last and not self.config.abstain
        parsed = self._ask(p2.REASONING_SYSTEM,
                           p2.reasoning_user(self.text, self.clues, triples, passages, best_guess),
                           p2.REASONING_LAST_SCHEMA if best_guess else p2.REASONING_SCHEMA, "reasoning",
                           self.config.temperature_reasoning,
                           self.config.reasoning_max_tokens)
        answer = answer_of(parsed)
        sufficient = isinstance(parsed, dict) and parsed.get("sufficient") is True and bool(answer)
        step["sufficient"] = sufficient
        if isinstance(parsed, dict) and self.config.clues:
            clue = " ".join(str(parsed.get("clues", "")).split())
            if clue:
                self.clues = clue
                step["clues"] = clue
        if sufficient and self.config.require_grounded_answer and not self.grounded(answer, paths, passages):
            step["ungrounded_answer"] = answer
            sufficient = False
        if sufficient or (best_guess and answer):
            self.record.extra["sufficient"] = sufficient
            return answer
        return None

    def reform_query(self, step: dict[str, Any]) -> None:
        parsed = self._ask(p2.QUERY_REFORM_SYSTEM, p2.query_reform_user(self.text, self.clues),
                           p2.QUERY_SCHEMA, "query_reform", self.config.temperature_reasoning,
                           self.config.query_max_tokens)
        query = " ".join(str(parsed.get("query", "")).split()) if isinstance(parsed, dict) else ""
        if query:
            self.query = query
            step["query"] = query

    def retrieval_query(self) -> str:
        return f"{self.text} {self.query}" if self.query else self.text

    # -- answers and the record ---------------------------------------------------------------
    def reached_labels(self, paths: Sequence[GraphPath]) -> list[str]:
        topics = {normalise(t) for t in self.topic_labels}
        labels = [self.label(n) for p in paths for n in p.entities[1:]]
        return [t for t in dict.fromkeys(labels) if normalise(t) not in topics]

    def grounded(self, answer: str, paths: Sequence[GraphPath], passages: Sequence[str]) -> bool:
        return self.source_of(answer, paths, passages) != "llm"

    def source_of(self, answer: str, paths: Sequence[GraphPath], passages: Sequence[str]) -> str:
        """kg / doc / both: where the shown evidence says the answer; llm when nowhere (an answer
        that only repeats a topic entity is said by no evidence)."""
        if not answer or normalise(answer) in {normalise(t) for t in self.topic_labels}:
            return "llm"
        in_kg = names_any(answer, self.reached_labels(paths))
        in_doc = bool(passages) and found_in(answer, passages)
        return "both" if in_kg and in_doc else "kg" if in_kg else "doc" if in_doc else "llm"

    def finish(self, answer: str, source: str, round_: int) -> None:
        self.record.extra["answer_text"] = answer
        self.record.extra["answer_round"] = round_
        self.record.prediction = answer
        reached = self.reached_labels(self.seen_paths)
        self.record.predictions = list(dict.fromkeys([answer, *reached])) if answer else reached
        self.record.answer_source = cast(AnswerSource, source) if answer else "none"
        self.record.extra["trace"] = self.trace
        if self.clues:
            self.record.extra["clues"] = self.clues
        self.record.extra["chunks_embedded"] = self.retriever.embedded
        self.record.paths = self.evidence()

    def answered(self, answer: str, round_: int, stopped: str) -> None:
        passages = [s.unit.shown(self.config.max_unit_chars) for s in self.seen_units]
        source = self.source_of(answer, self.seen_paths, passages)
        if source == "llm":
            self.record.extra["grounding"] = "not in evidence"
        self.record.extra["stopped"] = stopped
        self.finish(answer, source, round_)

    def give_up(self, why: str) -> None:
        self.record.extra.setdefault("stopped", "max_depth")
        self.finish("", "none", -1)
        abstain(self.record, why)

    def evidence(self) -> list[EvidencePath]:
        result = []
        for path in self.seen_paths:
            if path.hops:
                ev = EvidencePath.from_path(path, self.name, self.kg.relation_label)
                ev.score_kind = ENTITY_SCORE
                result.append(ev)
        kind = UNIT_SCORE[self.config.chunk_query] if self.config.context_scorer == "dense" else "BM25"
        for s in self.seen_units:
            u = s.unit
            source = cast(Source, u.collection if u.collection in _DOC_SOURCES else "domain")
            result.append(EvidencePath(source=source, sentences=[u.text], chunk_ids=[u.chunk_id or ""],
                                       titles=[u.title], score=round(s.score, 6), score_kind=kind))
        return result


def _context(ranked: Sequence[Scored], k: int) -> list[Scored]:
    """The top-K units from documents (a triple sentence stand-in is no passage)."""
    return [s for s in ranked if s.unit.from_document][:k]


def run_tog2(question: Question, ctx: Context, config: dict[str, Any]) -> AnswerRecord:
    """ToG-2 (Algorithm 1): initialisation, then D rounds of graph search, context retrieval,
    context-based entity prune and reasoning."""
    run = _Run(question, ctx, config)
    if run.config.sc_gate and run.sc_gate():
        return run.record
    topics = run.topic_entities()
    run.topic_labels = [run.label(t) for t in topics]
    init: dict[str, Any] = {"round": 0, "topics": [run.name(t) for t in topics]}
    run.trace.append(init)
    if not topics:
        run.record.extra["stopped"] = "no_topic_entity"
        _answer_without_graph(run)
        return run.record
    with timed(run.record, "context_retrieval"):
        ranked = run.retriever.rank(run.text, [Candidate(t) for t in topics])
    units = _context(ranked, run.k)
    init["context"] = [s.unit.chunk_id for s in units]
    provisional: tuple[str, list[GraphPath], list[Scored]] | None = None
    if units:  # without a document there is nothing to judge yet
        answer = run.reason(0, [], units, init, last=False)
        if answer is not None and not run.config.confirm_initial:
            run.answered(answer, 0, "sufficient")
            return run.record
        if answer is not None:  # provisional: one round of graph search may overturn it
            provisional = (answer, [], list(run.seen_units))
            init["provisional_answer"] = answer
    frontier = [GraphPath(t) for t in topics]
    visited = set(topics)
    depth = 1 if provisional else run.config.depth
    guessed = False
    for round_ in range(1, depth + 1):
        step: dict[str, Any] = {"round": round_, "topics": [run.name(p.end) for p in frontier]}
        run.trace.append(step)
        with timed(run.record, "relation_search"):
            found = {p.end: run.relations(p) for p in frontier if not is_literal(p.end)}
        kept = run.prune_relations(frontier, found) if any(found.values()) else []
        step["relations"] = [[run.name(p.end), relation_text(run.kg, r), round(s, 3)] for p, r, s in kept]
        with timed(run.record, "entity_search"):
            cands = run.candidates(kept, visited)
        step["candidates"] = len(cands)
        if not cands:
            run.record.extra["stopped"] = "dead_end"
            break
        with timed(run.record, "context_retrieval"):
            ranked = run.retriever.rank(run.retrieval_query(), [Candidate(p.end, s) for p, s in cands])
        scores = entity_scores([(s.unit.owner, s.score) for s in ranked], run.k, run.config.alpha)
        order = sorted(range(len(cands)), key=lambda i: (-scores.get(cands[i][0].end, 0.0), i))
        selected = [GraphPath(cands[i][0].topic, cands[i][0].hops, scores.get(cands[i][0].end, 0.0))
                    for i in order[: run.width]]
        step["entities"] = [[run.name(p.end), round(p.score, 4)] for p in selected]
        units = _context(ranked, run.k)
        step["context"] = [s.unit.chunk_id for s in units]
        last = round_ == depth and provisional is None  # a provisional answer stands in for a best guess
        answer = run.reason(round_, selected, units, step, last)
        guessed = last
        if answer is not None:
            run.answered(answer, round_, "sufficient" if run.record.extra.get("sufficient") else "max_depth")
            return run.record
        if round_ == depth:
            break
        if run.config.reform_query and run.config.clues:
            run.reform_query(step)
        visited.update(p.end for p in selected)
        frontier = [p for p in selected if not is_literal(p.end)]
        if not frontier:
            run.record.extra["stopped"] = "dead_end"
            break
    if provisional is not None:  # round 1 found nothing better: the initialisation's answer
        run.seen_paths, run.seen_units = provisional[1], provisional[2]
        run.record.extra.pop("stopped", None)
        run.answered(provisional[0], 0, "sufficient (confirmed: round 1 found no other answer)")
        return run.record
    run.record.extra.setdefault("stopped", "max_depth")
    if not guessed and not run.config.abstain:
        # a dead end before the last round: one best-answer call over what was seen last
        answer = run.reason(len(run.trace) - 1, run.seen_paths, run.seen_units, run.trace[-1], last=True)
        if answer is not None:
            run.answered(answer, len(run.trace) - 1, run.record.extra["stopped"])
            return run.record
    run.give_up("the knowledge found was never enough to answer")
    return run.record


def _answer_without_graph(run: _Run) -> None:
    """No topic entity: the model answers from its own knowledge (or "not found" with `abstain`)."""
    if run.config.abstain:
        run.give_up("no topic entity to start from")
        return
    parsed = run._ask(prompts.IO_SYSTEM, prompts.question_user(run.text), prompts.ANSWER_SCHEMA,
                      "answer_llm", run.config.temperature_reasoning, run.config.reasoning_max_tokens)
    run.finish(answer_of(parsed), "llm", 0)


TOG2 = MethodSpec.typed(
    "tog2", run_tog2, Tog2Config,
    "Think-on-Graph 2.0: graph search and entity-document retrieval in rounds, context-based entity prune",
    hash_when_set=("topic_search", "prune_tool"))

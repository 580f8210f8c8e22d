"""The state of one ToG-2 question: its config, documents and context retriever, the LLM calls,
and the record it writes (where the evidence says the answer, the finished record, the
evidence paths)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from engine.access.graph import EvidencePath, GraphPath, Source
from engine.methods.shared.common import (
    abstain,
    ask,
    found_in,
    names_any,
    new_record,
    optional_docs,
    optional_embedder,
    question_text,
)
from engine.methods.shared.labels import display_text, entity_text
from engine.methods.shared.prune import Pruner
from engine.methods.tog2.config import Tog2Config
from engine.methods.tog2.context import ContextRetriever, Scored
from engine.questions.record import AnswerSource, Question
from index.entities import normalise

if TYPE_CHECKING:
    from engine.access.protocols import DocumentStore
    from engine.methods.context import Context


_DOC_SOURCES = ("wiki", "web", "domain")
ENTITY_SCORE = "entity score: sum over the top-K units of cosine x exp(-alpha x rank) (Eq. 6)"
UNIT_SCORE = {"triple+question": "cosine to triple sentence + question",
              "triple+chunk": "cosine of triple sentence + unit to the question",
              "question": "cosine to the question"}


class Tog2State:
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

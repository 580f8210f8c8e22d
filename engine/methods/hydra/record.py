"""Record-keeping of a HydraRAG question: which sources support the answer, the names each stage
holds (stage-recall statistics), the evidence paths and the finished answer record."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from engine.access.graph import EvidencePath, Source
from engine.methods.hydra.config import SOURCES
from engine.methods.hydra.docs import DocPath
from engine.methods.hydra.score import Candidate, Scored
from engine.methods.hydra.state import Attempt, HydraState
from engine.methods.shared.answer_spans import date_at_grain, stated_form
from engine.methods.shared.common import found_in, gold_held, names_any, rank_answers
from engine.questions.record import AnswerSource
from index.entities import normalise

if TYPE_CHECKING:
    from engine.access.graph import GroupedPath

SUPPORT_NAMES = {"kg": "KG", "wiki": "Wiki", "web": "Web"}
SCORE_KIND = "HydraRAG cross-score (Algorithm 4)"


class HydraRecorder(HydraState):
    """A HydraRAG question's state with the helpers that write its record."""

    def support(self, answer: str, selected: Sequence[Candidate]) -> list[str]:
        """The sources whose selected paths name the answer (a topic entity names nothing)."""
        if not answer or normalise(answer) in {normalise(t) for t in self.topic_labels}:
            return []
        topics = {normalise(t) for t in self.topic_labels}
        found = set()
        for c in selected:
            names = [n for n in c.entities if normalise(n) not in topics]
            if names_any(answer, names) or (c.source != "kg" and found_in(answer, [c.text])):
                found.add(c.source)
        return [s for s in SOURCES if s in found]

    def reached(self, selected: Sequence[Candidate]) -> list[str]:
        """Names the selected paths reach, answer candidates first: the last entity set of each
        KG path (best path first), then the sets before it, then the documents' entities."""
        groups = [cast("GroupedPath", c.payload) for c in selected if c.source == "kg"]
        ends = [self.label(e) for g in groups for e in g.sets[-1]]
        middles = [self.label(e) for g in groups for s in reversed(g.sets[1:-1]) for e in s]
        docs = [n for c in selected if c.source != "kg" for n in reversed(c.entities)]
        return [n for n in ends + middles + docs if not n.startswith("unnamed entity")]

    def gold_in(self, names: Any, texts: Sequence[str] = ()) -> list[str]:
        """The gold answers a stage holds: a name equal to one, or (documents) a text saying it.
        For the stage-recall statistics only; nothing in the method reads it."""
        return gold_held(self.question.answers, names, texts)

    def stage_names(self, names: Sequence[str], texts: Sequence[str]) -> dict[str, Any]:
        distinct = list(dict.fromkeys(names))
        cap = self.config.trace_max_entities
        return {"entities": distinct[:cap], "entity_count": len(distinct), "gold": self.gold_in(distinct, texts)}

    def scored_stage(self, scored: Sequence[Scored]) -> dict[str, Any]:
        cands = [s.candidate for s in scored]
        return {"n": len(scored), "top": [s.as_dict() for s in scored[:3]],
                **self.stage_names([n for c in cands for n in c.entities], [c.text for c in cands if c.source != "kg"])}

    def evidence(self, selected: Sequence[Candidate], scores: dict[int, float],
                 read: Sequence[Candidate] = ()) -> list[EvidencePath]:
        """The record's evidence: the selected paths, then the windows `read` beside them (the
        source's own words, never written by the model)."""
        result = []
        own = {id(c) for c in read}
        for c in [*selected, *read]:
            score = scores.get(id(c))
            if c.source == "kg":
                group = cast("GroupedPath", c.payload)
                for path in group.paths[: self.config.max_shown]:
                    ev = EvidencePath.from_path(path, self.name, self.kg.relation_label)
                    ev.score, ev.score_kind = score, SCORE_KIND
                    result.append(ev)
            else:
                s = cast(DocPath, c.payload).sentence
                source = cast(Source, s.collection if s.collection in ("wiki", "web", "domain") else "domain")
                written = "model" if self.config.doc_evidence == "paths" and id(c) not in own else None
                result.append(EvidencePath(source=source, sentences=[s.text, c.text], chunk_ids=[s.chunk_id],
                                           titles=[s.title], score=score, score_kind=SCORE_KIND,
                                           written_by=written))
        return result

    def finish(self, attempt: Attempt) -> None:
        phase, answer, selected = attempt.phase, attempt.answer, [*attempt.selected, *attempt.read]
        self.record.extra["phase"] = phase
        self.record.extra["answer_text"] = answer
        if self.config.answer_forms and answer:  # ours: the answer as the evidence states it
            passages = [c.text for c in selected if c.source != "kg"]
            stated = stated_form(self.text, date_at_grain(self.text, answer, passages), passages)
            if stated != answer:
                self.record.extra["answer_form"] = f"{answer} -> {stated}"
                answer = stated
        candidates = [n for n in dict.fromkeys(self.reached(selected)) if n not in self.topic_labels]
        self.record.prediction, self.record.predictions = rank_answers(answer, candidates, self.topic_labels)
        support = self.support(answer, selected)
        self.record.extra["support_sources"] = support  # eval's Fig. 8 categories
        self.record.extra["support"] = "+".join(SUPPORT_NAMES[s] for s in support) or "LLM"
        kg, doc = "kg" in support, any(s != "kg" for s in support)
        source = "both" if kg and doc else "kg" if kg else "doc" if doc else "llm"
        if not answer and self.record.prediction:
            # no answer text (a failed call): the prediction is the best entity the paths reach
            source = "kg" if any(c.source == "kg" for c in selected) else "doc"
        self.record.answer_source = cast(AnswerSource, source if self.record.prediction else "none")
        scores = {id(s.candidate): round(s.cross, 6) for s in attempt.pruned.after_cross}
        self.record.paths = self.evidence(attempt.selected, scores, attempt.read)
        self.record.extra["final_paths"] = [{"text": c.text, "source": c.source} for c in attempt.selected]
        if attempt.read:  # `answer_windows`: read beside the model's selection, not selected by it
            self.record.extra["read_windows"] = [{"text": c.text, "source": c.source} for c in attempt.read]
        self.record.extra["trace"] = self.trace

"""Think-on-Graph (ToG paper §2.1, Algorithm 1) and ToG-R (§2.2, Algorithm 2).

ToG keeps a beam of at most W reasoning paths (triple chains from a topic entity). Per depth:
relation search (both directions) and prune to the top W, entity search and prune to the top
W, then a reasoning check: are the paths enough to answer? If yes, the answer comes from the
paths (answer_source "kg"); after D_max depths without a yes, the model answers from its own
knowledge (answer_source "llm").

ToG-R keeps relation chains instead: per depth relation search and prune per chain, entity
search, the reasoning check over the chains and all the entities they reach, and, when not
yet enough, a random (deterministic, hash-ordered) sample of W entities to go on from.

Scores: a path's score is the product of the prune scores along it (each prune's kept scores
sum to 1), so the global top W across candidate sets is well defined.

With `abstain` (off by default, as in the paper), a question whose paths never became
sufficient is answered "not found" (an abstention) instead of from the model's own knowledge.

Prompts name an unlabeled entity "unnamed entity" (no id reaches the model); the record and the
trace name it by its local id, as `kg tails` does (`labels.display_text`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.access.graph import (
    EvidencePath,
    GraphPath,
    Hop,
    best_per_path,
    group_by,
    top_k,
)
from engine.access.kg_protocol import Relation, is_literal, stable_sample
from engine.methods.method_config import MethodConfig, option
from engine.methods.shared import prompts
from engine.methods.shared.common import (
    abstain,
    answer_of,
    ask,
    names_any,
    new_record,
    question_text,
    rank_answers,
    timed,
)
from engine.methods.shared.labels import (
    SCHEMA_RELATION_PREFIXES,
    display_text,
    entity_text,
    relation_text,
    triple_text,
    unique_texts,
)
from engine.methods.shared.prune import PRUNE_TOOLS, Pruner
from engine.methods.shared.topics import select_topic_entities
from engine.methods.spec import MethodSpec
from engine.questions.record import AnswerRecord, Question

if TYPE_CHECKING:
    from engine.methods.context import Context


_TOG_CODE = "ToG's code"


@dataclass(frozen=True)
class TogConfig(MethodConfig):
    """`tog` and `tog-r`: beam width and depth, the pruner, the caps and the calls' settings."""

    width: int = option(3, "beam width W: relations and entities kept per depth", "ToG §4.1", low=1)
    depth: int = option(3, "maximum depth D_max", "ToG §4.1", low=1)
    prune_tool: str = option("llm", "relation and entity pruner", "ToG Table 5", choices=PRUNE_TOOLS)
    prune_order: str = option("kg", "llm pruner: candidates in the KG's order, or most similar to the "
                                    "question first", choices=("kg", "similarity"))
    num_retain_entity: int = option(5, "tails kept per (entity, relation) when there are many", _TOG_CODE, low=1)
    sample_tails_above: int = option(20, "sample the tails of a relation from this many on", _TOG_CODE, low=1)
    max_relations: int = option(40, "relation candidates shown in one prompt", low=1)
    max_entities: int = option(30, "entity candidates shown in one prompt (and the hub cap)", low=1)
    max_topic_entities: int = option(3, "topic entities to start from", low=1)
    require_grounded_answer: bool = option(True, '"sufficient" only with an answer the paths reached')
    follow_back: bool = option(False, "offer the arrival relation backwards when it reaches new entities",
                               _TOG_CODE)
    abstain: bool = option(False, 'no sufficient path: answer "not found" instead of from memory')
    temperature_exploration: float = option(0.4, "temperature of the prune calls", "ToG §4.1", low=0)
    temperature_reasoning: float = option(0.0, "temperature of the reasoning and answer calls", "ToG §4.1", low=0)
    prune_max_tokens: int = option(96, "token limit of a prune call", low=1)
    reasoning_max_tokens: int = option(64, "token limit of a reasoning or answer call", low=1)
    seed: int = option(0, "sampling seed")


TOG_DEFAULTS: dict[str, Any] = TogConfig.defaults()
# What a path's score is, by prune tool (shown with the evidence).
PATH_SCORE = {
    "llm": "path score: product of the prune weights along it (the model's choices, weighted by "
           "rank; each prune's weights sum to 1)",
    "bm25": "path score: product of the prune weights along it (BM25 to the question, each prune "
            "normalised to sum 1)",
    "embedding": "path score: product of the prune weights along it (cosine to the question, each "
                 "prune normalised to sum 1)",
}


class _Run:
    """State of one ToG / ToG-R question."""

    def __init__(self, question: Question, ctx: Context, config: dict[str, Any], method: str) -> None:
        self.ctx, self.method = ctx, method
        self.config = cfg = TogConfig.from_config(config)
        self.kg = ctx.kg
        self.text = question_text(question)
        self.record = new_record(question, method)
        self.width = cfg.width
        self.pruner = Pruner(cfg.prune_tool, self.text, ctx, self.record,
                             temperature=cfg.temperature_exploration,
                             max_tokens=cfg.prune_max_tokens,
                             max_candidates={"relations": cfg.max_relations,
                                             "entities": cfg.max_entities},
                             order_by_similarity=cfg.prune_order == "similarity")
        self.question = question
        self.trace: list[dict[str, Any]] = []

    # -- labels ------------------------------------------------------------------------------
    def label(self, node: str) -> str:
        """The entity as the model reads it (prompts)."""
        return entity_text(self.kg, node)

    def name(self, node: str) -> str:
        """The entity as a person reads it (record, trace)."""
        return display_text(self.kg, node)

    def kg_triple_labels(self, hop: Hop) -> list[str]:
        s, r, o = hop.triple()
        return [self.label(s), self.kg.relation_label(r), self.label(o)]

    # -- 1. topic entities ---------------------------------------------------------------
    def topic_entities(self) -> list[GraphPath]:
        found = select_topic_entities(self.question, self.ctx, self.record,
                                      self.config.max_topic_entities, self.name)
        return [GraphPath(entity) for entity in found]

    # -- 2. relation search + prune --------------------------------------------------------
    def candidate_relations(self, path: GraphPath) -> list[Relation]:
        """Relations to follow from the end of `path`, both directions, schema relations aside.

        The relation the path arrived by, taken backwards, is dropped, as in ToG's code. With
        `follow_back`, it is offered when it leads to an entity not yet on the path: from a
        film's actor, "starred actors (reverse)" reaches the actor's other films (a MetaQA 3-hop
        chain). Measured on the README's eval it was a wash at more tokens, so it is off.
        """
        entity = path.end
        if is_literal(entity):
            return []
        arrived = path.hops[-1] if path.hops else None
        result = []
        for rel in self.kg.relations_of(entity, "both"):
            if self.kg.relation_label(rel.id).startswith(SCHEMA_RELATION_PREFIXES):
                continue
            if (arrived is not None and rel.id == arrived.relation and rel.direction != arrived.direction
                    and not (self.config.follow_back and self._leads_elsewhere(path, rel))):
                continue
            result.append(rel)
        return result

    def _leads_elsewhere(self, path: GraphPath, rel: Relation) -> bool:
        seen = path.nodes
        return any(t not in seen for t in self.kg.tails(path.end, rel.id, rel.direction, limit=len(seen) + 1))

    def prune_relations(self, who: str, relations: Sequence[Relation]) -> list[tuple[Relation, float]]:
        texts = [relation_text(self.kg, r) for r in relations]
        by_text = unique_texts(list(relations), texts)
        chosen = self.pruner.relations(who, list(by_text), self.width)
        return [(rel, score / len(by_text[t])) for t, score in chosen for rel in by_text[t]]

    # -- 3. entity search --------------------------------------------------------------------
    def search_tails(self, path: GraphPath, rel: Relation) -> list[str]:
        """Tails of (end, relation) not yet on the path. As in ToG's code, a relation with
        many tails (`sample_tails_above`) keeps a stable sample of `num_retain_entity`; a hub
        relation is first capped at `max_entities` (a deterministic sample, see `kg.tails`)."""
        cap = self.config.max_entities
        seen = path.nodes
        tails = self.kg.tails(path.end, rel.id, rel.direction, limit=cap + len(seen))
        tails = [t for t in tails if t not in seen][:cap]
        if len(tails) >= self.config.sample_tails_above:
            tails = stable_sample(tails, self.config.num_retain_entity)
        return tails

    def fact_text(self, path: GraphPath, rel: Relation) -> str:
        head, label = self.label(path.end), self.kg.relation_label(rel.id)
        return triple_text([head, label, "?"] if rel.direction == "out" else ["?", label, head])

    # -- 4. reasoning ----------------------------------------------------------------------
    def reason(self, system: str, user: str, reached: Sequence[str], step: dict[str, Any]) -> str | None:
        """The answer when the model finds the evidence sufficient, else None.

        With `require_grounded_answer` (default), a "sufficient" whose answer names none of the
        entities the paths reached (`reached`, topic entities excluded) counts as not sufficient:
        a small model often declares one hop enough and answers with the question's own entity
        or from memory; going deeper is what the paths are for. The last depth still falls back
        to the model's own answer, as in the paper.
        """
        parsed = ask(self.ctx.llm, self.record, system=system, user=user,
                     schema=prompts.REASONING_SCHEMA, stage="reasoning",
                     temperature=self.config.temperature_reasoning,
                     max_tokens=self.config.reasoning_max_tokens, seed=self.config.seed)
        if not (isinstance(parsed, dict) and parsed.get("sufficient") is True):
            return None
        answer = answer_of(parsed)
        if answer and self.config.require_grounded_answer and not names_any(answer, reached):
            step["ungrounded_answer"] = answer
            return None
        return answer or None

    def answer_from_llm(self, candidates: Sequence[str]) -> None:
        """Generate(π, x): answer from the model's own knowledge (after D_max, or no start);
        with `abstain`, "not found" instead."""
        if self.config.abstain:
            self.give_up(candidates)
            return
        parsed = ask(self.ctx.llm, self.record, system=prompts.IO_SYSTEM,
                     user=prompts.question_user(self.text), schema=prompts.ANSWER_SCHEMA,
                     stage="answer_llm", temperature=self.config.temperature_reasoning,
                     max_tokens=self.config.reasoning_max_tokens, seed=self.config.seed)
        answer = answer_of(parsed)
        if parsed is None:
            self.record.error = "the final answer call failed: " + self.record.extra["call_errors"][-1]["error"]
        self.finish(answer, candidates, "llm" if answer else "none")

    def give_up(self, candidates: Sequence[str]) -> None:
        """An abstention: the paths never held the answer (the reasoning check said so)."""
        stopped = self.record.extra.get("stopped", "max_depth")
        why = {"no_topic_entity": "no topic entity found in the KG",
               "dead_end": "the paths ended with nothing left to follow"}.get(
            stopped, "the reasoning check found the paths insufficient at every depth")
        abstain(self.record, why)
        self.record.extra["answer_text"] = ""
        self.record.extra["reached"] = list(candidates)[:10]
        self.record.extra["trace"] = self.trace

    def finish(self, answer: str, candidates: Sequence[str], source: str) -> None:
        self.record.extra["answer_text"] = answer
        topics = [self.label(t["id"]) for t in self.record.topic_entities]  # as the model named them
        self.record.prediction, self.record.predictions = rank_answers(answer, candidates, topics)
        if not answer and self.record.prediction:
            source = "kg"  # no answer text: the prediction is the best entity the paths reach
        self.record.answer_source = source  # type: ignore[assignment]
        self.record.extra["trace"] = self.trace

    # -- record ----------------------------------------------------------------------------
    def evidence(self, paths: Sequence[GraphPath]) -> list[EvidencePath]:
        result, seen = [], set()
        for p in sorted(paths, key=lambda p: -p.score):
            if not p.hops or p.hops in seen:
                continue
            seen.add(p.hops)
            evidence = EvidencePath.from_path(p, self.name, self.kg.relation_label)
            evidence.score_kind = PATH_SCORE.get(self.config.prune_tool)
            result.append(evidence)
        return result

    def answer_candidates(self, paths: Sequence[GraphPath]) -> list[str]:
        """Labels of the entities the paths reach, best path first, ends before middles."""
        ranked = sorted(paths, key=lambda p: -p.score)
        topics = {p.topic for p in paths}
        ends = [p.end for p in ranked if p.hops]
        middles = [s.tail for p in ranked for s in p.hops[:-1]]
        nodes = [n for n in dict.fromkeys(ends + middles) if n not in topics]
        return [t for t in (self.label(n) for n in nodes) if not t.startswith("unnamed entity")]

    def triples_text(self, paths: Sequence[GraphPath]) -> list[str]:
        lines = [triple_text(self.kg_triple_labels(s)) for p in sorted(paths, key=lambda p: -p.score)
                 for s in p.hops]
        return list(dict.fromkeys(lines))


# ------------------------------------------------------------------------------------------
# ToG
# ------------------------------------------------------------------------------------------


def _topic_beam(run: _Run) -> list[GraphPath]:
    """The starting beam (the topic entities); with none, the record says so and the model
    answers from its own knowledge (both ToG variants)."""
    beam = run.topic_entities()
    if not beam:
        run.record.extra["stopped"] = "no_topic_entity"
        run.answer_from_llm([])
    return beam


def run_tog(question: Question, ctx: Context, config: dict[str, Any]) -> AnswerRecord:
    """ToG (Algorithm 1): beam search over triples with LLM (or BM25/embedding) pruning."""
    run = _Run(question, ctx, config, "tog")
    beam = _topic_beam(run)
    if not beam:
        return run.record
    explored: list[GraphPath] = []
    for depth in range(1, run.config.depth + 1):
        step_trace: dict[str, Any] = {"depth": depth}
        run.trace.append(step_trace)
        kept_rels = _explore_relations(run, beam)
        step_trace["relations"] = [[run.name(p.end), relation_text(run.kg, r)] for (p, r), _ in kept_rels]
        beam = _explore_entities(run, kept_rels)
        step_trace["entities"] = [run.name(p.end) for p in beam]
        if not beam:
            run.record.extra["stopped"] = "dead_end"
            break
        explored = beam
        answer = run.reason(prompts.REASONING_SYSTEM,
                            prompts.reasoning_user(run.text, run.triples_text(beam)),
                            run.answer_candidates(beam), step_trace)
        step_trace["sufficient"] = answer is not None
        if answer is not None:
            run.record.paths = run.evidence(beam)
            run.record.extra["stopped"] = "sufficient"
            run.record.extra["depth"] = depth
            run.finish(answer, run.answer_candidates(beam), "kg")
            return run.record
    run.record.extra.setdefault("stopped", "max_depth")
    run.record.extra["depth"] = len(run.trace)
    run.record.paths = run.evidence(explored)
    run.answer_from_llm(run.answer_candidates(explored))
    return run.record


def _explore_relations(run: _Run, beam: list[GraphPath]) -> list[tuple[tuple[GraphPath, Relation], float]]:
    """ToG's relation exploration: relation search and prune, one choice per distinct end
    entity; the global top W (path, relation) pairs by path score times relation score."""
    rel_cands: list[tuple[tuple[GraphPath, Relation], float]] = []
    for end, group in group_by(beam, lambda p: p.end).items():
        with timed(run.record, "relation_search"):
            relations = run.candidate_relations(group[0])
        if not relations:
            continue
        for rel, score in run.prune_relations(run.label(end), relations):
            rel_cands.extend(((p, rel), p.score * score) for p in group)
    return top_k(rel_cands, run.width)


def _explore_entities(run: _Run, kept_rels: list[tuple[tuple[GraphPath, Relation], float]]) -> list[GraphPath]:
    """ToG's entity exploration: entity search along the kept relations and prune (none while
    the tails are no more than W); the next beam is the global top W paths."""
    ent_cands: list[tuple[GraphPath, float]] = []
    sets: list[tuple[GraphPath, Relation, float, list[str]]] = []
    with timed(run.record, "entity_search"):
        for (path, rel), score in kept_rels:
            tails = run.search_tails(path, rel)
            if tails:
                sets.append((path, rel, score, tails))
    total = sum(len(t) for *_, t in sets)
    for path, rel, score, tails in sets:
        by_text = unique_texts(tails, [run.label(t) for t in tails])
        if total <= run.width:
            chosen = [(t, 1.0 / len(by_text)) for t in by_text]
        else:
            chosen = run.pruner.entities(run.fact_text(path, rel), list(by_text), run.width)
        for text, e_score in chosen:
            for tail in by_text[text]:
                step = Hop(path.end, rel.id, rel.direction, tail)
                new = path.extend(step, score * e_score / len(by_text[text]))
                ent_cands.append((new, new.score))
    return [p for p, _ in top_k(best_per_path(ent_cands), run.width)]


# ------------------------------------------------------------------------------------------
# ToG-R
# ------------------------------------------------------------------------------------------


def run_tog_r(question: Question, ctx: Context, config: dict[str, Any]) -> AnswerRecord:
    """ToG-R (Algorithm 2): relation chains, reasoning over all reached entities, random prune."""
    run = _Run(question, ctx, config, "tog-r")
    beam = _topic_beam(run)
    if not beam:
        return run.record
    explored: list[GraphPath] = []
    for depth in range(1, run.config.depth + 1):
        step_trace: dict[str, Any] = {"depth": depth}
        run.trace.append(step_trace)
        # relation search + prune, one choice per chain (its entities share the relations)
        rel_cands: list[tuple[tuple[tuple[GraphPath, ...], Relation], float]] = []
        for group in group_by(beam, lambda p: p.chain).values():
            with timed(run.record, "relation_search"):
                relations = sorted({r for p in group for r in run.candidate_relations(p)})
            if not relations:
                continue
            ends = ", ".join(dict.fromkeys(run.label(p.end) for p in group))
            chain_score = max(p.score for p in group)
            for rel, score in run.prune_relations(ends, relations):
                rel_cands.append(((tuple(group), rel), chain_score * score))
        kept_rels = top_k(rel_cands, run.width)
        step_trace["relations"] = [[_chain_text(run, g[0], run.name), relation_text(run.kg, r)]
                                   for (g, r), _ in kept_rels]
        # entity search: every entity of the chain over the chosen relation
        candidates: list[tuple[GraphPath, float]] = []
        with timed(run.record, "entity_search"):
            for (group, rel), score in kept_rels:
                found = [path.extend(Hop(path.end, rel.id, rel.direction, t), score)
                         for path in group for t in run.search_tails(path, rel)]
                keys = {p.key(): p for p in found}
                for key in stable_sample(keys, run.config.max_entities):
                    candidates.append((keys[key], score))
        candidates = best_per_path(candidates)
        reached = [p for p, _ in candidates]
        step_trace["entities"] = list(dict.fromkeys(run.name(p.end) for p in reached))
        if not reached:
            run.record.extra["stopped"] = "dead_end"
            break
        explored = reached
        answer = run.reason(prompts.CHAIN_REASONING_SYSTEM,
                            prompts.chain_reasoning_user(run.text, _chains_text(run, reached)),
                            run.answer_candidates(reached), step_trace)
        step_trace["sufficient"] = answer is not None
        if answer is not None:
            run.record.paths = run.evidence(reached)
            run.record.extra["stopped"] = "sufficient"
            run.record.extra["depth"] = depth
            run.finish(answer, run.answer_candidates(reached), "kg")
            return run.record
        # random prune: a deterministic hash-ordered sample of W reached entities
        keys = {p.key(): p for p in reached}
        beam = [keys[k] for k in stable_sample(keys, run.width)]
    run.record.extra.setdefault("stopped", "max_depth")
    run.record.extra["depth"] = len(run.trace)
    run.record.paths = run.evidence(explored)
    run.answer_from_llm(run.answer_candidates(explored))
    return run.record


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------

MAX_SHOWN_PER_CHAIN = 10


def _chain_text(run: _Run, path: GraphPath, name: Callable[[str], str] | None = None) -> str:
    """topic -> relations; entities named for the model unless `name` says otherwise."""
    parts = [(name or run.label)(path.topic)]
    parts += [relation_text(run.kg, Relation(s.relation, s.direction)) for s in path.hops]
    return " -> ".join(parts)


def _chains_text(run: _Run, reached: Sequence[GraphPath]) -> list[str]:
    """One line per relation chain: topic -> relations -> the entities reached (capped)."""
    lines = []
    for group in group_by(sorted(reached, key=lambda p: -p.score), lambda p: p.chain).values():
        names = list(dict.fromkeys(run.label(p.end) for p in group))
        shown = names[:MAX_SHOWN_PER_CHAIN]
        more = f"; and {len(names) - len(shown)} more" if len(names) > len(shown) else ""
        lines.append(f"{_chain_text(run, group[0])} -> {'; '.join(shown)}{more}")
    return lines


TOG = MethodSpec.typed("tog", run_tog, TogConfig,
                       "Think-on-Graph: beam search over triples, LLM-pruned relations and entities",
                       hash_when_set=("abstain",))
TOG_R = MethodSpec.typed("tog-r", run_tog_r, TogConfig,
                         "ToG-R: relation chains, reasoning over every entity they reach, random entity prune",
                         hash_when_set=("abstain",))

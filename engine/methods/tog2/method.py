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

The flow, initialisation and reasoning are here; the config is `tog2_config`, the question's state
and record `tog2_state`, the graph search `tog2_search`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine.access.graph import GraphPath
from engine.access.kg_protocol import is_literal
from engine.methods.shared import prompts
from engine.methods.shared.common import answer_of, cot_once, majority, timed
from engine.methods.shared.labels import relation_text, triple_text, unique_texts
from engine.methods.shared.topics import linked_or_searched
from engine.methods.spec import MethodSpec
from engine.methods.tog2 import prompts as p2
from engine.methods.tog2.config import Tog2Config
from engine.methods.tog2.context import Candidate, Scored
from engine.methods.tog2.score import entity_scores
from engine.methods.tog2.search import Tog2Search
from engine.questions.record import AnswerRecord, Question

if TYPE_CHECKING:
    from engine.methods.context import Context


class _Run(Tog2Search):
    """State of one ToG-2 question, with its initialisation and reasoning."""

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


def _context(ranked: Sequence[Scored], k: int) -> list[Scored]:
    """The top-K units from documents (a triple sentence stand-in is no passage)."""
    return [s for s in ranked if s.unit.from_document][:k]


_Provisional = tuple[str, list[GraphPath], list[Scored]]


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
    answered, provisional = _initial_judgement(run, topics, init)
    if answered:
        return run.record
    depth = 1 if provisional else run.config.depth
    answered, guessed = _search_rounds(run, topics, depth, provisional)
    if not answered:
        _conclude(run, provisional, guessed)
    return run.record


def _initial_judgement(run: _Run, topics: list[str], init: dict[str, Any]) -> tuple[bool, _Provisional | None]:
    """Initialisation's context retrieval and reasoning call over the topic entities' top-K
    units. Returns (answered, provisional): a provisional answer (with `confirm_initial`) waits
    for one round of graph search."""
    with timed(run.record, "context_retrieval"):
        ranked = run.retriever.rank(run.text, [Candidate(t) for t in topics])
    units = _context(ranked, run.k)
    init["context"] = [s.unit.chunk_id for s in units]
    if units:  # without a document there is nothing to judge yet
        answer = run.reason(0, [], units, init, last=False)
        if answer is not None and not run.config.confirm_initial:
            run.answered(answer, 0, "sufficient")
            return True, None
        if answer is not None:  # provisional: one round of graph search may overturn it
            init["provisional_answer"] = answer
            return False, (answer, [], list(run.seen_units))
    return False, None


def _search_rounds(run: _Run, topics: list[str], depth: int,
                   provisional: _Provisional | None) -> tuple[bool, bool]:
    """Rounds 1..depth: graph search, context retrieval, entity prune, reasoning, and (between
    rounds) query re-forming. Returns (answered, guessed: the last reasoning call asked for a
    best answer)."""
    frontier = [GraphPath(t) for t in topics]
    visited = set(topics)
    guessed = False
    for round_ in range(1, depth + 1):
        step: dict[str, Any] = {"round": round_, "topics": [run.name(p.end) for p in frontier]}
        run.trace.append(step)
        explored = _explore(run, frontier, visited, step)
        if explored is None:
            run.record.extra["stopped"] = "dead_end"
            break
        selected, units = explored
        last = round_ == depth and provisional is None  # a provisional answer stands in for a best guess
        answer = run.reason(round_, selected, units, step, last)
        guessed = last
        if answer is not None:
            run.answered(answer, round_, "sufficient" if run.record.extra.get("sufficient") else "max_depth")
            return True, guessed
        if round_ == depth:
            break
        if run.config.reform_query and run.config.clues:
            run.reform_query(step)
        visited.update(p.end for p in selected)
        frontier = [p for p in selected if not is_literal(p.end)]
        if not frontier:
            run.record.extra["stopped"] = "dead_end"
            break
    return False, guessed


def _explore(run: _Run, frontier: list[GraphPath], visited: set[str],
             step: dict[str, Any]) -> tuple[list[GraphPath], list[Scored]] | None:
    """One round's relation discovery and prune, entity discovery, context retrieval and
    context-based entity prune (Eq. 6): the top W paths and the top-K units; None at a dead end
    (no candidate entity)."""
    with timed(run.record, "relation_search"):
        found = {p.end: run.relations(p) for p in frontier if not is_literal(p.end)}
    kept = run.prune_relations(frontier, found) if any(found.values()) else []
    step["relations"] = [[run.name(p.end), relation_text(run.kg, r), round(s, 3)] for p, r, s in kept]
    with timed(run.record, "entity_search"):
        cands = run.candidates(kept, visited)
    step["candidates"] = len(cands)
    if not cands:
        return None
    with timed(run.record, "context_retrieval"):
        ranked = run.retriever.rank(run.retrieval_query(), [Candidate(p.end, s) for p, s in cands])
    scores = entity_scores([(s.unit.owner, s.score) for s in ranked], run.k, run.config.alpha)
    order = sorted(range(len(cands)), key=lambda i: (-scores.get(cands[i][0].end, 0.0), i))
    selected = [GraphPath(cands[i][0].topic, cands[i][0].hops, scores.get(cands[i][0].end, 0.0))
                for i in order[: run.width]]
    step["entities"] = [[run.name(p.end), round(p.score, 4)] for p in selected]
    units = _context(ranked, run.k)
    step["context"] = [s.unit.chunk_id for s in units]
    return selected, units


def _conclude(run: _Run, provisional: _Provisional | None, guessed: bool) -> None:
    """No round answered: the initialisation's provisional answer, else (unless `abstain`) one
    best-answer call over what was seen last, else no answer."""
    if provisional is not None:  # round 1 found nothing better: the initialisation's answer
        run.seen_paths, run.seen_units = provisional[1], provisional[2]
        run.record.extra.pop("stopped", None)
        run.answered(provisional[0], 0, "sufficient (confirmed: round 1 found no other answer)")
        return
    run.record.extra.setdefault("stopped", "max_depth")
    if not guessed and not run.config.abstain:
        # a dead end before the last round: one best-answer call over what was seen last
        answer = run.reason(len(run.trace) - 1, run.seen_paths, run.seen_units, run.trace[-1], last=True)
        if answer is not None:
            run.answered(answer, len(run.trace) - 1, run.record.extra["stopped"])
            return
    run.give_up("the knowledge found was never enough to answer")


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

"""Graph search of a ToG-2 round (§3): relation discovery, the relation prune (by the LLM, Eq. 2-3,
or by `prune_tool`) and entity discovery."""

from __future__ import annotations

from collections.abc import Sequence

from engine.access.graph import GraphPath, Hop
from engine.access.kg_protocol import Relation, is_literal
from engine.access.retrieval import shared_scorer
from engine.methods.shared.common import timed
from engine.methods.shared.labels import SCHEMA_RELATION_PREFIXES, relation_text, unique_texts
from engine.methods.shared.prune import Pruner
from engine.methods.tog2 import prompts as p2
from engine.methods.tog2.score import kept_relations, triple_sentence
from engine.methods.tog2.state import Tog2State


class Tog2Search(Tog2State):
    """A ToG-2 question's state with its graph search."""

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

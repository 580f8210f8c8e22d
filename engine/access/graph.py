"""The graph module every KG method shares: hops, paths and their provenance; D-hop question
subgraphs in networkx; tree-structured bidirectional path search; paths grouped over entity sets.

    sub = subgraph_within(kg, ["urn:e:Kill_Bill"], hops=2, max_degree=200, max_nodes=20_000)
    paths = topic_paths(sub, ["urn:e:Kill_Bill"], depth=2)
    for group in group_paths(paths):
        print(group.text(kg.label, kg.relation_label))   # {Kill Bill} -directed_by-> {Quentin Tarantino} -...

One model of a path (`GraphPath`: a topic entity and its `Hop`s) is used by ToG, by HydraRAG's
path search and, through `EvidencePath`, by every record and by evaluation.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Literal, TypeVar

import networkx as nx

from engine.access.kg_protocol import Direction, KnowledgeGraph, is_literal, stable_key

Source = Literal["kg", "wiki", "web", "domain"]
T = TypeVar("T")


# ---- hops and paths ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Hop:
    """One hop: from `head` over `relation` in `direction` to `tail` (path order). `out`
    follows the fact as stored (head -> relation -> tail); `in` walks it backwards."""

    head: str
    relation: str
    direction: Direction
    tail: str

    def triple(self) -> tuple[str, str, str]:
        """(subject, relation, object) as stored in the KG."""
        if self.direction == "out":
            return (self.head, self.relation, self.tail)
        return (self.tail, self.relation, self.head)

    def key(self) -> str:
        return f"{self.relation}|{self.direction}|{self.tail}"


@dataclass(frozen=True)
class GraphPath:
    """A path of hops from a topic entity, with a score (higher is better)."""

    topic: str
    hops: tuple[Hop, ...] = ()
    score: float = 1.0

    @property
    def end(self) -> str:
        return self.hops[-1].tail if self.hops else self.topic

    @property
    def nodes(self) -> set[str]:
        return {self.topic, *(h.tail for h in self.hops)}

    @property
    def entities(self) -> list[str]:
        """The entities along the path, in order (topic first)."""
        return [self.topic, *(h.tail for h in self.hops)]

    @property
    def chain(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """The relation chain: the topic and the (relation, direction) pairs followed."""
        return (self.topic, self.relations)

    @property
    def relations(self) -> tuple[tuple[str, str], ...]:
        return tuple((h.relation, h.direction) for h in self.hops)

    def __len__(self) -> int:
        return len(self.hops)

    def extend(self, hop: Hop, score: float | None = None) -> GraphPath:
        return GraphPath(self.topic, (*self.hops, hop), self.score if score is None else score)

    def key(self) -> str:
        """Identity of the path (topic and hops), independent of its score."""
        return "\t".join([self.topic, *(h.key() for h in self.hops)])

    def reversed(self) -> GraphPath:
        """The same hops walked from the other end."""
        back = tuple(Hop(h.tail, h.relation, "in" if h.direction == "out" else "out", h.head)
                     for h in reversed(self.hops))
        return GraphPath(self.end, back, self.score)

    def joined(self, other: GraphPath) -> GraphPath:
        """This path followed by `other`, which must start where this one ends."""
        if other.topic != self.end:
            raise ValueError(f"cannot join a path ending at {self.end} with one starting at {other.topic}")
        return GraphPath(self.topic, self.hops + other.hops, min(self.score, other.score))


@dataclass
class EvidencePath:
    """One piece of evidence in a record, with provenance: KG triples (labels and ids) or
    document sentences (with chunk ids)."""

    source: Source
    triples: list[list[str]] = field(default_factory=list)  # [[head, relation, tail], ...] labels
    sentences: list[str] = field(default_factory=list)
    chunk_ids: list[str] = field(default_factory=list)
    relation_ids: list[str] = field(default_factory=list)  # relation ids along the path
    score: float | None = None
    triple_ids: list[list[str]] = field(default_factory=list)  # [[head, relation, tail], ...] ids
    titles: list[str] = field(default_factory=list)  # document titles, one per chunk id
    score_kind: str | None = None  # what `score` is, e.g. "cosine to the question"
    # "model": the last of `sentences` is the model's rewording of the ones before it (HydraRAG's
    # knowledge path written from a document window), never the source's own words.
    written_by: str | None = None

    @classmethod
    def from_path(cls, path: GraphPath, label: Callable[[str], str],
                  relation_label: Callable[[str], str]) -> EvidencePath:
        """A KG path as evidence: each hop as the stored triple, with labels and ids."""
        triples = []
        for hop in path.hops:
            s, r, o = hop.triple()
            triples.append([label(s), relation_label(r), label(o)])
        return cls(source="kg", triples=triples, relation_ids=[h.relation for h in path.hops],
                   triple_ids=[list(h.triple()) for h in path.hops], score=round(path.score, 6))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvidencePath:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})

    def explored_relations(self) -> list[str]:
        """Relation ids and labels this evidence walks (KG evidence only)."""
        if self.source != "kg":
            return []
        found = [str(r) for r in self.relation_ids]
        found.extend(str(t[1]) for t in self.triples if isinstance(t, list | tuple) and len(t) == 3)
        return found


# ---- beam helpers -----------------------------------------------------------------------------


def top_k(items: Sequence[tuple[T, float]], k: int) -> list[tuple[T, float]]:
    """The k best (item, score) pairs; ties keep the given order."""
    order = sorted(range(len(items)), key=lambda i: (-items[i][1], i))
    return [items[i] for i in order[:k]]


def group_by(paths: Iterable[GraphPath], key: Callable[[GraphPath], Hashable]) -> dict[Any, list[GraphPath]]:
    """Paths grouped by a key, groups and members in first-seen order."""
    groups: dict[Any, list[GraphPath]] = {}
    for p in paths:
        groups.setdefault(key(p), []).append(p)
    return groups


def best_per_path(items: Iterable[tuple[GraphPath, float]]) -> list[tuple[GraphPath, float]]:
    """One entry per distinct path (topic + hops), the best-scored one, in first-seen order."""
    best: dict[str, tuple[GraphPath, float]] = {}
    for path, score in items:
        key = path.key()
        if key not in best or score > best[key][1]:
            best[key] = (path, score)
    return list(best.values())


def stable_order(items: Iterable[str], seed: int = 0) -> list[str]:
    """Items in a seeded hash order: the same on every run, unrelated to store order."""
    salt = str(seed).encode()
    return sorted(set(items), key=lambda x: stable_key(x, salt))


# ---- question subgraphs -----------------------------------------------------------------------


@dataclass
class Subgraph:
    """The D-hop question graph of some topic entities.

    `graph` is a networkx MultiDiGraph: nodes are entity ids (literals too, never expanded),
    an edge u -> v keyed by the relation id stands for the stored fact (u, relation, v).
    `depth` maps each node to its hop distance from the nearest topic entity. Truncation is
    never silent: `capped` lists the nodes whose facts were sampled (node -> facts seen), and
    `budget_hit_at` the depth at which the node budget stopped growth (None: it never did).
    """

    graph: nx.MultiDiGraph
    topics: list[str]
    hops: int
    depth: dict[str, int] = field(default_factory=dict)
    capped: dict[str, int] = field(default_factory=dict)
    budget_hit_at: int | None = None

    @property
    def truncated(self) -> bool:
        return bool(self.capped) or self.budget_hit_at is not None

    def summary(self) -> dict[str, Any]:
        """Size and truncation, for traces and benchmarks."""
        return {"nodes": self.graph.number_of_nodes(), "edges": self.graph.number_of_edges(),
                "hops": self.hops, "truncated": self.truncated, "capped_nodes": len(self.capped),
                "budget_hit_at": self.budget_hit_at}

    def neighbours(self, node: str) -> Iterable[Hop]:
        """Every hop out of `node` in the subgraph, both directions, in a stable order."""
        g = self.graph
        hops = [Hop(node, key, "out", v) for _, v, key in g.out_edges(node, keys=True)]
        hops += [Hop(node, key, "in", u) for u, _, key in g.in_edges(node, keys=True)]
        hops.sort(key=lambda h: (h.relation, h.direction, h.tail))
        return hops

    def distances_from(self, source: str, limit: int) -> dict[str, int]:
        """Undirected hop distances from `source`, up to `limit`."""
        seen = {source: 0}
        queue = deque([source])
        while queue:
            node = queue.popleft()
            if seen[node] >= limit:
                continue
            for hop in self.neighbours(node):
                if hop.tail not in seen:
                    seen[hop.tail] = seen[node] + 1
                    queue.append(hop.tail)
        return seen

    def connecting(self) -> Subgraph:
        """The part that connects the topic entities (HydraRAG §4.2.1), in their given order:
        the nodes on a walk of at most 2·`hops` between two consecutive topic entities, i.e.
        `dist(t_i, n) + dist(n, t_i+1) <= 2·hops` (distances inside this subgraph). These are
        exactly the nodes `topic_paths` can use (each segment is a left tree path and a right
        tree path of at most `hops` each), so the search finds the same paths here as in the
        whole subgraph; the topic entities themselves stay whenever they are connected, and
        every node within `hops` of every topic entity stays. With one topic entity (or none)
        the subgraph itself."""
        topics = [t for t in dict.fromkeys(self.topics) if t in self.graph]
        if len(topics) < 2:
            return self
        reach = 2 * self.hops
        distances = {t: self.distances_from(t, reach) for t in topics}
        keep: set[str] = set()
        for left, right in pairwise(topics):
            to_right = distances[right]
            keep.update(n for n, d in distances[left].items() if d + to_right.get(n, reach + 1) <= reach)
        kept = self.graph.subgraph(keep).copy()
        return Subgraph(kept, list(self.topics), self.hops,
                        {n: d for n, d in self.depth.items() if n in kept},
                        {n: c for n, c in self.capped.items() if n in kept}, self.budget_hit_at)


def subgraph_within(kg: KnowledgeGraph, topic_entities: Sequence[str], hops: int, *,
                    max_degree: int = 500, max_nodes: int = 50_000) -> Subgraph:
    """The `hops`-hop neighbourhood of all topic entities, both directions, as a Subgraph.

    Breadth-first from every topic entity at once. Each node contributes at most `max_degree`
    facts per direction, read through `kg.edges` (a deterministic sample from a bounded scan:
    a hub of 100,000 facts costs about as much as one of `max_degree`). Growth stops at
    `max_nodes` nodes: the node being expanded when the budget fills adds its remaining edges
    to known nodes only, and no further node is read (`budget_hit_at` says at which depth), so
    the work is bounded by the budget too. Literal nodes are kept (they can be answers) but not
    expanded.
    """
    if hops < 0:
        raise ValueError("hops must be >= 0")
    graph = nx.MultiDiGraph()
    depth: dict[str, int] = {}
    capped: dict[str, int] = {}
    budget_hit_at: int | None = None
    frontier: list[str] = []
    for topic in dict.fromkeys(topic_entities):
        graph.add_node(topic)
        depth[topic] = 0
        frontier.append(topic)
    for level in range(hops):
        next_frontier: list[str] = []
        for node in frontier:
            if is_literal(node):
                continue
            for direction in ("out", "in"):
                found = kg.edges(node, direction, limit=max_degree)  # type: ignore[arg-type]
                if not found.complete:
                    capped[node] = max(capped.get(node, 0), found.scanned)
                for relation, other in found.pairs:
                    if other not in depth:
                        if graph.number_of_nodes() >= max_nodes:
                            if budget_hit_at is None:
                                budget_hit_at = level + 1
                            continue
                        depth[other] = level + 1
                        graph.add_node(other)
                        next_frontier.append(other)
                    if direction == "out":
                        graph.add_edge(node, other, key=relation)
                    else:
                        graph.add_edge(other, node, key=relation)
            if budget_hit_at is not None:
                return Subgraph(graph, list(dict.fromkeys(topic_entities)), hops, depth, capped,
                                budget_hit_at)
        frontier = next_frontier
    return Subgraph(graph, list(dict.fromkeys(topic_entities)), hops, depth, capped, budget_hit_at)


# ---- path search ------------------------------------------------------------------------------

PathScorer = Callable[[Sequence[GraphPath]], Sequence[float]]


def _expand(sub: Subgraph, start: str, depth: int, width: int | None,
            scorer: PathScorer | None, avoid: set[str], diverse: bool = False) -> list[list[GraphPath]]:
    """Tree-structured expansion from `start`: simple paths of each length 0..depth.

    Level d holds the paths of length d; with `width`, only the best `width` (by `scorer`, or
    in a stable order without one) are kept and expanded further; `diverse`: taken in turns
    across relation chains (see `_keep_best`). Paths never revisit a node and never pass
    through `avoid` (other topic entities) except as their last node.
    """
    levels: list[list[GraphPath]] = [[GraphPath(start)]]
    # Many paths end at the same node (a hub's neighbours all lead back to it): sort its hops once.
    hops_of: dict[str, list[Hop]] = {}
    for _ in range(depth):
        grown: list[GraphPath] = []
        for path in levels[-1]:
            if path.hops and (path.end in avoid or is_literal(path.end)):
                continue  # a path stops at another topic entity or a literal
            seen = path.nodes
            end = path.end
            if end not in hops_of:
                hops_of[end] = list(sub.neighbours(end))
            grown.extend(path.extend(h) for h in hops_of[end] if h.tail not in seen)
        if width is not None and len(grown) > width:
            grown = _keep_best(grown, width, scorer, diverse)
        elif scorer is not None and grown:
            grown = [GraphPath(p.topic, p.hops, s) for p, s in zip(grown, scorer(grown), strict=True)]
        levels.append(grown)
    return levels


def _keep_best(paths: list[GraphPath], width: int, scorer: PathScorer | None,
               diverse: bool = False) -> list[GraphPath]:
    """The best `width` paths. `diverse`: in turns across relation chains, the best chain
    first: the best path of every chain, then the second of every chain, ... A hub reached by
    one chain (a release year shared by 900 films) then cannot fill the whole beam with paths
    that score alike, and the chain the question needs keeps its place."""
    if scorer is None:
        order = stable_order([p.key() for p in paths])[:width]
        by_key = {p.key(): p for p in paths}
        return [by_key[k] for k in order]
    scores = list(scorer(paths))
    scored = [(GraphPath(p.topic, p.hops, s), s) for p, s in zip(paths, scores, strict=True)]
    if not diverse:
        return [p for p, _ in top_k(scored, width)]
    chains: dict[Any, list[GraphPath]] = {}
    for p, _ in top_k(scored, len(scored)):  # best first, ties in a stable order
        chains.setdefault(p.chain, []).append(p)
    kept: list[GraphPath] = []
    for turn in range(max(len(c) for c in chains.values())):
        kept += [c[turn] for c in chains.values() if turn < len(c)]
        if len(kept) >= width:
            break
    return kept[:width]


def topic_paths(sub: Subgraph, topics: Sequence[str], depth: int, *, width: int | None = None,
                scorer: PathScorer | None = None, max_paths: int = 100_000,
                diverse: bool = False) -> list[GraphPath]:
    """Entity paths that visit every topic entity in the given order (HydraRAG §4.2.1,
    Algorithm 1), searched breadth-first from every topic entity (a tree per topic).

    One topic entity: every simple path of length `depth` from it. Several (t1..tk): paths
    t1 ~> t2 ~> ... ~> tk where each segment joins the tree of its left topic with the tree of
    its right one at a meeting node (bidirectional BFS), with total length in
    (k·(depth-1), k·depth]. `width` (W1) keeps the best partial paths per tree and level, scored
    by `scorer` (a batch of paths -> scores, higher is better), so a hub cannot blow up the
    search (`diverse`: kept in turns across relation chains); `max_paths` bounds the result.
    """
    topics = [t for t in dict.fromkeys(topics) if t in sub.graph]
    if not topics or depth < 1:
        return []
    if len(topics) == 1:
        levels = _expand(sub, topics[0], depth, width, scorer, set(), diverse)
        return levels[depth][:max_paths]
    k = len(topics)
    low, high = k * (depth - 1), k * depth
    trees = {t: _expand(sub, t, depth, width, scorer, set(topics) - {t}, diverse) for t in topics}
    segments: list[list[GraphPath]] = []
    for left, right in pairwise(topics):
        segments.append(_join(trees[left], trees[right], left, right, max_paths))
        if not segments[-1]:
            return []
    found: list[GraphPath] = segments[0]
    for seg in segments[1:]:
        found = [a.joined(b) for a in found for b in seg
                 if len(a) + len(b) <= high and not (a.nodes & b.nodes) - {b.topic}][:max_paths]
    result = [p for p in found if low < len(p) <= high]
    result.sort(key=lambda p: (-p.score, len(p), p.key()))
    return result[:max_paths]


def _join(left_tree: list[list[GraphPath]], right_tree: list[list[GraphPath]], left: str,
          right: str, max_paths: int) -> list[GraphPath]:
    """Simple paths left ~> right made of a left-tree path and a reversed right-tree path that
    end at the same node."""
    by_end: dict[str, list[GraphPath]] = {}
    for level in right_tree:
        for path in level:
            by_end.setdefault(path.end, []).append(path)
    joined: dict[str, GraphPath] = {}
    for level in left_tree:
        for a in level:
            if a.end == left and a.hops:
                continue
            # A literal is never expanded, so never passed through: it cannot be a meeting node
            # inside the segment (only its end, when it is the right topic entity itself).
            if a.hops and is_literal(a.end) and a.end != right:
                continue
            for b in by_end.get(a.end, ()):
                if (a.nodes & b.nodes) != {a.end}:
                    continue  # not simple
                path = a.joined(b.reversed()) if b.hops else a
                if path.end != right or not path.hops:
                    continue
                joined.setdefault(path.key(), path)
                if len(joined) >= max_paths:
                    return list(joined.values())
    return list(joined.values())


# ---- grouped paths ----------------------------------------------------------------------------


@dataclass
class GroupedPath:
    """Paths that share one topic and one relation sequence, as one path over entity sets:
    `{A} -directed_by-> {B} -directed_by (reverse)-> {C, D, E}`. `sets[i]` are the entities at
    position i (deduplicated, first-seen order); `paths` the member paths."""

    topic: str
    relations: tuple[tuple[str, str], ...]
    sets: list[list[str]]
    paths: list[GraphPath]
    score: float

    @property
    def counts(self) -> list[int]:
        return [len(s) for s in self.sets]

    def text(self, label: Callable[[str], str], relation_label: Callable[[str], str],
             max_shown: int = 5) -> str:
        """The compact form a small model reads: entity sets joined by relation arrows."""
        def show(entities: list[str]) -> str:
            names = list(dict.fromkeys(label(e) for e in entities))
            more = f", … {len(names) - max_shown} more" if len(names) > max_shown else ""
            return "{" + ", ".join(names[:max_shown]) + more + "}"

        parts = [show(self.sets[0])]
        for (relation, direction), entities in zip(self.relations, self.sets[1:], strict=True):
            arrow = relation_label(relation) + (" (reverse)" if direction == "in" else "")
            parts.append(f"-{arrow}-> {show(entities)}")
        return " ".join(parts)


def group_paths(paths: Iterable[GraphPath]) -> list[GroupedPath]:
    """Group paths by (topic, relation sequence); best group (highest member score) first."""
    groups: list[GroupedPath] = []
    for (topic, relations), members in group_by(paths, lambda p: p.chain).items():
        # dicts as ordered sets: a group of 10,000 paths must not cost 10,000² list scans
        positions: list[dict[str, None]] = [{} for _ in range(len(relations) + 1)]
        for path in members:
            for i, entity in enumerate(path.entities):
                positions[i].setdefault(entity, None)
        sets = [list(position) for position in positions]
        groups.append(GroupedPath(topic, relations, sets, members, max(p.score for p in members)))
    groups.sort(key=lambda g: -g.score)
    return groups

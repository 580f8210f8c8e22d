"""HydraRAG's structured retrieval (§4.2.1, Algorithm 1) over the shared graph module.

The question subgraph (`subgraph_within`, D_max hops from every topic entity, reduced to the
part that connects them), the skyline's order of the topic entities and its predicted depth,
tree-structured bidirectional path search at depth min(D_predict, D_max) with the best W1
partial paths kept per level (scored by a relevance hook), and the found paths grouped over
entity sets as candidates of the evidence pool. `hydra-e` keeps one seeded-random relation per
clustered edge of the subgraph.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import networkx as nx

from engine.access.graph import (
    GraphPath,
    GroupedPath,
    Hop,
    PathScorer,
    Subgraph,
    group_paths,
    stable_order,
    topic_paths,
)
from engine.methods.hydra.score import Candidate, normal_name

_SKYLINE_SPLIT = re.compile(r"\s*(?:->|→|–|—|\s-\s)\s*")
_ANSWER_WORD = re.compile(r"\banswer\b", re.IGNORECASE)

Label = Callable[[str], str]
Relevance = Callable[[Sequence[Candidate]], list[float]]


# ---- the subgraph ------------------------------------------------------------------------------


def one_relation_per_edge(sub: Subgraph, seed: int) -> Subgraph:
    """`hydra-e`: of all relations between two entities (either direction: one clustered edge),
    keep one, chosen by a seeded hash order (the same on every run)."""
    chosen: dict[frozenset[str], tuple[str, str, str]] = {}
    by_pair: dict[frozenset[str], list[tuple[str, str, str]]] = {}
    for u, v, key in sub.graph.edges(keys=True):
        by_pair.setdefault(frozenset((u, v)), []).append((u, v, key))
    for pair, edges in by_pair.items():
        keys = {f"{u}\t{key}\t{v}": (u, v, key) for u, v, key in edges}
        chosen[pair] = keys[stable_order(keys, seed)[0]]
    graph = nx.MultiDiGraph()
    graph.add_nodes_from(sub.graph.nodes)
    for u, v, key in chosen.values():
        graph.add_edge(u, v, key=key)
    return Subgraph(graph, list(sub.topics), sub.hops, dict(sub.depth), dict(sub.capped), sub.budget_hit_at)


def clustered_edges(sub: Subgraph) -> int:
    """Entity pairs joined by more than one relation (what `hydra-e` reduces to one)."""
    counts: dict[frozenset[str], int] = {}
    for u, v, _ in sub.graph.edges(keys=True):
        pair = frozenset((u, v))
        counts[pair] = counts.get(pair, 0) + 1
    return sum(1 for n in counts.values() if n > 1)


# ---- the skyline indicator -----------------------------------------------------------------------


def skyline_chain(skyline: str) -> list[str]:
    """The skyline's items (entities and relations alternate), split at " - " / "->"."""
    return [part.strip(" \"'{}") for part in _SKYLINE_SPLIT.split(skyline) if part.strip(" \"'{}")]


def _position(chain: Sequence[str], name: str) -> int | None:
    key = normal_name(name)
    for i, item in enumerate(chain):
        if key and (key == normal_name(item) or key in normal_name(item)):
            return i
    return None


def skyline_depth(skyline: str, topic_labels: Sequence[str], d_max: int) -> int:
    """D_predict (§4.1): the largest number of relations between the answer and a topic entity
    on the skyline, bounded to 1..d_max. The answer is the last item that says "answer" (else
    the last item); a topic entity the skyline does not name counts from the chain's start."""
    chain = skyline_chain(skyline)
    if len(chain) < 2:
        return d_max
    answer = max((i for i, item in enumerate(chain) if _ANSWER_WORD.search(item)), default=len(chain) - 1)
    positions = [p for p in (_position(chain, t) for t in topic_labels) if p is not None] or [0]
    hops = max((abs(answer - p) + 1) // 2 for p in positions)
    return max(1, min(hops, d_max))


def skyline_order(topics: Sequence[str], labels: Sequence[str], skyline: str) -> list[str]:
    """The topic entities in the order the skyline names them (List_T = Reorder(Topic(q), I));
    those it does not name keep their linking order, after the named ones."""
    chain = skyline_chain(skyline)
    keyed = [(_position(chain, label), i) for i, label in enumerate(labels)]
    order = sorted(range(len(topics)), key=lambda i: (keyed[i][0] is None, keyed[i][0] or 0, i))
    return [topics[i] for i in order]


# ---- path search --------------------------------------------------------------------------------


def chain_text(path: GraphPath, label: Label, relation_label: Label, topics: set[str]) -> str:
    """A partial path as its relation chain: "Topic - relation - relation (reverse)", plus the
    end's name when it is a topic entity. Paths of one chain share one text (one embedding), so
    scoring a level of thousands of partial paths costs as many embeddings as it has chains."""
    parts = [label(path.topic)]
    for hop in path.hops:
        parts.append(_relation_text(hop, relation_label))
    if path.hops and path.end in topics:
        parts.append(label(path.end))
    return " - ".join(parts)


def relevance_scorer(label: Label, relation_label: Label, topics: Sequence[str],
                     relevance: Relevance) -> PathScorer:
    """The W1 hook of the path search: each partial path scored by the relevance of its chain
    text (entity names: the topic entities on it) to the indicator."""
    topic_set = set(topics)

    def score(paths: Sequence[GraphPath]) -> list[float]:
        texts = [chain_text(p, label, relation_label, topic_set) for p in paths]
        distinct = list(dict.fromkeys(texts))
        entities = {t: tuple(label(n) for n in dict.fromkeys(p.entities) if n in topic_set)
                    for t, p in zip(texts, paths, strict=True)}
        scores = relevance([Candidate(t, entities[t], "kg") for t in distinct])
        by_text = dict(zip(distinct, scores, strict=True))
        return [by_text[t] for t in texts]

    return score


@dataclass
class KgPaths:
    """What one structured retrieval found: the paths, their groups and the depth searched."""

    depth: int
    topics: list[str]
    paths: list[GraphPath]
    groups: list[GroupedPath]


def search_paths(sub: Subgraph, topics: Sequence[str], depth: int, *, w1: int, scorer: PathScorer | None,
                 max_paths: int, all_depths: bool = False, diverse: bool = False) -> KgPaths:
    """Tree-based path retrieval: paths through `topics` in order at `depth` (length in
    (|T|(D-1), |T|·D]); `all_depths`: every depth 1..`depth` (predicted exploration's
    length <= |T|·D_max); `diverse`: the W1 beam in turns across relation chains. Paths with one
    relation sequence are grouped over entity sets."""
    found: dict[str, GraphPath] = {}
    for d in range(1 if all_depths else depth, depth + 1):
        for path in topic_paths(sub, topics, d, width=w1, scorer=scorer, max_paths=max_paths, diverse=diverse):
            found.setdefault(path.key(), path)
    paths = list(found.values())
    return KgPaths(depth, list(topics), paths, group_paths(paths))


def member_text(path: GraphPath, label: Label, relation_label: Label) -> str:
    """One entity path as text: "A - relation - B - relation (reverse) - C"."""
    parts = [label(path.topic)]
    for hop in path.hops:
        parts += [_relation_text(hop, relation_label), label(hop.tail)]
    return " - ".join(parts)


def _relation_text(hop: Hop, relation_label: Label) -> str:
    return relation_label(hop.relation) + (" (reverse)" if hop.direction == "in" else "")


def path_candidates(groups: Sequence[GroupedPath], label: Label, relation_label: Label,
                    max_shown: int, group_scoring: str = "group") -> list[Candidate]:
    """Each grouped path as a candidate of the pool: its compact text and the names it shows;
    `group_scoring` "member": relevance reads its first member path (text and entities),
    "group": the compact text and every name shown."""
    result = []
    for group in groups:
        shown = [list(dict.fromkeys(label(e) for e in entities))[:max_shown] for entities in group.sets]
        names = tuple(dict.fromkeys(n for step in shown for n in step))
        text = group.text(label, relation_label, max_shown)
        if group_scoring == "member" and group.paths:
            member = group.paths[0]
            result.append(Candidate(text, names, "kg", group, member_text(member, label, relation_label),
                                    tuple(label(n) for n in member.entities)))
        else:
            result.append(Candidate(text, names, "kg", group))
    return result

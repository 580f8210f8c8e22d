"""Relations that are each other's inverse in a graph (`parents` and `children`), found from its
edges without the LLM: the `chains` scorer reads a reverse step of one as a forward step of the
other (`inverse_steps`), so "the kid of X" names `parents (reverse)` as it names `children`.

`inverse_relations` reads one networkx graph (a question's subgraph); `graph_inverses` reads the
whole KG, a bounded sample of each relation's facts, once per relation and KG (`inverse_scope`):
whether two relations are inverses is a property of the graph, and a question's neighbourhood
often holds too few pairs to show it (PathQuestion: about half of the PQ-3H question subgraphs).
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Iterable, Mapping

import networkx as nx

from engine.access.kg_protocol import KnowledgeGraph


def inverse_relations(graph: nx.MultiDiGraph, min_pairs: int = 3, share: float = 0.2,
                      balance: float = 2.0) -> dict[str, str]:
    """Relation -> its inverse: `r2` is the inverse of `r` when at least `min_pairs` edges
    `a -r-> b` have an edge `b -r2-> a`, these pairs are at least `share` of each relation's
    edges (a KG lists only some of a pair's inverse facts: PathQuestion's 518 `parents` and 573
    `children` edges share 159), and the two shares are within a factor `balance` of each other:
    a relation contained in the other's reverse is not its inverse (every `capital` edge of the
    demo graph has a `located_in` edge back, 8 of its 30 `located_in` edges a `capital` edge: a
    city located in a country is not its capital). A relation that is its own inverse (`spouse`)
    needs no entry; of several candidates the one with the most pairs wins."""
    edges: Counter[str] = Counter()
    pairs: Counter[tuple[str, str]] = Counter()
    for a, b, r in graph.edges(keys=True):
        edges[r] += 1
        for r2 in graph.get_edge_data(b, a) or ():
            if r2 != r:
                pairs[(r, r2)] += 1
    return _paired(edges, pairs, min_pairs, share, balance)


def _paired(edges: Mapping[str, int], pairs: Counter[tuple[str, str]], min_pairs: int, share: float,
            balance: float) -> dict[str, str]:
    """The criteria of `inverse_relations` over counts: `edges[r]` facts of r read, `pairs[(r, r2)]`
    of them with an `r2` fact back (over one graph `pairs[(r2, r)]` is the same count; over samples
    each relation's own sample gives its share)."""
    inverse: dict[str, str] = {}
    for (r, r2), n in pairs.most_common():
        if r in inverse or n < min_pairs or not edges.get(r2):
            continue
        low, high = sorted((n / edges[r], pairs[(r2, r)] / edges[r2]))
        if low < share or high > balance * low:
            continue
        inverse[r] = r2
    return inverse


_READ: weakref.WeakKeyDictionary[object, dict[str, tuple[int, Counter[str]]]] = weakref.WeakKeyDictionary()


def graph_inverses(kg: KnowledgeGraph, relations: Iterable[str], sample: int = 1000, min_pairs: int = 3,
                   share: float = 0.2, balance: float = 2.0) -> dict[str, str]:
    """`inverse_relations` over the whole KG for `relations` and the relations their facts meet
    back: each relation's facts read once per KG (up to `sample` with an entity tail, sampled
    deterministically: `KnowledgeGraph.back_relations`)."""
    read = _READ.setdefault(kg, {})
    edges: dict[str, int] = {}
    pairs: Counter[tuple[str, str]] = Counter()
    todo = list(dict.fromkeys(relations))
    for relation in todo:
        if relation not in read:
            read[relation] = kg.back_relations(relation, sample)
        edges[relation], found = read[relation]
        for other, n in sorted(found.items()):
            pairs[(relation, other)] = n
            if other not in todo:
                todo.append(other)  # the candidate inverse's own share
    return _paired(edges, pairs, min_pairs, share, balance)

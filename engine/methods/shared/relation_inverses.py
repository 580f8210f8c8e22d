"""Relations that are each other's inverse in a graph (`parents` and `children`), found from its
edges without the LLM: the `chains` scorer reads a reverse step of one as a forward step of the
other (`inverse_steps`), so "the kid of X" names `parents (reverse)` as it names `children`.
"""

from __future__ import annotations

from collections import Counter

import networkx as nx


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
        back = graph.get_edge_data(b, a)
        for r2 in back or ():
            if r2 != r:
                pairs[(r, r2)] += 1
    inverse: dict[str, str] = {}
    for (r, r2), n in pairs.most_common():
        low, high = sorted((n / edges[r], n / edges[r2]))
        if r in inverse or n < min_pairs or low < share or high > balance * low:
            continue
        inverse[r] = r2
    return inverse

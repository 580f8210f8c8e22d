"""The graph module (`engine/access/graph.py`) on real data and on small hand-made graphs.

Real data: the full MetaQA KB (the session index of conftest) and the PathQuestion 3-hop KB.
Expected values come from the raw KB files or from an independent brute-force path
enumeration, never from the module under test. Hand-made graphs (an N-Triples file built into
an index like any user's KG) are used where an exact answer is needed: distances, hub sampling,
the node budget, literals, the two-topic length bounds, grouping and its text form.
"""

from __future__ import annotations

import random
import re
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from engine.access.graph import (
    GraphPath,
    Hop,
    Subgraph,
    group_paths,
    subgraph_within,
    topic_paths,
)
from engine.access.kg_protocol import SCAN_FACTOR, is_literal
from engine.access.oxigraph_kg import OxigraphKG
from engine.questions.answer_match import normalise_answer
from index.build import build_index
from index.entities import EntityTable
from index.kg_stage import KgSource
from index.paths import IndexPaths
from ingest.terms import mint_entity, mint_relation

EX = "http://ex.org/e/"
R = "http://ex.org/r/"


def e(name: str) -> str:
    return EX + name


def r(name: str) -> str:
    return R + name


# ---- fixtures ---------------------------------------------------------------------------------


def _hand_triples() -> list[str]:
    lines = []

    def fact(s: str, p: str, o: str) -> None:
        lines.append(f"<{e(s)}> <{r(p)}> <{e(o)}> .")

    # small component: A's 1- and 2-hop neighbours in both directions, a literal shared with G
    fact("A", "r1", "B")
    fact("A", "r2", "C")
    fact("B", "r3", "D")
    fact("C", "r3", "D")
    fact("D", "r4", "E")
    fact("F", "r1", "A")
    lines.append(f'<{e("A")}> <{r("year")}> "1999" .')
    lines.append(f'<{e("G")}> <{r("year")}> "1999" .')
    # a hub: 300 facts out and 300 in
    for i in range(300):
        fact("H", "member", f"L{i:03d}")
        fact(f"N{i:03d}", "likes", "H")
    # a star for the node budget
    for i in range(1, 6):
        fact("S", "link", f"S{i}")
    # films for grouping
    fact("F1", "directed_by", "Dir")
    fact("F2", "directed_by", "Dir")
    fact("F3", "directed_by", "Dir")
    fact("F1", "starred", "X")
    fact("F4", "starred", "X")
    # two topics T1, T2 joined by paths of length 2 (Q1), 3 (P1, P2) and 4 (R1, R2, R3)
    fact("T1", "a", "P1")
    fact("P1", "b", "P2")
    fact("P2", "c", "T2")
    fact("T1", "d", "Q1")
    fact("T2", "e", "Q1")
    fact("T1", "f", "R1")
    fact("R1", "g", "R2")
    fact("R2", "h", "R3")
    fact("R3", "i", "T2")
    fact("T1", "z", "Z1")
    fact("Z1", "z", "Z2")
    # two topics 4 apart with no shortcut (U1 - V1 - V2 - V3 - U2)
    fact("U1", "p", "V1")
    fact("V1", "p", "V2")
    fact("V2", "p", "V3")
    fact("V3", "p", "U2")
    # two entities that share only a literal value
    lines.append(f'<{e("Y1")}> <{r("year")}> "1888" .')
    lines.append(f'<{e("Y2")}> <{r("year")}> "1888" .')
    return lines


@pytest.fixture(scope="module")
def hand_kg(tmp_path_factory: pytest.TempPathFactory) -> OxigraphKG:
    root = tmp_path_factory.mktemp("hand-graph")
    source = root / "hand.nt"
    source.write_text("\n".join(_hand_triples()) + "\n", encoding="utf-8")
    build_index(root / "ix", [KgSource(source, "ntriples")], [])
    return OxigraphKG.open(IndexPaths(root / "ix"))


@pytest.fixture(scope="module")
def metaqa(metaqa_index: Path) -> tuple[OxigraphKG, EntityTable]:
    paths = IndexPaths(metaqa_index)
    return OxigraphKG.open(paths), EntityTable.open(paths)


@pytest.fixture(scope="module")
def metaqa_facts(shared_data: Path) -> set[tuple[str, str, str]]:
    """The MetaQA KB straight from its files, as minted (subject, relation, object) ids."""
    kb = shared_data / "metaqa" / "kb"

    def table(name: str) -> dict[str, str]:
        lines = (kb / name).read_text(encoding="utf-8").splitlines()
        return dict(line.split("\t", 1) for line in lines)

    entities, relations = table("entities.dict"), table("relations.dict")
    facts = set()
    for line in (kb / "train.txt").read_text(encoding="utf-8").splitlines():
        h, rel, t = line.split("\t")
        facts.add((mint_entity(entities[h]), mint_relation(relations[rel]), mint_entity(entities[t])))
    return facts


@pytest.fixture(scope="module")
def pq(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> OxigraphKG:
    out = tmp_path_factory.mktemp("pq") / "ix"
    build_index(out, [KgSource(shared_data / "pathquestion" / "3H-kb.txt", "tsv")], [])
    return OxigraphKG.open(IndexPaths(out))


# ---- helpers independent of the module under test ----------------------------------------------


def edge_set(sub: Subgraph) -> set[tuple[str, str, str]]:
    return {(u, k, v) for u, v, k in sub.graph.edges(keys=True)}


def undirected(sub: Subgraph, node: str) -> Iterator[tuple[str, str, str]]:
    """(relation, direction, other end) of every edge at `node`, straight from networkx."""
    for _, v, k in sub.graph.out_edges(node, keys=True):
        yield k, "out", v
    for u, _, k in sub.graph.in_edges(node, keys=True):
        yield k, "in", u


def path_key(topic: str, steps: list[tuple[str, str, str]]) -> str:
    return "\t".join([topic, *(f"{rel}|{d}|{t}" for rel, d, t in steps)])


def brute_paths(sub: Subgraph, start: str, lengths: range, end: str | None = None) -> set[str]:
    """Keys of the simple paths from `start` with a length in `lengths` (ending at `end` when
    given; such a path stops there), never passing through a literal: by depth-first search."""
    found: set[str] = set()

    def walk(node: str, visited: set[str], steps: list[tuple[str, str, str]]) -> None:
        if steps and (node == end or is_literal(node)):
            if len(steps) in lengths and (end is None or node == end):
                found.add(path_key(start, steps))
            return
        if len(steps) in lengths and end is None:
            found.add(path_key(start, steps))
        if len(steps) == max(lengths):
            return
        for rel, d, other in undirected(sub, node):
            if other not in visited:
                walk(other, visited | {other}, [*steps, (rel, d, other)])

    walk(start, {start}, [])
    return found


def bfs_distances(facts: set[tuple[str, str, str]], start: str, limit: int) -> dict[str, int]:
    neighbours: dict[str, set[str]] = {}
    for s, _, o in facts:
        neighbours.setdefault(s, set()).add(o)
        neighbours.setdefault(o, set()).add(s)
    seen = {start: 0}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if seen[node] < limit:
            for other in neighbours.get(node, ()):
                if other not in seen:
                    seen[other] = seen[node] + 1
                    queue.append(other)
    return seen


# ---- hops and paths ---------------------------------------------------------------------------


def test_hop_triple_and_key() -> None:
    out = Hop("film", "directed_by", "out", "person")
    back = Hop("person", "directed_by", "in", "film")
    assert out.triple() == ("film", "directed_by", "person")
    assert back.triple() == ("film", "directed_by", "person")  # the same stored fact
    assert out.key() == "directed_by|out|person"
    assert back.key() == "directed_by|in|film"


def test_graph_path_reversed_joined_key() -> None:
    path = GraphPath("a", (Hop("a", "r1", "out", "b"), Hop("b", "r2", "in", "c")), 0.5)
    assert path.end == "c" and len(path) == 2
    assert path.entities == ["a", "b", "c"] and path.nodes == {"a", "b", "c"}
    assert path.relations == (("r1", "out"), ("r2", "in"))
    back = path.reversed()
    assert back.topic == "c" and back.end == "a" and back.score == 0.5
    assert back.hops == (Hop("c", "r2", "out", "b"), Hop("b", "r1", "in", "a"))
    # the same stored facts, walked the other way
    assert [h.triple() for h in back.hops] == [h.triple() for h in reversed(path.hops)]
    assert back.reversed().key() == path.key()
    assert path.key() == "a\tr1|out|b\tr2|in|c"
    assert GraphPath("a", path.hops, 0.1).key() == path.key()  # the score is not identity

    tail = GraphPath("c", (Hop("c", "r3", "out", "d"),), 0.2)
    joined = path.joined(tail)
    assert joined.entities == ["a", "b", "c", "d"] and joined.score == 0.2
    with pytest.raises(ValueError, match="cannot join"):
        tail.joined(path)
    assert GraphPath("x").reversed() == GraphPath("x")


# ---- subgraphs on a hand-made graph ----------------------------------------------------------


def test_subgraph_both_directions_and_distances(hand_kg: OxigraphKG) -> None:
    sub = subgraph_within(hand_kg, [e("A")], 2)
    assert sub.depth == {e("A"): 0, e("B"): 1, e("C"): 1, e("F"): 1, '"1999"': 1, e("D"): 2}
    assert edge_set(sub) == {
        (e("A"), r("r1"), e("B")), (e("A"), r("r2"), e("C")), (e("F"), r("r1"), e("A")),
        (e("A"), r("year"), '"1999"'), (e("B"), r("r3"), e("D")), (e("C"), r("r3"), e("D")),
    }
    assert not sub.truncated and sub.summary()["edges"] == 6
    deeper = subgraph_within(hand_kg, [e("A")], 3)
    assert deeper.depth[e("E")] == 3 and (e("D"), r("r4"), e("E")) in edge_set(deeper)
    # from the far end, only incoming facts lead anywhere
    back = subgraph_within(hand_kg, [e("E")], 2)
    assert back.depth == {e("E"): 0, e("D"): 1, e("B"): 2, e("C"): 2}
    assert subgraph_within(hand_kg, [e("A")], 0).graph.number_of_nodes() == 1
    with pytest.raises(ValueError):
        subgraph_within(hand_kg, [e("A")], -1)


def test_literals_are_kept_but_not_expanded(hand_kg: OxigraphKG) -> None:
    sub = subgraph_within(hand_kg, [e("A")], 3)
    assert '"1999"' in sub.graph
    assert e("G") not in sub.graph  # G shares only the literal with A
    assert list(sub.graph.in_edges('"1999"', keys=True)) == [(e("A"), '"1999"', r("year"))]
    assert topic_paths(subgraph_within(hand_kg, ['"1999"'], 2), ['"1999"'], 1) == []
    # nor is a literal a meeting point between two topic entities
    both = subgraph_within(hand_kg, [e("Y1"), e("Y2")], 1)
    assert both.graph.number_of_edges() == 2
    assert topic_paths(both, [e("Y1"), e("Y2")], 1) == []


def test_hub_is_sampled_deterministically(hand_kg: OxigraphKG, tmp_path: Path) -> None:
    cap = 50
    sub = subgraph_within(hand_kg, [e("H")], 1, max_degree=cap)
    out = {v for _, v in sub.graph.out_edges(e("H"))}
    into = {u for u, _ in sub.graph.in_edges(e("H"))}
    assert len(out) == cap and len(into) == cap
    assert out <= {e(f"L{i:03d}") for i in range(300)} and into <= {e(f"N{i:03d}") for i in range(300)}
    assert sub.capped == {e("H"): SCAN_FACTOR * cap}  # the facts read, not the hub's degree
    assert sub.truncated
    again = subgraph_within(hand_kg, [e("H")], 1, max_degree=cap)
    assert edge_set(again) == edge_set(sub)
    # The hub's sample is the same whichever entity the extraction starts from and whatever was
    # extracted before (a fresh store handle, leaves in both orders; one leaf outside the sample).
    fresh = OxigraphKG(hand_kg.store)
    leaves = [e("L299"), sorted(out)[0]]
    sample = edge_set(sub)
    for kg, order in ((hand_kg, leaves), (fresh, leaves[::-1])):
        for leaf in order:
            around = subgraph_within(kg, [leaf], 2, max_degree=cap)
            at_hub = {t for t in edge_set(around) if e("H") in (t[0], t[2])}
            assert at_hub == sample | {(e("H"), r("member"), leaf)}
    uncapped = subgraph_within(hand_kg, [e("H")], 1, max_degree=1000)
    assert uncapped.graph.number_of_edges() == 600 and not uncapped.capped


def test_node_budget(hand_kg: OxigraphKG) -> None:
    sub = subgraph_within(hand_kg, [e("S")], 1, max_nodes=4)
    assert set(sub.graph) == {e("S"), e("S1"), e("S2"), e("S3")}  # the sample's sorted order
    assert sub.budget_hit_at == 1 and sub.truncated
    assert sub.graph.number_of_edges() == 3
    assert subgraph_within(hand_kg, [e("S")], 1, max_nodes=6).budget_hit_at is None


# ---- subgraphs on MetaQA ----------------------------------------------------------------------


def test_metaqa_subgraph_matches_the_kb(metaqa: tuple[OxigraphKG, EntityTable],
                                        metaqa_facts: set[tuple[str, str, str]]) -> None:
    kg, table = metaqa
    topic = table.resolve("Quentin Tarantino")
    assert topic is not None
    # uncapped, the 3-hop subgraph is exactly the KB's 3-hop ball: nodes, distances, facts
    sub = subgraph_within(kg, [topic], 3, max_degree=100_000, max_nodes=1_000_000)
    expected = bfs_distances(metaqa_facts, topic, 3)
    assert sub.depth == expected
    inner = {n for n, d in expected.items() if d < 3}
    assert edge_set(sub) == {f for f in metaqa_facts if f[0] in inner or f[2] in inner}
    assert not sub.truncated
    # both directions: he directs and writes films (in) and the films have genres (out)
    relations = {(k, "in" if v == topic else "out") for u, v, k in sub.graph.edges(keys=True) if topic in (u, v)}
    assert (mint_relation("directed_by"), "in") in relations and (mint_relation("written_by"), "in") in relations
    # with the default caps (genres are hubs of thousands of films) a subset, never nearer
    capped = subgraph_within(kg, [topic], 3)
    assert capped.capped and set(capped.graph) <= set(sub.graph)
    assert edge_set(capped) <= edge_set(sub)
    assert all(capped.depth[n] >= expected[n] for n in capped.graph)
    assert all(table.degree(n) > 500 for n in capped.capped)


def test_metaqa_hub_cap_and_budget(metaqa: tuple[OxigraphKG, EntityTable],
                                   metaqa_facts: set[tuple[str, str, str]]) -> None:
    kg, table = metaqa
    drama = table.resolve("Drama")
    assert drama is not None
    films = {s for s, _, o in metaqa_facts if o == drama}
    assert len(films) > 4000
    sub = subgraph_within(kg, [drama], 1, max_degree=100)
    assert {u for u, _ in sub.graph.in_edges(drama)} <= films
    assert sub.graph.number_of_nodes() == 101 and sub.capped == {drama: SCAN_FACTOR * 100}
    assert edge_set(subgraph_within(kg, [drama], 1, max_degree=100)) == edge_set(sub)
    # a film of the sample sees the same sample of its genre two hops away
    film = sorted({u for u, _ in sub.graph.in_edges(drama)})[0]
    around = subgraph_within(kg, [film], 2, max_degree=100)
    assert {u for u, _ in around.graph.in_edges(drama)} == {u for u, _ in sub.graph.in_edges(drama)}
    # the node budget: growth stops at max_nodes, and says where
    small = subgraph_within(kg, [drama], 2, max_nodes=300)
    assert small.graph.number_of_nodes() == 300 and small.budget_hit_at == 1
    assert max(small.depth.values()) == 1


# ---- path search ------------------------------------------------------------------------------


def _metaqa_question(shared_data: Path, hop: int, index: int) -> tuple[str, set[str]]:
    lines = (shared_data / "metaqa" / "questions" / f"{hop}-hop" / "qa_dev.txt").read_text(encoding="utf-8").splitlines()
    question, answers = lines[index].split("\t")
    topic = re.search(r"\[(.+?)\]", question)
    assert topic is not None
    return topic.group(1), {normalise_answer(a) for a in answers.split("|")}


def test_one_topic_paths_on_metaqa(metaqa: tuple[OxigraphKG, EntityTable], shared_data: Path) -> None:
    kg, table = metaqa
    rng = random.Random(0)
    for index in rng.sample(range(14_872), 5):
        name, gold = _metaqa_question(shared_data, 2, index)
        topic = table.resolve(name)
        assert topic is not None
        sub = subgraph_within(kg, [topic], 2)
        paths = topic_paths(sub, [topic], 2)
        assert paths and all(len(p) == 2 and p.topic == topic for p in paths)
        assert all(len(set(p.entities)) == 3 for p in paths)  # simple
        assert {p.key() for p in paths} == brute_paths(sub, topic, range(2, 3))
        assert gold & {normalise_answer(table.label(p.end)) for p in paths}, name


def test_one_topic_paths_on_a_hand_graph(hand_kg: OxigraphKG) -> None:
    sub = subgraph_within(hand_kg, [e("A")], 2)
    paths = topic_paths(sub, [e("A")], 2)
    assert sorted(p.entities[1:] for p in paths) == [[e("B"), e("D")], [e("C"), e("D")]]
    one = topic_paths(sub, [e("A")], 1)
    assert {p.end for p in one} == {e("B"), e("C"), e("F"), '"1999"'}
    assert topic_paths(sub, [e("A")], 0) == [] and topic_paths(sub, [e("nowhere")], 1) == []


def test_two_topic_paths_on_a_hand_graph(hand_kg: OxigraphKG) -> None:
    topics = [e("T1"), e("T2")]
    near = subgraph_within(hand_kg, topics, 1)
    assert [p.entities for p in topic_paths(near, topics, 1)] == [[e("T1"), e("Q1"), e("T2")]]
    sub = subgraph_within(hand_kg, topics, 2)
    paths = topic_paths(sub, topics, 2)  # lengths in (2, 4]: the path over Q1 is too short
    assert sorted(p.entities for p in paths) == [
        [e("T1"), e("P1"), e("P2"), e("T2")],
        [e("T1"), e("R1"), e("R2"), e("R3"), e("T2")],
    ]
    assert paths[0].hops[0] == Hop(e("T1"), r("a"), "out", e("P1"))  # shorter first at equal score
    assert paths[0].hops[-1] == Hop(e("P2"), r("c"), "out", e("T2"))
    reverse = topic_paths(sub, topics[::-1], 2)
    assert {p.reversed().key() for p in reverse} == {p.key() for p in paths}


def test_two_topic_paths_on_pathquestion(pq: OxigraphKG, shared_data: Path) -> None:
    lines = (shared_data / "pathquestion" / "PQ-3H.txt").read_text(encoding="utf-8").splitlines()
    # gold paths that are simple (the others walk back to an entity: a simple path search
    # cannot return them)
    simple = [line for line in lines if len(set(line.split("\t")[2].split("#")[0:7:2])) == 4]
    assert len(simple) == 2710  # of 5,198
    for line in random.Random(0).sample(simple, 8):
        chain = line.split("\t")[2].split("#")
        start, answer = mint_entity(chain[0]), mint_entity(chain[-1])
        gold_entities = [mint_entity(x) for x in chain[0:7:2]]
        gold_relations = [mint_relation(x) for x in chain[1:7:2]]
        topics = [start, answer]
        for depth in (1, 2):
            sub = subgraph_within(pq, topics, depth)
            paths = topic_paths(sub, topics, depth)
            low, high = 2 * (depth - 1), 2 * depth
            assert all(p.topic == start and p.end == answer and low < len(p) <= high for p in paths)
            assert all(len(set(p.entities)) == len(p) + 1 for p in paths)
            assert {p.key() for p in paths} == brute_paths(sub, start, range(low + 1, high + 1), answer)
        # the gold 3-hop path is among the depth-2 paths (the KB stores each fact one way)
        assert any(p.entities == gold_entities and [h.relation for h in p.hops] == gold_relations
                   for p in paths), line


def test_connecting_keeps_what_the_search_needs(hand_kg: OxigraphKG, pq: OxigraphKG,
                                                shared_data: Path) -> None:
    topics = [e("T1"), e("T2")]
    sub = subgraph_within(hand_kg, topics, 2)
    part = sub.connecting()
    # T1-Z1 is on a 4-walk T1 ~ T2 (Z1-T1-Q1-T2); Z2 is on none
    assert set(part.graph) == set(sub.graph) - {e("Z2")}
    assert {p.key() for p in topic_paths(part, topics, 2)} == {p.key() for p in topic_paths(sub, topics, 2)}
    # topics further apart than `hops` keep the path between them
    far = subgraph_within(hand_kg, [e("U1"), e("U2")], 2)
    assert set(far.connecting().graph) == {e("U1"), e("V1"), e("V2"), e("V3"), e("U2")}
    assert len(topic_paths(far.connecting(), [e("U1"), e("U2")], 2)) == 1
    single = subgraph_within(hand_kg, [e("A")], 2)
    assert single.connecting() is single
    # on real data: the same paths; every node within `hops` of both topics is kept
    lines = (shared_data / "pathquestion" / "PQ-3H.txt").read_text(encoding="utf-8").splitlines()
    for line in random.Random(1).sample(lines, 5):
        chain = line.split("\t")[2].split("#")
        topics = [mint_entity(chain[0]), mint_entity(chain[-1])]
        sub = subgraph_within(pq, topics, 2)
        part = sub.connecting()
        assert part.graph.number_of_nodes() < sub.graph.number_of_nodes()
        assert {p.key() for p in topic_paths(part, topics, 2)} == {p.key() for p in topic_paths(sub, topics, 2)}
        near = [sub.distances_from(t, 2) for t in topics]
        assert set(near[0]) & set(near[1]) <= set(part.graph)
        assert set(part.depth) == set(part.graph)


def test_width_and_scorer_keep_the_best(metaqa: tuple[OxigraphKG, EntityTable]) -> None:
    kg, table = metaqa
    topic = table.resolve("Quentin Tarantino")
    assert topic is not None
    sub = subgraph_within(kg, [topic], 2)

    def scorer(paths: Sequence[GraphPath]) -> list[float]:
        # a deterministic score that is not the expansion order: the end's label
        return [sum(map(ord, table.label(p.end))) % 97 / 97 for p in paths]

    width = 7
    first = topic_paths(sub, [topic], 1)
    assert len(first) > width
    kept = topic_paths(sub, [topic], 1, width=width, scorer=scorer)
    best = sorted(scorer(first), reverse=True)[:width]
    assert [p.score for p in kept] == best
    assert {p.key() for p in kept} <= {p.key() for p in first}
    # depth 2: the best `width` extensions of the kept first hops
    kept2 = topic_paths(sub, [topic], 2, width=width, scorer=scorer)
    firsts = {p.hops[0] for p in kept}
    candidates = [p for p in topic_paths(sub, [topic], 2) if p.hops[0] in firsts]
    assert sorted(p.score for p in kept2) == sorted(scorer(candidates), reverse=True)[:width][::-1]
    assert {p.hops[0] for p in kept2} <= firsts
    # without a scorer: a stable sample of `width`, the same every time
    plain = topic_paths(sub, [topic], 2, width=width)
    assert len(plain) == width and [p.key() for p in plain] == [p.key() for p in topic_paths(sub, [topic], 2, width=width)]
    assert len(topic_paths(sub, [topic], 2, max_paths=5)) == 5



def test_a_diverse_beam_takes_turns_across_relation_chains(metaqa: tuple[OxigraphKG, EntityTable]) -> None:
    """One chain that scores best for all its many members (Tarantino's films) must not fill the
    beam: `diverse` keeps the best path of every chain first, then the second of each, ..."""
    kg, table = metaqa
    topic = table.resolve("Quentin Tarantino")
    assert topic is not None
    sub = subgraph_within(kg, [topic], 1)
    first = topic_paths(sub, [topic], 1)
    chains = {p.chain for p in first}
    favourite = max(chains, key=lambda c: sum(p.chain == c for p in first))

    def scorer(paths: Sequence[GraphPath]) -> list[float]:  # the biggest chain scores best
        return [1.0 if p.chain == favourite else 0.5 for p in paths]

    width = len(chains) + 1
    assert sum(p.chain == favourite for p in first) > width
    flooded = topic_paths(sub, [topic], 1, width=width, scorer=scorer)
    assert {p.chain for p in flooded} == {favourite}
    diverse = topic_paths(sub, [topic], 1, width=width, scorer=scorer, diverse=True)
    assert {p.chain for p in diverse} == chains and len(diverse) == width
    assert sum(p.chain == favourite for p in diverse) == 2  # its best two: one turn more than the rest


# ---- grouped paths ----------------------------------------------------------------------------


def test_group_paths_sets_counts_text(hand_kg: OxigraphKG) -> None:
    topic = e("F1")
    sub = subgraph_within(hand_kg, [topic], 2)
    groups = group_paths(topic_paths(sub, [topic], 2))
    by_relations = {g.relations: g for g in groups}
    directed = by_relations[((r("directed_by"), "out"), (r("directed_by"), "in"))]
    assert directed.sets == [[topic], [e("Dir")], [e("F2"), e("F3")]]
    assert directed.counts == [1, 1, 2] and len(directed.paths) == 2
    assert directed.text(hand_kg.label, hand_kg.relation_label) == \
        "{F1} -directed by-> {Dir} -directed by (reverse)-> {F2, F3}"
    starred = by_relations[((r("starred"), "out"), (r("starred"), "in"))]
    assert starred.sets == [[topic], [e("X")], [e("F4")]]
    assert len(groups) == 2
    assert directed.text(hand_kg.label, hand_kg.relation_label, max_shown=1) == \
        "{F1} -directed by-> {Dir} -directed by (reverse)-> {F2, … 1 more}"


def test_group_paths_on_metaqa(metaqa: tuple[OxigraphKG, EntityTable]) -> None:
    kg, table = metaqa
    topic = table.resolve("Quentin Tarantino")
    assert topic is not None
    paths = topic_paths(subgraph_within(kg, [topic], 2), [topic], 2)
    groups = group_paths(paths)
    assert sum(len(g.paths) for g in groups) == len(paths)
    assert len({g.relations for g in groups}) == len(groups)
    for group in groups:
        assert all(p.relations == group.relations for p in group.paths)
        for i, entities in enumerate(group.sets):
            assert entities == list(dict.fromkeys(p.entities[i] for p in group.paths))
    films = next(g for g in groups if g.relations == ((mint_relation("directed_by"), "in"), (mint_relation("has_genre"), "out")))
    text = films.text(kg.label, kg.relation_label)
    assert text.startswith("{Quentin Tarantino} -directed by (reverse)-> {") and "-has genre-> {" in text
    assert "Drama" in {kg.label(x) for x in films.sets[2]}
    scores = [0.2, 0.9]
    rescored = [GraphPath(p.topic, p.hops, scores[i % 2]) for i, p in enumerate(paths[:4])]
    assert group_paths(rescored)[0].score == 0.9

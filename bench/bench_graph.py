"""Question-subgraph and path-search benchmark (`engine/access/graph.py`).

Two parts, one run:

1. MetaQA dev, 1-, 2- and 3-hop (QUESTIONS_PER_HOP sampled questions each, seed 0). The topic
   entity is the `[bracketed]` mention linked by `EntityLinker`. A question counts when a gold
   answer (matched by entity label, normalised as `answer_match.normalise_answer`) is within the
   hop count of the topic in the full KG (an uncapped BFS); it is a hit when a gold answer is
   the end of a path of length = hops from the topic in the subgraph `subgraph_within` extracts
   with the default caps (`topic_paths`, no width). Misses are re-run without any cap to tell
   losses to the caps from answers no simple path of that length reaches. Reported: the hit
   share, subgraph nodes/edges, extraction and path-search time (p50/p99), and the Python heap
   peak of extraction + search (tracemalloc, measured in a second pass so that its overhead
   stays out of the timings).
2. A generated power-law graph (GENERATED_TRIPLES distinct facts, Zipf-distributed subjects and
   objects, a few dozen relations, some literal attributes, seeded), written as N-Triples into a
   temp folder, indexed with `python cli.py index --kg-format ntriples` in a subprocess, then
   2- and 3-hop subgraphs extracted with the default caps from the largest hubs, from entities along a degree
   ladder (100,000 down to 10 facts) and from random entities: time, size, facts read, heap peak (deleted after).

`python -m bench.bench_graph --triples 200000 --questions 20 --out /tmp/x` is a small run.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from engine.access.graph import Subgraph, subgraph_within, topic_paths
from engine.access.kg_protocol import (
    SCAN_FACTOR,
    Direction,
    Directions,
    Edges,
    Relation,
    is_literal,
)
from engine.access.linking import EntityLinker
from engine.access.oxigraph_kg import OxigraphKG
from engine.questions.answer_match import normalise_answer
from index.build import build_index
from index.entities import EntityTable
from index.kg_stage import KgSource
from index.paths import IndexPaths

REPO = Path(__file__).resolve().parents[1]
METAQA = REPO.parent / "shared" / "data" / "metaqa"
QUESTIONS_PER_HOP = 200
SEED = 0
GENERATED_TRIPLES = 5_000_000
GENERATED_RELATIONS = 40
RANDOM_STARTS = 20
DEGREE_LADDER = (100_000, 10_000, 1_000, 100, 10)
HUBS = 3
MAX_DEGREE = 500  # the defaults of subgraph_within, recorded with the results
MAX_NODES = 50_000
PATH_WIDTH = 100  # HydraRAG's W1, for path search on the generated graph
UNCAPPED = 10**9


# ---- shared helpers ---------------------------------------------------------------------------


def _percentiles(values: list[float], scale: float = 1.0, digits: int = 3) -> dict[str, float]:
    """p50, p99 and max of `values` (times `scale`), nearest-rank."""
    ordered = sorted(values)
    if not ordered:
        return {"p50": 0.0, "p99": 0.0, "max": 0.0}
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {"p50": round(statistics.median(ordered) * scale, digits), "p99": round(p99 * scale, digits),
            "max": round(ordered[-1] * scale, digits)}


def _heap_peak(work: Callable[[], Any]) -> float:
    """MiB the Python heap grew to, at its peak, while `work` ran (tracemalloc must be on)."""
    before = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    result = work()
    peak = tracemalloc.get_traced_memory()[1] - before
    del result
    return peak / 2**20


class CountingKG:
    """A KG that counts `edges` calls and the facts they read (the cost a cap must bound)."""

    def __init__(self, kg: OxigraphKG) -> None:
        self.kg = kg
        self.calls = 0
        self.read = 0

    def label(self, node: str) -> str:
        return self.kg.label(node)

    def relation_label(self, relation: str) -> str:
        return self.kg.relation_label(relation)

    def relations_of(self, entity: str, direction: Directions = "both") -> list[Relation]:
        return self.kg.relations_of(entity, direction)

    def tails(self, entity: str, relation: str, direction: Direction = "out", limit: int | None = None) -> list[str]:
        return self.kg.tails(entity, relation, direction, limit)

    def edges(self, entity: str, direction: Direction, limit: int | None = None) -> Edges:
        found = self.kg.edges(entity, direction, limit)
        self.calls += 1
        self.read += found.scanned
        return found


class FullKG:
    """Every fact of an entity, uncapped and memoised: the ground truth for "within the hop
    count" (MetaQA is small enough to hold whatever the BFS touches)."""

    def __init__(self, kg: OxigraphKG) -> None:
        self.kg = kg
        self._neighbours: dict[str, set[str]] = {}

    def neighbours(self, node: str) -> set[str]:
        if is_literal(node):
            return set()  # as in subgraph_within: literals are kept, never expanded
        found = self._neighbours.get(node)
        if found is None:
            found = {other for _, other in self.kg.edges(node, "out").pairs}
            found |= {other for _, other in self.kg.edges(node, "in").pairs}
            self._neighbours[node] = found
        return found

    def ball(self, start: str, hops: int) -> dict[str, int]:
        """Undirected hop distance of every node within `hops` of `start`."""
        seen = {start: 0}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            if seen[node] < hops:
                for other in self.neighbours(node):
                    if other not in seen:
                        seen[other] = seen[node] + 1
                        queue.append(other)
        return seen


# ---- MetaQA -----------------------------------------------------------------------------------

_BRACKET = re.compile(r"\[(.+?)\]")


def _metaqa_sample(hops: int, count: int) -> list[tuple[str, list[str]]]:
    lines = (METAQA / "questions" / f"{hops}-hop" / "qa_dev.txt").read_text(encoding="utf-8").splitlines()
    picked = random.Random(SEED).sample(lines, min(count, len(lines)))
    return [(q, a.split("|")) for q, a in (line.split("\t") for line in picked)]


def _metaqa_hops(kg: OxigraphKG, table: EntityTable, linker: EntityLinker, full: FullKG, hops: int,
                 count: int) -> dict[str, Any]:
    normalised: dict[str, str] = {}

    def key(node: str) -> str:
        if node not in normalised:
            normalised[node] = normalise_answer(table.label(node) if not is_literal(node) else kg.label(node))
        return normalised[node]

    rows: list[dict[str, Any]] = []
    extract_s: list[float] = []
    search_s: list[float] = []
    cases: list[tuple[str, set[str]]] = []
    unlinked = 0
    for question, answers in _metaqa_sample(hops, count):
        candidates = linker.link(question)
        if not candidates or not candidates[0].reason.startswith("bracket"):
            unlinked += 1
            continue
        topic = candidates[0].entity
        gold = {normalise_answer(a) for a in answers}
        ball = full.ball(topic, hops)
        reachable = any(key(n) in gold for n, d in ball.items() if d >= 1)
        start = time.perf_counter()
        sub = subgraph_within(kg, [topic], hops)
        middle = time.perf_counter()
        paths = topic_paths(sub, [topic], hops)
        end = time.perf_counter()
        extract_s.append(middle - start)
        search_s.append(end - middle)
        hit = any(key(p.end) in gold for p in paths)
        row: dict[str, Any] = {"question": question, "reachable": reachable, "hit": hit,
                               "nodes": sub.graph.number_of_nodes(), "edges": sub.graph.number_of_edges(),
                               "paths": len(paths), "truncated": sub.truncated}
        if reachable and not hit:
            # Without any cap: is the answer lost to the caps, or on no simple path of this length?
            whole = subgraph_within(kg, [topic], hops, max_degree=UNCAPPED, max_nodes=UNCAPPED)
            row["hit_uncapped"] = any(key(p.end) in gold for p in topic_paths(whole, [topic], hops, max_paths=UNCAPPED))
            row["gold_distances"] = sorted({d for n, d in ball.items() if d >= 1 and key(n) in gold})
        rows.append(row)
        cases.append((topic, gold))

    tracemalloc.start()
    try:
        peaks = [_heap_peak(lambda t=topic: topic_paths(subgraph_within(kg, [t], hops), [t], hops))
                 for topic, _ in cases]
    finally:
        tracemalloc.stop()

    return _metaqa_summary(hops, rows, unlinked, extract_s, search_s, peaks)


def _metaqa_summary(hops: int, rows: list[dict[str, Any]], unlinked: int, extract_s: list[float],
                    search_s: list[float], peaks: list[float]) -> dict[str, Any]:
    """One hop count's results: hits among the reachable, misses by cause, sizes, times, heap."""
    counted = [r for r in rows if r["reachable"]]
    hits = sum(r["hit"] for r in counted)
    misses = [r for r in counted if not r["hit"]]
    return {
        "hops": hops,
        "questions": len(rows),
        "unlinked": unlinked,
        "reachable_in_full_kg": len(counted),
        "hits": hits,
        "hit_share": round(hits / len(counted), 4) if counted else None,
        "misses": len(misses),
        "misses_lost_to_caps": sum(bool(r.get("hit_uncapped")) for r in misses),
        "misses_no_path_of_length_hops": sum(not r.get("hit_uncapped") for r in misses),
        "miss_examples": [{k: r[k] for k in ("question", "gold_distances", "hit_uncapped", "truncated")}
                          for r in misses[:5]],
        "truncated_subgraphs": sum(r["truncated"] for r in rows),
        "nodes": _percentiles([r["nodes"] for r in rows], digits=0),
        "edges": _percentiles([r["edges"] for r in rows], digits=0),
        "paths": _percentiles([r["paths"] for r in rows], digits=0),
        "extract_ms": _percentiles(extract_s, 1000),
        "search_ms": _percentiles(search_s, 1000),
        "heap_peak_mib": _percentiles(peaks, digits=2),
    }


def run_metaqa(work: Path, count: int = QUESTIONS_PER_HOP) -> dict[str, Any]:
    """The MetaQA part (see the module docstring); the index is built under `work`."""
    index = work / "metaqa"
    build_index(index, [KgSource(METAQA / "kb", "metaqa")], [])
    paths = IndexPaths(index)
    kg = OxigraphKG.open(paths)
    table = EntityTable.open(paths)
    linker = EntityLinker.open(paths)
    full = FullKG(kg)
    return {f"{hops}-hop": _metaqa_hops(kg, table, linker, full, hops, count) for hops in (1, 2, 3)}


# ---- generated power-law graph ----------------------------------------------------------------


def _zipf(rng: np.random.Generator, items: int, size: int, exponent: float) -> np.ndarray:
    """`size` ranks in [0, items) with P(rank r) proportional to 1 / (r + 1) ** exponent."""
    weights = 1.0 / np.arange(1, items + 1, dtype=np.float64) ** exponent
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    return np.minimum(np.searchsorted(cdf, rng.random(size), side="right"), items - 1)


def generate_power_law(target: Path, triples: int, *, seed: int = SEED, relations: int = GENERATED_RELATIONS,
                       object_exponent: float = 1.0, subject_exponent: float = 0.6,
                       literal_share: float = 0.1) -> dict[str, Any]:
    """Write `triples` distinct N-Triples facts over triples // 5 entities to `target`.

    Objects follow a Zipf law (exponent 1: with 5M facts the largest hub has ~300,000 incoming
    facts), subjects a flatter one (a few thousand outgoing at most); relations are Zipf over
    `relations` ids; `literal_share` of the facts are year literals over 5 attribute relations.
    Subject and object ranks map to entities through two seeded permutations, so in- and
    out-hubs are different entities.
    """
    rng = np.random.default_rng(seed)
    entities = max(triples // 5, 10)
    bits = max(int(entities).bit_length(), 11)  # an object field also holds years (< 2048)
    subject_of, object_of = rng.permutation(entities), rng.permutation(entities)
    if relations + 5 > 127:
        raise ValueError("at most 122 relations (7 bits with the 5 literal attributes)")
    keys = np.empty(0, dtype=np.int64)
    while len(keys) < triples:  # duplicates (mostly on hubs) are drawn again until enough are distinct
        n = int((triples - len(keys)) * 1.05) + 1000
        s = subject_of[_zipf(rng, entities, n, subject_exponent)].astype(np.int64)
        o = object_of[_zipf(rng, entities, n, object_exponent)].astype(np.int64)
        r = _zipf(rng, relations, n, 1.0).astype(np.int64)
        literal = rng.random(n) < literal_share
        r = np.where(literal, relations + rng.integers(0, 5, n), r)
        o = np.where(literal, rng.integers(1900, 2025, n), o)
        keys = np.unique(np.concatenate([keys, (s << (bits + 7)) | (r << bits) | o]))
    keys = rng.permutation(keys)[:triples]
    subjects, kind, objects = keys >> (bits + 7), (keys >> bits) & 127, keys & ((1 << bits) - 1)
    prefix = "http://bench.example/"
    with target.open("w", encoding="utf-8") as out:
        for start in range(0, triples, 500_000):
            block = zip(subjects[start:start + 500_000].tolist(), kind[start:start + 500_000].tolist(),
                        objects[start:start + 500_000].tolist(), strict=True)
            out.writelines(
                f'<{prefix}e/{a}> <{prefix}r/attr{c - relations}> "{b}" .\n' if c >= relations
                else f"<{prefix}e/{a}> <{prefix}r/{c}> <{prefix}e/{b}> .\n"
                for a, c, b in block
            )
    in_degree = np.bincount(objects[kind < relations], minlength=entities)
    return {"triples": triples, "entities": entities, "relations": relations, "literal_relations": 5,
            "literal_share": literal_share, "object_exponent": object_exponent,
            "subject_exponent": subject_exponent, "seed": seed,
            "largest_in_degree": int(in_degree.max()),
            "entities_with_100k_facts_in": int((in_degree >= 100_000).sum()),
            "bytes": target.stat().st_size}


def _index_with_cli(source: Path, out: Path) -> dict[str, Any]:
    """`python cli.py index --kg-format ntriples` in a subprocess, as a user runs it."""
    command = [sys.executable, "cli.py", "index", "--out", str(out), "--kg", str(source), "--kg-format", "ntriples"]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"index failed ({done.returncode}): {done.stderr[-2000:]}")
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    return {"seconds": round(seconds, 1), "counts": manifest.get("counts", {})}


def _starts(table: EntityTable, random_starts: int) -> list[tuple[str, str]]:
    """(kind, entity): the largest hubs, one entity per degree on the ladder, random entities."""
    degrees = np.asarray(table.degrees, dtype=np.int64)
    order = np.argsort(-degrees, kind="stable")
    chosen: list[tuple[str, str]] = [("hub", table.ids[i]) for i in order[:HUBS]]
    taken = {entity for _, entity in chosen}
    for target in DEGREE_LADDER:
        for i in np.argsort(np.abs(degrees - target), kind="stable")[:50]:
            if not target / 2 <= degrees[i] <= target * 2:
                break  # a small graph has no entity of this degree
            if table.ids[i] not in taken:
                chosen.append((f"degree~{target}", table.ids[i]))
                taken.add(table.ids[i])
                break
    rng = random.Random(SEED)
    for i in rng.sample(range(len(table.ids)), random_starts):
        chosen.append(("random", table.ids[i]))
    return chosen


def _extract(kg: OxigraphKG, entity: str, hops: int) -> tuple[Subgraph, dict[str, Any]]:
    counting = CountingKG(kg)
    start = time.perf_counter()
    sub = subgraph_within(counting, [entity], hops)
    middle = time.perf_counter()
    paths = topic_paths(sub, [entity], hops, width=PATH_WIDTH)
    end = time.perf_counter()
    expanded = sum(1 for d in sub.depth.values() if d < hops)
    return sub, {
        "extract_s": round(middle - start, 3), "search_s": round(end - middle, 3), "paths": len(paths),
        "nodes": sub.graph.number_of_nodes(), "edges": sub.graph.number_of_edges(),
        "capped_nodes": len(sub.capped), "budget_hit_at": sub.budget_hit_at,
        "edges_calls": counting.calls, "facts_read": counting.read,
        # what the caps allow: every node nearer than `hops` reads <= SCAN_FACTOR·max_degree per direction
        "facts_read_bound": expanded * 2 * SCAN_FACTOR * MAX_DEGREE,
    }


def run_generated(work: Path, triples: int = GENERATED_TRIPLES, random_starts: int = RANDOM_STARTS) -> dict[str, Any]:
    """The generated-graph part (see the module docstring); files go under `work`."""
    source = work / "powerlaw.nt"
    start = time.perf_counter()
    generated = generate_power_law(source, triples)
    generated["seconds"] = round(time.perf_counter() - start, 1)
    index = work / "powerlaw-index"
    built = _index_with_cli(source, index)
    source.unlink()  # only the index is needed from here on
    paths = IndexPaths(index)
    kg = OxigraphKG.open(paths)
    table = EntityTable.open(paths)
    starts = _starts(table, random_starts)
    rows: list[dict[str, Any]] = []
    for kind, entity in starts:
        for hops in (2, 3):
            _, row = _extract(kg, entity, hops)
            rows.append({"kind": kind, "entity": entity, "degree": table.degree(entity), "hops": hops, **row})
    tracemalloc.start()
    try:
        for row in rows:
            row["heap_peak_mib"] = round(
                _heap_peak(lambda r=row: subgraph_within(kg, [r["entity"]], r["hops"])), 1)
    finally:
        tracemalloc.stop()
    summary: dict[str, Any] = {}
    for hops in (2, 3):
        for kind in ("hub", "random"):
            group = [r for r in rows if r["hops"] == hops and r["kind"] == kind]
            summary[f"{kind}-{hops}-hop"] = {
                "starts": len(group),
                "degree": _percentiles([r["degree"] for r in group], digits=0),
                "extract_ms": _percentiles([r["extract_s"] for r in group], 1000, 1),
                "search_ms": _percentiles([r["search_s"] for r in group], 1000, 1),
                "nodes": _percentiles([r["nodes"] for r in group], digits=0),
                "edges": _percentiles([r["edges"] for r in group], digits=0),
                "facts_read": _percentiles([r["facts_read"] for r in group], digits=0),
                "heap_peak_mib": _percentiles([r["heap_peak_mib"] for r in group], digits=1),
                "budget_hit": sum(r["budget_hit_at"] is not None for r in group),
            }
    return {"generated": generated, "index": built,
            "caps": {"max_degree": MAX_DEGREE, "max_nodes": MAX_NODES, "scan_factor": SCAN_FACTOR,
                     "path_width": PATH_WIDTH},
            "starts": rows, "summary": summary,
            "process_max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


# ---- report -----------------------------------------------------------------------------------


def _markdown(results: dict[str, Any]) -> str:
    sampled = results["config"]["questions_per_hop"]
    lines = [
        f"MetaQA dev, {sampled} sampled questions per hop count (seed {SEED}), default caps "
        f"(max_degree {MAX_DEGREE}, max_nodes {MAX_NODES:,}); hit = a gold answer ends a path of "
        "length = hops from the topic entity, over the questions whose answer is within that many "
        "hops in the full KG:",
        "",
        "| hops | reachable / sampled | hits | hit share | misses lost to caps | subgraph nodes p50 / p99 "
        "| edges p50 / p99 | extract ms p50 / p99 | path search ms p50 / p99 | heap peak MiB p50 / p99 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, m in results["metaqa"].items():
        lines.append(
            f"| {name} | {m['reachable_in_full_kg']} / {m['questions']} | {m['hits']} | "
            f"**{100 * (m['hit_share'] or 0):.1f}%** | {m['misses_lost_to_caps']} of {m['misses']} | "
            f"{m['nodes']['p50']:.0f} / {m['nodes']['p99']:.0f} | {m['edges']['p50']:.0f} / {m['edges']['p99']:.0f} | "
            f"{m['extract_ms']['p50']} / {m['extract_ms']['p99']} | {m['search_ms']['p50']} / {m['search_ms']['p99']} | "
            f"{m['heap_peak_mib']['p50']} / {m['heap_peak_mib']['p99']} |")
    g = results["power_law"]
    gen, built = g["generated"], g["index"]
    lines += [
        "",
        f"Generated power-law graph: {gen['triples']:,} facts over {gen['entities']:,} entities, "
        f"{gen['relations']} relations + {gen['literal_relations']} literal attributes; largest hub "
        f"{gen['largest_in_degree']:,} incoming facts, {gen['entities_with_100k_facts_in']} entities with 100,000+. "
        f"Indexed with `cli.py index` in {built['seconds']} s. Extraction with the default caps "
        f"(path search: width {PATH_WIDTH}):",
        "",
        "| start | degree | hops | extract ms | nodes | edges | facts read (cap bound) | budget hit | heap peak MiB | path search ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in g["starts"]:
        if row["kind"] == "random":
            continue
        lines.append(
            f"| {row['kind']} | {row['degree']:,} | {row['hops']} | {1000 * row['extract_s']:.0f} | {row['nodes']:,} | "
            f"{row['edges']:,} | {row['facts_read']:,} ({row['facts_read_bound']:,}) | "
            f"{row['budget_hit_at'] or '-'} | {row['heap_peak_mib']} | {1000 * row['search_s']:.0f} |")
    for hops in (2, 3):
        s = g["summary"][f"random-{hops}-hop"]
        lines.append(
            f"| {s['starts']} random (p50 / p99) | {s['degree']['p50']:.0f} / {s['degree']['p99']:.0f} | {hops} | "
            f"{s['extract_ms']['p50']:.0f} / {s['extract_ms']['p99']:.0f} | {s['nodes']['p50']:,.0f} / {s['nodes']['p99']:,.0f} | "
            f"{s['edges']['p50']:,.0f} / {s['edges']['p99']:,.0f} | {s['facts_read']['p50']:,.0f} / {s['facts_read']['p99']:,.0f} | "
            f"{s['budget_hit']} of {s['starts']} | {s['heap_peak_mib']['p50']} / {s['heap_peak_mib']['p99']} | "
            f"{s['search_ms']['p50']:.0f} / {s['search_ms']['p99']:.0f} |")
    return "\n".join(lines)


def run(results_dir: Path, *, triples: int = GENERATED_TRIPLES, questions: int = QUESTIONS_PER_HOP,
        random_starts: int = RANDOM_STARTS) -> dict[str, Any]:
    """Run both parts, write `results_dir/graph.json`; the result carries its Markdown table."""
    results: dict[str, Any] = {"config": {"questions_per_hop": questions, "seed": SEED, "generated_triples": triples,
                                          "random_starts": random_starts}}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="localkg-bench-graph-") as tmp:
        work = Path(tmp)
        results["metaqa"] = run_metaqa(work, questions)
        results["power_law"] = run_generated(work, triples, random_starts)
    results["seconds"] = round(time.perf_counter() - started, 1)
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "graph.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    results["markdown"] = _markdown(results)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--triples", type=int, default=GENERATED_TRIPLES, help="facts in the generated graph")
    parser.add_argument("--questions", type=int, default=QUESTIONS_PER_HOP, help="MetaQA questions per hop count")
    parser.add_argument("--random-starts", type=int, default=RANDOM_STARTS, help="random start entities")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results", help="folder for graph.json")
    args = parser.parse_args(argv)
    print(run(args.out, triples=args.triples, questions=args.questions, random_starts=args.random_starts)["markdown"])
    return 0


if __name__ == "__main__":
    sys.exit(main())

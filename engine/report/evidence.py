"""A record's evidence as a small graph: entities as nodes, relations as edges, document chunks
as their own nodes linked to the entities they name; each element keeps its source (kg, wiki,
web, domain) so the report can colour it.

Layout data is the hop layer of each node: breadth-first from the record's topic entities over
the KG edges (either direction), documents one layer after the first entity they name. The
browser places layer k in column k, in the order nodes were met, so a graph always looks the
same for the same record.

A document path may carry the model's rewording of its sentences (HydraRAG's knowledge paths,
"A - relation - B"). The report never quotes it as the source: a chunk keeps the source's
sentences as its quote and the model's text apart (`source_and_model_text`), and only the
source's words link a document to the entities it mentions.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

MAX_NODES = 40  # a graph beyond this is unreadable at report size; the rest is counted
MAX_CHUNKS = 12
QUOTE_CHARS = 600


@dataclass
class Evidence:
    """Nodes [label, layer, kind], edges [from, to, relation, source], chunks
    [chunk id, title, quote, source, [the model's rewordings of the quote]] and how many nodes
    were left out. The quote is the source's words only; a chunk's distinct quotes are
    distinct entries."""

    nodes: list[list[Any]] = field(default_factory=list)
    edges: list[list[Any]] = field(default_factory=list)
    chunks: list[list[Any]] = field(default_factory=list)
    left_out: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"n": self.nodes, "e": self.edges, "c": self.chunks, "more": self.left_out}


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _model_wrote_last(path: dict[str, Any], method: str, sentences: list[str]) -> bool:
    """Whether the last of a path's sentences is the model's rewording of the ones before.

    A record says so with `written_by: "model"`. Records written before that field existed
    (no `written_by` key) are read by their shape: a hydra document path holds [window, text],
    where the text is either the model's path or the window itself shown as "title: window"
    (`doc_evidence=sentences`), which contains the window's words."""
    if path.get("written_by") == "model":
        return len(sentences) >= 2
    if "written_by" in path or not method.startswith("hydra") or len(sentences) != 2:
        return False
    window = " ".join(sentences[0].split())[:60]
    return bool(window) and window not in " ".join(sentences[1].split())


def source_and_model_text(path: dict[str, Any], method: str = "") -> tuple[list[str], str]:
    """A path's sentences as (the source's sentences, the model's rewording or "")."""
    sentences = [str(s) for s in path.get("sentences") or []]
    if _model_wrote_last(path, method, sentences):
        return sentences[:-1], sentences[-1]
    return sentences, ""


class _GraphBuilder:
    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.kinds: list[str] = []
        self.labels: list[str] = []
        self.edges: dict[tuple[int, int, str], str] = {}
        self.left_out = 0

    def node(self, label: str, kind: str) -> int | None:
        if label in self.index:
            return self.index[label]
        if len(self.labels) >= MAX_NODES:
            self.left_out += 1
            return None
        self.index[label] = len(self.labels)
        self.labels.append(label)
        self.kinds.append(kind)
        return self.index[label]

    def edge(self, head: int | None, tail: int | None, relation: str, source: str) -> None:
        if head is not None and tail is not None:
            self.edges.setdefault((head, tail, relation), source)


def _layers(count: int, edges: list[tuple[int, int]], starts: list[int]) -> list[int]:
    """Hop distance of each node from the start nodes (unreached: one past the deepest)."""
    neighbours: dict[int, list[int]] = {}
    for a, b in edges:
        neighbours.setdefault(a, []).append(b)
        neighbours.setdefault(b, []).append(a)
    layer = [-1] * count
    queue = deque(starts)
    for start in starts:
        layer[start] = 0
    while queue:
        here = queue.popleft()
        for there in neighbours.get(here, []):
            if layer[there] < 0:
                layer[there] = layer[here] + 1
                queue.append(there)
    deepest = max(layer, default=0)
    return [value if value >= 0 else deepest + 1 for value in layer]


def record_evidence(record: dict[str, Any]) -> Evidence:
    """The evidence graph and quoted chunks of one answer record (any method; io/cot: empty)."""
    graph = _GraphBuilder()
    topics = [str(t.get("label") or t.get("id") or "") for t in record.get("topic_entities") or []
              if isinstance(t, dict)]
    starts = [i for t in topics if t and (i := graph.node(t, "topic")) is not None]
    method = str(record.get("method") or "")
    chunks: list[list[Any]] = []
    documents: list[tuple[int, str]] = []  # (doc node, its text), linked to entities afterwards
    for path in record.get("paths") or []:
        if not isinstance(path, dict):
            continue
        source = str(path.get("source") or "kg")
        for triple in path.get("triples") or []:
            if isinstance(triple, list | tuple) and len(triple) == 3:
                head, relation, tail = (str(x) for x in triple)
                graph.edge(graph.node(head, "entity"), graph.node(tail, "entity"), relation, source)
        sentences, model_text = source_and_model_text(path, method)
        titles = [str(t) for t in path.get("titles") or []]
        for position, chunk_id in enumerate(path.get("chunk_ids") or []):
            title = titles[position] if position < len(titles) else ""
            quote = " ".join(sentences) if len(path.get("chunk_ids") or []) == 1 else (
                sentences[position] if position < len(sentences) else "")
            entry = [str(chunk_id), title, _clip(quote, QUOTE_CHARS), source, []]
            same = next((c for c in chunks if c[:3] == entry[:3]), None)
            if same is None and len(chunks) < MAX_CHUNKS:
                same = entry
                chunks.append(entry)
            if same is not None and model_text and _clip(model_text, QUOTE_CHARS) not in same[4]:
                same[4].append(_clip(model_text, QUOTE_CHARS))
            doc = graph.node(f"{title or chunk_id} [{chunk_id}]", source)
            if doc is not None:
                documents.append((doc, f"{title} {quote}".casefold()))
    entity_nodes = [i for i, kind in enumerate(graph.kinds) if kind in ("topic", "entity")]
    for doc, text in documents:
        for entity in entity_nodes:
            if graph.labels[entity].casefold() in text:
                graph.edge(entity, doc, "mentions", graph.kinds[doc])
    edge_list = list(graph.edges.items())
    layers = _layers(len(graph.labels), [(a, b) for (a, b, _), _ in edge_list], starts)
    return Evidence(
        nodes=[[label, layers[i], graph.kinds[i]] for i, label in enumerate(graph.labels)],
        edges=[[a, b, relation, source] for (a, b, relation), source in edge_list],
        chunks=chunks, left_out=graph.left_out)

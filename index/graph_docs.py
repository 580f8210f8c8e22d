"""The documents an index writes from its own graph (`--kg-as-docs`): their ids, and a test for
them. Such a document states nothing the graph does not hold; the documents of the facts that
`--kg-keep` left out (`dropped_as_docs`, ids "dropped-...") do.

    restates_graph("kgdoc-0012419#0")   # True: a chunk of a document written from the graph
    restates_graph("dropped-0000003#0") # False
"""

from __future__ import annotations

GRAPH_DOC_PREFIX = "kgdoc"


def restates_graph(chunk_or_doc_id: str) -> bool:
    """Whether a document, or a chunk of one, was written from the graph's own facts."""
    return chunk_or_doc_id.startswith(f"{GRAPH_DOC_PREFIX}-")

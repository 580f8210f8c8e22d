"""Opening a KG: the embedded store of an index folder, or a SPARQL endpoint."""

from __future__ import annotations

from pathlib import Path

from engine.access.kg_protocol import KnowledgeGraph
from engine.access.oxigraph_kg import OxigraphKG
from engine.access.sparql_endpoint_kg import SparqlEndpointKG
from index.paths import IndexPaths
from ingest.base.errors import IndexError_


def open_kg(index: Path | None = None, endpoint: str | None = None) -> KnowledgeGraph:
    """The KG of an index folder, or of a SPARQL endpoint URL when one is given (asked `ASK {}`
    once, so a wrong URL fails here rather than on every question)."""
    if endpoint:
        remote = SparqlEndpointKG(endpoint)
        remote.check()
        return remote
    if index is None:
        raise IndexError_("give an index folder or a SPARQL endpoint")
    return OxigraphKG.open(IndexPaths(index))

"""`open_index`: one index folder as an object; ask it questions, inspect its KG and documents.

    kg = open_index("data/indexes/demo")
    answer = kg.ask("Who founded Kestrel Cell Works?", method="tog", llm="qwen2.5-coder-0.5b")

An `Index` keeps each model it opened (one method context per model and cache setting) until
`close()`, so a notebook loads a model once however many questions it asks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.api.answers import Answer
from engine.api.options import method_options
from ingest.base.errors import InputError

if TYPE_CHECKING:
    from engine.access.sparql_sandbox import QueryAnswer
    from engine.llm.protocol import LLM
    from engine.methods.context import Context


class Index:
    """An index folder (manifest, KG store, entity and relation tables, chunks, vectors), or its
    KG served by a SPARQL endpoint (`kg_endpoint`) with everything else from the folder."""

    def __init__(self, path: str | Path, *, kg_endpoint: str | None = None) -> None:
        self.path = Path(path)
        self.kg_endpoint = kg_endpoint
        self._contexts: dict[tuple[Any, bool], Context] = {}
        self._owned: list[Context] = []  # contexts whose model this index opened (and closes)

    def __repr__(self) -> str:
        return f"Index({str(self.path)!r}" + (f", kg_endpoint={self.kg_endpoint!r})" if self.kg_endpoint else ")")

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the models this index opened (a model passed in as an object stays open)."""
        owned, self._owned, self._contexts = self._owned, [], {}
        for ctx in owned:
            ctx.close()

    # ---- answering ---------------------------------------------------------------------------

    def context(self, llm: str | Path | LLM | None = None, *, cache: bool = True) -> Context:
        """The method context over this index and the model `llm` (a registry name, a .gguf
        path, a server URL, an open LLM, or None: the default model), opened once."""
        from engine.runs.context import open_context

        spec = str(llm) if isinstance(llm, Path) else llm
        key = (spec if spec is None or isinstance(spec, str) else id(spec), cache)
        if key not in self._contexts:
            self._contexts[key] = open_context(self.path, spec, cache=cache, kg_endpoint=self.kg_endpoint)
            if spec is None or isinstance(spec, str):
                self._owned.append(self._contexts[key])
        return self._contexts[key]

    def ask(self, question: str, *, method: str = "tog", llm: str | Path | LLM | None = None,
            options: Mapping[str, Any] | None = None, topics: Iterable[str] = (), answers: Iterable[str] = (),
            cache: bool = True, on_call: Callable[[Any], None] | None = None, **option_values: Any) -> Answer:
        """Answer `question` with `method`. Method options come as `options` (a dict) or keyword
        arguments, checked as `--set` is (OptionError names a wrong one); `topics` are topic
        entities (ids or names) instead of linking; `answers`, gold answers to score against
        (`Answer.correct`); `on_call` sees each LLM call as it ends. A question-level failure
        is the Answer's `error`; a model that cannot be used raises (ModelError)."""
        from engine.questions.record import Question
        from engine.runs.answer import answer_question
        from engine.runs.run_folder import writable

        overrides = method_options(method, options, **option_values)
        ctx = self.context(llm, cache=cache)
        asked = Question("ask", question, answers=list(answers), topic_entities=list(topics))
        record = answer_question(method, asked, ctx, overrides, on_call=on_call)
        if self.kg_endpoint:
            record.extra["kg_endpoint"] = self.kg_endpoint
        data, _replaced = writable(record.to_dict())  # a model's reply may hold lone surrogates
        return Answer.from_dict(data)

    # ---- the index's content -------------------------------------------------------------------

    def manifest(self) -> dict[str, Any]:
        """manifest.json: sources, options and counts of each build stage."""
        from index.manifest import read_manifest
        from index.paths import IndexPaths

        return read_manifest(IndexPaths(self.path))

    def kg_stats(self) -> dict[str, Any]:
        """Fact triples, entities, relations, rejects and sources of the KG (`kg stats --json`)."""
        from index.manifest import kg_stats

        stats = kg_stats(self.manifest())
        if stats is None:
            raise InputError(f"{self.path}: index has no KG (was it built with --kg?)")
        return stats

    def docs_stats(self) -> dict[str, Any]:
        """Documents, chunks, linked documents and collections (`docs stats --json`)."""
        from engine.access.documents import document_stats
        from index.paths import IndexPaths

        self.manifest()
        return document_stats(IndexPaths(self.path))

    def entity(self, name: str) -> tuple[str, str]:
        """(id, label) of the entity with this label, alias or id; InputError when none."""
        from index.entities import EntityTable
        from index.paths import IndexPaths

        table = EntityTable.open(IndexPaths(self.path))
        entity = table.resolve(name)
        if entity is None:
            raise InputError(f"no entity named or with id {name!r} in {self.path}")
        return entity, table.label(entity)

    def relations(self, entity: str, direction: str = "both") -> dict[str, Any]:
        """{entity, label, relations: [{id, label, direction}]} of an entity (`kg relations`)."""
        from engine.access.open_kg import open_kg

        entity_id, label = self.entity(entity)
        kg = open_kg(self.path, self.kg_endpoint)
        rows = [{"id": r.id, "label": kg.relation_label(r.id), "direction": r.direction}
                for r in kg.relations_of(entity_id, direction)]  # type: ignore[arg-type]
        return {"entity": entity_id, "label": label, "relations": rows}

    def tails(self, entity: str, relation: str, direction: str = "both",
              limit: int | None = None) -> dict[str, Any]:
        """{entity, relation, tails: [{id, label, literal, direction}]} (`kg tails`)."""
        from engine.access.kg_protocol import is_literal
        from engine.access.open_kg import open_kg
        from engine.access.relations import RelationTable
        from index.paths import IndexPaths

        entity_id, _label = self.entity(entity)
        relation_id = RelationTable.open(IndexPaths(self.path)).resolve(relation)
        if relation_id is None:
            raise InputError(f"no relation named {relation!r} in {self.path} (see `kg relations`)")
        kg = open_kg(self.path, self.kg_endpoint)
        rows = [{"id": None if is_literal(tail) else tail, "label": kg.label(tail),
                 "literal": is_literal(tail), "direction": d}
                for d in (["out", "in"] if direction == "both" else [direction])
                for tail in kg.tails(entity_id, relation_id, d, limit=limit)]  # type: ignore[arg-type]
        return {"entity": entity_id, "relation": relation_id, "tails": rows}

    def sparql(self, query: str, timeout: float = 30.0) -> QueryAnswer | Any:
        """A read-only SPARQL query: on the index's store in a child process without network
        (a QueryAnswer), or on the endpoint when the index has one (its parsed answer)."""
        return sparql(query, index=None if self.kg_endpoint else self.path,
                      kg_endpoint=self.kg_endpoint, timeout=timeout)

    def link(self, question: str, topics: Iterable[str] = (), threshold: float = 0.8) -> list[dict[str, Any]]:
        """Entities of the question: [{mention, entity, label, score, reason}] (`link`)."""
        from engine.access.linking import EntityLinker
        from index.paths import IndexPaths

        linker = EntityLinker.open(IndexPaths(self.path), None, threshold)
        return [c.to_dict() for c in linker.link(question, list(topics) or None)]

    def _documents(self) -> Any:
        from engine.access.documents import ParquetDocumentStore
        from index.paths import IndexPaths

        self.manifest()
        return ParquetDocumentStore(IndexPaths(self.path))

    def search(self, text: str, k: int = 5, mode: str = "dense",
               collection: str | None = None) -> list[dict[str, Any]]:
        """The k best chunks for `text`: dense (FAISS) or sparse (BM25) (`docs search`)."""
        store = self._documents()
        search = store.dense_search if mode == "dense" else store.sparse_search
        return [hit.to_dict() for hit in search(text, k, collection)]

    def chunks(self, entity: str, limit: int | None = None) -> list[dict[str, Any]]:
        """The chunks of the documents linked to an entity (`docs chunks`), score 1.0."""
        from dataclasses import asdict

        entity_id, _label = self.entity(entity)
        return [asdict(r) | {"score": 1.0} for r in self._documents().chunks_of(entity_id, limit)]


def open_index(path: str | Path, *, kg_endpoint: str | None = None) -> Index:
    """Open an index folder (a clear LocalkgError when it is none); `kg_endpoint`: a SPARQL 1.1
    endpoint that serves its KG instead of the folder's store."""
    index = Index(path, kg_endpoint=kg_endpoint)
    index.manifest()
    return index


def sparql(query: str, *, index: str | Path | None = None, kg_endpoint: str | None = None,
           timeout: float = 30.0) -> QueryAnswer | Any:
    """Run a read-only SPARQL query on an endpoint (its parsed answer, or N-Triples text) or on
    an index's store (a QueryAnswer, from a child process that cannot open a socket)."""
    if kg_endpoint:
        from engine.access.sparql_endpoint_kg import SparqlEndpointKG

        return SparqlEndpointKG(kg_endpoint, timeout=timeout).sparql(query)
    if index is None:
        raise InputError("give --index or --kg-endpoint")
    from engine.access.sparql_sandbox import run_user_query

    return run_user_query(Path(index), query, timeout)

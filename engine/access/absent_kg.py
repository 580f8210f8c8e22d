"""`AbsentKG`: the `KnowledgeGraph` of an index built from documents only.

Document methods (rag, io, cot, sc) never touch the KG, so a documents-only index opens for
them; a KG method (tog, tog-r) fails on its first KG access with an error that says so, which
the run records as that question's error.
"""

from __future__ import annotations

from collections import Counter
from typing import NoReturn

from engine.access.kg_protocol import Direction, Directions, Edges, Relation
from ingest.base.errors import IndexError_


class AbsentKG:
    """Every access raises IndexError_ naming the index and what to do."""

    def __init__(self, root: object) -> None:
        self.message = (
            f"{root}: index has no KG (it was built from documents only); KG methods such as tog and "
            "tog-r need an index built with --kg, document methods (rag) work on this one"
        )

    def _fail(self) -> NoReturn:
        raise IndexError_(self.message)

    def label(self, node: str) -> str:
        self._fail()

    def relation_label(self, relation: str) -> str:
        self._fail()

    def relations_of(self, entity: str, direction: Directions = "both") -> list[Relation]:
        self._fail()

    def tails(self, entity: str, relation: str, direction: Direction = "out", limit: int | None = None) -> list[str]:
        self._fail()

    def edges(self, entity: str, direction: Direction, limit: int | None = None) -> Edges:
        self._fail()

    def back_relations(self, relation: str, limit: int) -> tuple[int, Counter[str]]:
        self._fail()

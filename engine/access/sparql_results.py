"""SPARQL answers as text, as `kg sparql` prints them: JSON (ASK: a boolean, SELECT: rows),
N-Triples lines for CONSTRUCT/DESCRIBE, and an endpoint's N-Triples text as it came."""

from __future__ import annotations

import json
from typing import Any


def sparql_text(answer: Any) -> str:
    """The printed form of a query's answer, ending with a newline (empty for no triples).

    `answer`: a sandbox QueryAnswer (boolean, rows or triples), or an endpoint's answer (text for
    CONSTRUCT/DESCRIBE, else parsed JSON)."""
    if isinstance(answer, str):
        return answer
    triples = getattr(answer, "triples", None)
    if triples is not None:
        return "".join(f"{line}\n" for line in triples)
    if hasattr(answer, "rows"):
        answer = answer.boolean if answer.boolean is not None else answer.rows
    return json.dumps(answer, ensure_ascii=False, indent=2, default=str) + "\n"

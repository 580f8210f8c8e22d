"""localkg: offline knowledge-graph indexing and question answering, as a Python API.

    import localkg
    kg = localkg.open_index("data/indexes/demo")
    answer = kg.ask("Who founded Kestrel Cell Works?", method="tog", llm="qwen2.5-coder-0.5b")

A thin re-export of `engine.api` (the code lives there); docs/python-api.md shows it in use.
"""

from __future__ import annotations

from engine.api import *  # noqa: F403
from engine.api import __all__ as __all__

__version__ = "0.1.0"

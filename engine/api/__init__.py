"""The Python API (`import localkg` re-exports it): open an index and ask it questions with any
method and model, run batches, evaluate and report them, build indexes, manage models.

    import localkg
    kg = localkg.open_index("data/indexes/demo")
    answer = kg.ask("Who founded Kestrel Cell Works?", method="tog", llm="qwen2.5-coder-0.5b")

`cli.py` calls this API and nothing deeper. Module-level imports stay light (heavy ones happen
inside the functions), so `import localkg` and `cli.py --help` are fast. docs/python-api.md
shows it in use.
"""

from __future__ import annotations

from engine.access.sparql_results import sparql_text
from engine.api import lines
from engine.api.answers import Answer
from engine.api.build import FREEBASE_DROP_PREFIXES, IndexOptions, build_index, read_index_recipe
from engine.api.errors import user_error_message
from engine.api.index import Index, open_index, sparql
from engine.api.models import (
    chat,
    embed_texts,
    embeddings_server,
    export_embedder,
    install_model,
    list_models,
    load_plugins,
    methods,
    models_json,
    verify_model,
)
from engine.api.options import OptionError, method_options
from engine.api.runs import batch, check_scores, evaluate, format_evaluation, report, show
from engine.api.terminal import call_printer, print_answer, repair_argument
from index.recipe import OptionShape, Recipe, read_recipe
from ingest.base.errors import IndexError_, InputError, LocalkgError, ModelError

__all__ = [
    "FREEBASE_DROP_PREFIXES",
    "Answer",
    "Index",
    "IndexError_",
    "IndexOptions",
    "InputError",
    "LocalkgError",
    "ModelError",
    "OptionError",
    "OptionShape",
    "Recipe",
    "batch",
    "build_index",
    "call_printer",
    "chat",
    "check_scores",
    "embed_texts",
    "embeddings_server",
    "evaluate",
    "export_embedder",
    "format_evaluation",
    "install_model",
    "lines",
    "list_models",
    "load_plugins",
    "method_options",
    "methods",
    "models_json",
    "open_index",
    "print_answer",
    "read_index_recipe",
    "read_recipe",
    "repair_argument",
    "report",
    "show",
    "sparql",
    "sparql_text",
    "user_error_message",
    "verify_model",
]

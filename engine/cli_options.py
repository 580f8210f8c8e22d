"""The click options of cli.py's commands, declared here so that cli.py holds only the commands
(each parses its flags, calls the API and prints what it returns).

A name ending in `_option` is one option that several commands share; a name ending in
`_options` is the option list of one command, in the order its `--help` shows them. Each use of
either adds its own copies of the options. This module imports click and nothing of the
project: what a declaration needs from the API (the recipe callback of `index --config`, the
default Freebase drop list) cli.py passes in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

Decorator = Callable[[Any], Any]


def stack(*decorators: Decorator) -> Decorator:
    """The decorators as one, applied as if written one above the other in this order."""

    def apply(fn: Any) -> Any:
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn

    return apply


# --------------------------------------------------------------------------------------------
# options several commands share
# --------------------------------------------------------------------------------------------

index_option = click.option("--index", "index", required=True, type=click.Path(path_type=Path), help="Index folder.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")
llm_option = click.option("--llm", "llm", default=None, metavar="NAME_OR_PATH_OR_URL",
                          help="Registry model name, .gguf path or http(s)://host:port/v1 server (default model if omitted).")
no_cache_option = click.option("--no-cache", is_flag=True, help="Bypass the persistent LLM response cache.")
embed_model_option = click.option("--embed-model", type=click.Path(path_type=Path), default=None,
                                  help="Local sentence-transformers folder (default: the packaged all-MiniLM-L6-v2).")
kg_endpoint_option = click.option(
    "--kg-endpoint", "kg_endpoint", default=None, metavar="URL",
    help="SPARQL 1.1 endpoint (Oxigraph server, QLever, Virtuoso) that serves the KG instead of the "
    "index's store; entities, relations, documents and vectors still come from --index.",
)
set_option = click.option(
    "--set", "settings", multiple=True, metavar="[METHOD.]KEY=VALUE",
    help="Override a method config value (JSON value), e.g. --set depth=2 or --set tog.width=2. "
         "Repeatable; `python cli.py methods --json` lists every key and default.")
plugin_option = click.option(
    "--plugin", "plugins", multiple=True, metavar="MODULE",
    help="Import MODULE first; it may add methods with engine.methods.registry.register. Repeatable.")

# --------------------------------------------------------------------------------------------
# index
# --------------------------------------------------------------------------------------------


class _VectorScope(click.Choice):  # type: ignore[type-arg]
    """--vectors none|linked|all; a recipe's `vectors = true/false` (older recipes) is all/none."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, bool):
            return "all" if value else "none"
        return super().convert(value, param, ctx)


def index_options(config_callback: Callable[..., Any], freebase_drop_prefixes: Sequence[str]) -> Decorator:
    """The options of `index`; `--config FILE` calls `config_callback` first (eager), which makes
    the recipe's values the defaults of the other options."""
    return stack(*_index_source_options(config_callback, freebase_drop_prefixes), *_index_build_options())


def _index_source_options(config_callback: Callable[..., Any], freebase_drop_prefixes: Sequence[str]) -> list[Decorator]:
    """`index`: the recipe, the output folder, the sources and how they are read."""
    return [
        click.option(
            "--config", "config", type=click.Path(dir_okay=False, path_type=Path), default=None, is_eager=True,
            expose_value=False, callback=config_callback,
            help="Build what this TOML recipe describes (keys: the long names of these options; [[kg]] / [[docs]] "
            "tables of path, format, collection; relative paths from the file's folder). Options given here override it.",
        ),
        click.option("--out", "out", required=True, type=click.Path(path_type=Path), help="Index folder to create or update (or `out` in the --config recipe)."),
        click.option("--kg", "kg", multiple=True, type=click.Path(path_type=Path), help="KG source file (or MetaQA folder). Repeatable."),
        click.option(
            "--kg-format",
            multiple=True,
            type=click.Choice(["auto", "ntriples", "nquads", "turtle", "freebase", "wikidata", "wikidata-json", "tsv", "metaqa"]),
            help="Format of each --kg (once for all, or once per --kg). Default: auto.",
        ),
        click.option("--docs", "docs", multiple=True, type=click.Path(path_type=Path), help="Document source (file or folder). Repeatable."),
        click.option(
            "--docs-format",
            multiple=True,
            type=click.Choice(["auto", "jsonl", "wikipedia-xml", "wikiextractor", "files", "hotpot"]),
            help="Format of each --docs (once for all, or once per --docs). Default: auto.",
        ),
        click.option(
            "--collection",
            multiple=True,
            type=click.Choice(["wiki", "web", "domain"]),
            help="Collection of each --docs: wiki (entity pages), web (free text), domain (entity-linked). Default: wiki.",
        ),
        click.option(
            "--docs-map", "docs_map", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
            help="CSV with the header file,entity[,title]: the entity (IRI, Q42, or a KG entity's label) of each document "
            "file of a `files` source, paths relative to the CSV. Repeatable. Files may also say `entity:` in front matter.",
        ),
        click.option("--languages", default=None, help="Comma-separated languages kept for labels and literals. Default: en."),
        click.option("--kg-keep", type=click.FloatRange(0.0, 1.0), default=None, help="Keep this seeded fraction of KG facts (incomplete-KG experiments). Default: 1."),
        click.option("--seed", type=int, default=None, help="Seed for --kg-keep. Default: 0."),
        click.option("--dropped-as-docs/--no-dropped-as-docs", default=None, help="Render facts dropped by --kg-keep as wiki documents about their head entity. Default: off."),
        click.option("--kg-as-docs/--no-kg-as-docs", default=None, help="Also render every KG fact as a sentence in a wiki document about its head entity (the corpus of `rag` on KG-only benchmarks). Default: off."),
        click.option(
            "--freebase-drop",
            multiple=True,
            metavar="PREFIX",
            help="Drop Freebase predicates whose local name starts with PREFIX (repeatable; replaces the default list; "
            "`none` drops none). Names, aliases and descriptions are never dropped. Default: "
            + ", ".join(freebase_drop_prefixes),
        ),
        click.option("--keep-external-ids/--no-keep-external-ids", default=None, help="Wikidata: keep the statements of external-identifier properties (VIAF, GND... ids) as facts. Default: left out, and counted in the summary."),
        click.option("--header/--no-header", "tsv_header", default=None, help="TSV/CSV: the first row is (or is not) a header row of column names. Default: detected (head,relation,tail / subject,predicate,object / source,relation,target...)."),
        click.option("--delimiter", "tsv_delimiter", default=None, metavar="SEP", help="TSV/CSV field separator: tab, comma, semicolon, pipe or any one character. Default: comma for .csv, else tab."),
        click.option("--allow-empty/--no-allow-empty", default=None, help="Build even when a KG source yields no fact and no label (the build fails otherwise, naming the source and why). Default: off."),
    ]


def _index_build_options() -> list[Decorator]:
    """`index`: chunking, embeddings, vectors, the BM25 engine, a KG from documents, rebuilds."""
    return [
        click.option("--chunk-size", type=click.IntRange(100, 20000), default=None, help="Chunk size in characters. Default: 1000."),
        click.option("--chunk-overlap", type=click.IntRange(0, 5000), default=None, help="Chunk overlap in characters. Default: 150."),
        embed_model_option,
        click.option(
            "--embed-backend", "embed_backend", type=click.Choice(["torch", "onnx", "onnx-int8", "server"]), default=None,
            help="How chunks and labels are embedded: torch (sentence-transformers, fp32), onnx (ONNX Runtime, fp32), "
            "onnx-int8 (int8 weights, about 3x torch's speed on a CPU; `make bench`), server (--embed-server). "
            "Queries use the backend the index was built with. Default: torch.",
        ),
        click.option(
            "--embed-server", "embed_server", default=None, metavar="URL",
            help="An OpenAI-compatible /v1/embeddings server (e.g. http://127.0.0.1:8090/v1; `cli.py embed serve` runs one); "
            "--embed-model is then the model name sent to it (default: the first it lists).",
        ),
        click.option("--faiss", "faiss_kind", type=click.Choice(["auto", "flat", "hnsw", "ivfpq"]), default=None, help="FAISS index kind (auto picks by size). Default: auto."),
        click.option(
            "--vectors", "vectors", type=_VectorScope(["none", "linked", "all"]), is_flag=False, flag_value="all", default=None,
            help="Which chunks get vectors (dense search, rag): all; linked (only chunks of documents linked to an entity, "
            "those tog2 and hydra read; dense search covers only them); none (chunks and BM25 only, for corpora too large "
            "to embed; methods that score an entity's chunks at query time still work). Entity labels are embedded unless "
            "none. `--vectors` alone: all. Default: all.",
        ),
        click.option("--no-vectors", "no_vectors", is_flag=True, default=False, help="The same as --vectors none."),
        click.option(
            "--sparse", "sparse", type=click.Choice(["bm25s", "tantivy"]), default=None,
            help="BM25 engine: bm25s (built in memory; about 3 GiB per million chunks, see README) or tantivy (built on "
            "disk with bounded memory: for Wikipedia-sized corpora). Default: bm25s.",
        ),
        click.option(
            "--kg-from-docs", "kg_from_docs", type=click.Choice(["none", "mentions", "mentions-ignore-case"]), default=None,
            help="An index without --kg gets a KG from its documents: each title is an entity, and `mentions` links a "
            "document's entity to every other title its text mentions (whole words; mentions-ignore-case ignores case). Default: none.",
        ),
        click.option(
            "--replace",
            "replace_sources",
            is_flag=True,
            help="Forget the sources and options recorded by earlier builds: index only the sources given now, "
            "with the options given now (others at their defaults). Stages whose inputs are unchanged are still reused.",
        ),
        click.option("--rebuild", is_flag=True, help="Run every stage even if its inputs are unchanged."),
    ]


# --------------------------------------------------------------------------------------------
# kg, docs, link
# --------------------------------------------------------------------------------------------

stats_options = stack(index_option, json_option)  # kg stats, docs stats

kg_relations_options = stack(
    index_option,
    kg_endpoint_option,
    click.option("--entity", required=True, help="Entity label, alias or id (IRI, m.0abc, Q42)."),
    click.option("--direction", type=click.Choice(["out", "in", "both"]), default="both", show_default=True),
    json_option,
)

kg_tails_options = stack(
    index_option,
    kg_endpoint_option,
    click.option("--entity", required=True, help="Entity label, alias or id."),
    click.option("--relation", required=True, help="Relation IRI, label or local name."),
    click.option("--direction", type=click.Choice(["out", "in", "both"]), default="both", show_default=True, help="out: entity -> relation -> tail; in: tail -> relation -> entity."),
    click.option("--limit", type=click.IntRange(1), default=None, help="At most this many tails per direction (a stable sample)."),
    json_option,
)

kg_sparql_options = stack(
    click.option("--index", "index", type=click.Path(path_type=Path), default=None,
                 help="Index folder (not needed with --kg-endpoint)."),
    click.option("--kg-endpoint", "kg_endpoint", default=None, metavar="URL",
                 help="Send the query to this SPARQL 1.1 endpoint instead of the index's store."),
    click.option("--timeout", "timeout", type=click.FloatRange(min=0, min_open=True), default=30.0,
                 show_default=True, metavar="SECONDS",
                 help="Stop the query after this many seconds (exit 2)."),
)

docs_search_options = stack(
    index_option,
    click.option("--k", "k", type=click.IntRange(1, 1000), default=5, show_default=True, help="Number of chunks to return."),
    click.option("--mode", type=click.Choice(["dense", "sparse"]), default="dense", show_default=True,
                 help="dense: embedding similarity (FAISS); sparse: BM25."),
    click.option("--collection", type=click.Choice(["wiki", "web", "domain"]), default=None,
                 help="Search only this collection (default: all)."),
    click.option("--json", "as_json", is_flag=True, help="Print a JSON list of {chunk_id, doc_id, entity, title, text, score}."),
)

docs_chunks_options = stack(
    index_option,
    click.option("--entity", required=True, help="Entity label, alias or id (IRI, m.0abc, Q42)."),
    click.option("--limit", type=click.IntRange(1), default=None, help="At most this many chunks."),
    json_option,
)

link_options = stack(
    index_option,
    click.option("--topic", multiple=True, help="A pre-linked topic entity id (m.0abc, Q42, IRI); repeatable. Skips mention extraction."),
    click.option("--threshold", type=click.FloatRange(0.0, 1.0), default=0.8, show_default=True,
                 help="Minimum cosine for label-embedding matches."),
    click.option("--json", "as_json", is_flag=True, help="Print a JSON list of {mention, entity, label, score, reason}."),
)

# --------------------------------------------------------------------------------------------
# embed, models, chat
# --------------------------------------------------------------------------------------------

embed_export_options = stack(
    embed_model_option,
    click.option("--force", is_flag=True, help="Export again even if an export with this recipe exists."),
)

embed_serve_options = stack(
    click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every interface)."),
    click.option("--port", type=click.IntRange(0, 65535), default=8090, show_default=True, help="Port (0: any free one; the URL is printed)."),
    embed_model_option,
    click.option("--embed-backend", type=click.Choice(["torch", "onnx", "onnx-int8"]), default="torch", show_default=True,
                 help="How the server computes vectors. An index built through the server records the served name; "
                 "serve one model under one name."),
    click.option("--name", "served_name", default=None, help="The model name the server reports (default: the model's name)."),
)

embed_texts_options = stack(
    click.option("--embed-model", default=None, help="Model folder (local backends) or the served model name (server)."),
    click.option("--embed-backend", type=click.Choice(["torch", "onnx", "onnx-int8", "server"]), default=None, help="Default: torch, or server with --embed-server."),
    click.option("--embed-server", default=None, metavar="URL", help="An OpenAI-compatible /v1/embeddings server."),
)

models_list_options = click.option(
    "--json", "as_json", is_flag=True, help="Print a JSON list of {name, role, path, installed, verified, size, sha256}.")

models_verify_options = click.option(
    "--sha256", "sha256", default=None, metavar="HEX",
    help="The digest the file must have (e.g. `model.sha256` in a batch run's run.json).")

chat_options = stack(
    click.option("--llm", "llm_spec", default=None, metavar="NAME_OR_PATH_OR_URL",
                 help="Registry model name, path to a .gguf file, or http(s)://host:port/v1 "
                 "server (default: qwen2.5-coder-0.5b)."),
    click.option("--schema", "schema_file", type=click.Path(dir_okay=False, path_type=Path),
                 help="JSON schema file: the reply is decoded under it and parsed."),
    click.option("--system", default=None, help="System message (the fixed part of the prompt)."),
    click.option("--temperature", type=float, default=0.0, show_default=True),
    click.option("--max-tokens", type=int, default=256, show_default=True),
    click.option("--seed", type=int, default=0, show_default=True),
    click.option("--n-ctx", type=int, default=4096, show_default=True, help="Context window."),
    click.option("--no-cache", is_flag=True, help="Bypass the persistent response cache."),
    click.option("--json", "as_json", is_flag=True, help='Print {"text", "parsed", "usage"} as JSON.'),
)

# --------------------------------------------------------------------------------------------
# methods, ask, batch, eval, report, show, check-scores
# --------------------------------------------------------------------------------------------

methods_options = stack(
    click.option("--json", "as_json", is_flag=True, help="Print names, summaries and default configs as JSON."),
    plugin_option,
)

ask_options = stack(
    index_option,
    click.option("--method", default="tog", show_default=True, metavar="METHOD",
                 help="One of the registered methods (`python cli.py methods` lists them)."),
    llm_option,
    no_cache_option,
    set_option,
    click.option("--topic", "topics", multiple=True, metavar="ID_OR_NAME",
                 help="Topic entity (id or name) instead of linking. Repeatable."),
    kg_endpoint_option,
    plugin_option,
    click.option("--json", "as_json", is_flag=True, help="Print the answer record as JSON (with every call's prompts and raw reply)."),
    click.option("--trace", "--verbose", "-v", "trace", is_flag=True,
                 help="Print every LLM call's messages and raw reply as it happens (to stderr)."),
)

batch_options = stack(
    index_option,
    click.option("--questions", required=True, type=click.Path(path_type=Path),
                 help="Question file: MetaQA qa_*.txt, PathQuestion PQ-*.txt, ToG / ToG-2 / HydraRAG JSON, or JSONL. "
                      "Text that is not UTF-8, lone surrogates and control characters become U+FFFD (a warning "
                      "names file and line); a line of the wrong shape stops the run with its file and line."),
    click.option("--methods", required=True, help="Comma-separated methods, e.g. io,cot,tog (`python cli.py methods` lists them)."),
    click.option("--out", "out", required=True, type=click.Path(path_type=Path),
                 help="Run folder: <method>.jsonl per method and run.json. Rerun the same command to resume."),
    llm_option,
    click.option("--format", "fmt", type=click.Choice(["auto", "metaqa", "pathquestion", "json", "jsonl"]),
                 default="auto", show_default=True, help="Question file format."),
    click.option("--limit", type=click.IntRange(1), default=None, help="Only the first N (selected) questions."),
    click.option("--sample", type=click.IntRange(1), default=None, help="A seeded random sample of N questions (kept in file order)."),
    click.option("--seed", type=int, default=0, show_default=True, help="Seed for --sample."),
    click.option("--workers", type=click.IntRange(1), default=1, show_default=True,
                 help="Worker processes (with --ray: Ray actors), each with its own model; the parent writes the records. "
                 "Each model's llama.cpp threads are the CPUs divided among the workers, less those other processes keep "
                 "busy (LOCALKG_LLM_THREADS overrides)."),
    click.option("--shard", default=None, metavar="K/N",
                 help="Only shard K of N (1 <= K <= N) of the selected questions, by a stable hash of their ids: run "
                 "the N shards anywhere, each with its own --out, then `eval` their folders as one run."),
    click.option("--ray", "ray_address", default=None, metavar="ADDRESS",
                 help="Answer with --workers Ray actors: `local` (a fresh cluster on this machine), `auto`, "
                 "ray://HOST:PORT or HOST:PORT. Needs `pip install ray`."),
    set_option,
    no_cache_option,
    click.option("--retry-errors", is_flag=True, help="Drop records that ended in an error and answer those questions again."),
    click.option("--force-config", is_flag=True, help="Resume even though questions, index, model or a config changed (recorded in run.json)."),
    click.option("--restart", is_flag=True,
                 help="Start the run in --out again: its records move aside into previous-<time>/ (a run that did not "
                 "complete starts again by itself when its setup changed)."),
    kg_endpoint_option,
    plugin_option,
)

eval_options = stack(
    click.option("--json", "as_json", is_flag=True,
                 help='Print the full evaluation as JSON instead of Markdown (several runs: {"runs": [...]}).'),
    click.option("--metric", "metrics", multiple=True, metavar="NAME",
                 help="Several runs: compare this metric (repeatable; default hits1, em, f1_tok, abstained, "
                      "llm_calls, prompt_tokens)."),
)

report_options = stack(
    click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
                 help="The HTML file to write (self-contained: opens offline)."),
    click.option("--prompt-chars", type=click.IntRange(0, None), default=6000, show_default=True,
                 help="Keep at most this many characters of each prompt and reply in the page."),
    click.option("--no-calls", is_flag=True, help="Leave the prompts and replies (calls/) out of the page."),
)

show_options = stack(
    click.option("--method", "method", default=None, help="Only this method (default: every method of the run)."),
    click.option("--prompts", is_flag=True, help="Also print each LLM call's messages and reply."),
)

check_scores_options = stack(
    click.option("--subset", "subsets", multiple=True, metavar="NAME",
                 help="Only entries of this subset: ci, demo, eval, experiments. Repeatable."),
    click.option("--id", "ids", multiple=True, metavar="ID", help="Only this entry. Repeatable."),
    click.option("--no-run", is_flag=True, help="Run no command: only score the run folders that exist."),
    click.option("--fresh", is_flag=True, help="Remove the selected entries' run folders first, so every answer is made "
                 "again (from the response cache where it holds the reply)."),
    click.option("--list", "list_only", is_flag=True, help="List the selected entries and their commands; run nothing."),
    click.option("--file", "file", type=click.Path(path_type=Path), default=None,
                 help="Entries file (default: bench/expected_scores.json)."),
)

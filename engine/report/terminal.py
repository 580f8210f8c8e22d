"""`show RUN QUESTION_ID [--method M]`: one question's evidence in the terminal (rich).

Per method: the prediction against the gold answers (right/wrong as `eval` scores it), the
evidence paths as a tree from the topic entities (each hop a branch, coloured by source), the
quoted chunks with their ids (a model's rewording of a chunk, HydraRAG's knowledge path, shown
beside the quote under its own label, never in quotation marks), and the LLM calls with tokens and seconds; `prompts=True` prints
each call's messages and reply too (from the run's `calls/` transcripts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from engine.questions.answer_match import score_record
from engine.report.evidence import record_evidence, source_and_model_text
from engine.report.loading import method_records, method_transcripts, open_runs
from ingest.base.errors import InputError

COLOURS = {"kg": "blue", "wiki": "green", "web": "dark_orange", "domain": "magenta"}
MODEL_TEXT_LABEL = "model's rewording"  # text the model wrote about a source, not the source's words


def _verdict(record: dict[str, Any]) -> Text:
    scored = score_record(record)
    prediction = str(record.get("prediction") or "(no answer)")
    if record.get("error"):
        return Text(f"⚠ {prediction}", style="yellow")
    if scored is None:
        return Text(prediction)
    return Text(("✓ " if scored.hits1 else "✗ ") + prediction, style="green" if scored.hits1 else "red")


def paths_tree(record: dict[str, Any]) -> Tree:
    """The KG paths as a tree: a branch per hop, shared prefixes merged; document evidence as
    leaves under its source."""
    topics = [str(t.get("label") or t.get("id")) for t in record.get("topic_entities") or [] if isinstance(t, dict)]
    tree = Tree(Text("evidence paths" + (f" from {', '.join(topics)}" if topics else ""), style="bold"))
    method = str(record.get("method") or "")
    branches: dict[tuple[str, ...], Tree] = {}
    for path in record.get("paths") or []:
        if not isinstance(path, dict):
            continue
        source = str(path.get("source") or "kg")
        colour = COLOURS.get(source, "white")
        triples = [t for t in path.get("triples") or [] if isinstance(t, list | tuple) and len(t) == 3]
        if not triples:
            ids = ", ".join(str(c) for c in path.get("chunk_ids") or [])
            leaf = tree.add(Text(f"[{source}] document {ids}", style=colour))
            model_text = source_and_model_text(path, method)[1]
            if model_text:
                leaf.add(Text.assemble((f"{MODEL_TEXT_LABEL}: ", "bold"), (model_text, "italic")))
            continue
        parent, key = tree, ()
        for index, (head, relation, tail) in enumerate(triples):
            key = (*key, str(head), str(relation), str(tail))
            if key not in branches:
                label = Text()
                if index == 0:
                    label.append(str(head), style="bold")
                label.append(f" -{relation}-> " if index == 0 else f"-{relation}-> ", style=colour)
                label.append(str(tail))
                branches[key] = parent.add(label)
            parent = branches[key]
        if path.get("score") is not None:
            parent.label.append(f"  (score {path['score']})", style="dim")  # type: ignore[union-attr]
    if not branches and not tree.children:
        tree.add(Text("no evidence paths", style="dim italic"))
    return tree


def chunks_text(record: dict[str, Any]) -> Text | None:
    """The quoted chunks, one paragraph each: source, chunk id, title and quote (ids kept whole,
    so that they can be copied)."""
    chunks = record_evidence(record).chunks
    if not chunks:
        return None
    text = Text("chunks\n", style="bold")
    for chunk_id, title, quote, source, model_texts in chunks:
        text.append(f"[{source}] ", style=COLOURS.get(source, "white"))
        text.append(chunk_id, style="cyan")
        text.append(f"  {title}\n", style="bold")
        text.append(f"  “{quote}”\n")
        for model_text in model_texts:
            text.append(f"  {MODEL_TEXT_LABEL} (not the source's words): ", style="bold")
            text.append(f"{model_text}\n", style="italic")
    return text


def calls_table(record: dict[str, Any]) -> Table:
    table = Table("#", "stage", "prompt tok", "completion tok", "seconds", "cache", "error", title="LLM calls")
    total = [0, 0, 0.0]
    for n, call in enumerate(c for c in record.get("llm_calls") or [] if isinstance(c, dict)):
        seconds = float(call.get("compute_seconds") or call.get("seconds") or 0.0)
        prompt, completion = int(call.get("prompt_tokens") or 0), int(call.get("completion_tokens") or 0)
        total = [total[0] + prompt, total[1] + completion, total[2] + seconds]
        table.add_row(str(n + 1), str(call.get("stage") or "?"), f"{prompt:,}", f"{completion:,}",
                      f"{seconds:.2f}", "hit" if call.get("cache_hit") else "", str(call.get("error") or ""))
    table.add_row("", Text("total", style="bold"), f"{total[0]:,}", f"{total[1]:,}", f"{total[2]:.2f}", "", "")
    return table


def transcript_panels(calls: list[dict[str, Any]]) -> list[Panel]:
    panels = []
    for n, call in enumerate(calls, 1):
        parts = [Text.assemble((f"{m.get('role')}: ", "bold"), str(m.get("content") or ""))
                 for m in call.get("messages") or [] if isinstance(m, dict)]
        parts.append(Text.assemble(("reply: ", "bold green"), str(call.get("reply") or "")))
        panels.append(Panel(Group(*parts), title=escape(f"call {n}: {call.get('stage')}")))
    return panels


def show_question(run: Path, question_id: str, method: str | None = None, *, prompts: bool = False,
                  console: Console | None = None) -> None:
    """Print one question of a run (every method, or `method`)."""
    console = console or Console()
    source = open_runs([Path(run)])[0]
    methods = [method] if method else source.methods
    if method and method not in source.methods:
        raise InputError(f"{run}: no method {method!r} (the run has {', '.join(source.methods) or 'none'})")
    found = False
    for name in methods:
        records, _ = method_records(source, name)
        record = next((r for r in records if str(r["id"]) == question_id), None)
        if record is None:
            console.print(Text(f"{name}: no record for {question_id}", style="dim"))
            continue
        if not found:
            console.rule(Text(f"{question_id}: {record.get('question')}"))
            console.print(Text.assemble(("gold: ", "bold"), " | ".join(map(str, record.get("answers") or []))))
            found = True
        head = Text.assemble((f"{name}: ", "bold"), _verdict(record),
                             (f"   source {record.get('answer_source')}, {float(record.get('seconds') or 0):.2f} s", "dim"))
        body: list[Any] = [head]
        if record.get("error"):
            body.append(Text(f"error: {record['error']}", style="yellow"))
        body.append(paths_tree(record))
        chunks = chunks_text(record)
        if chunks is not None:
            body.append(chunks)
        body.append(calls_table(record))
        if prompts:
            body += transcript_panels(method_transcripts(source, name).get(question_id, []))
        console.print(Panel(Group(*body), title=escape(name)))
    if not found:
        raise InputError(f"{run}: no record of question {question_id!r}"
                         + (f" for method {method}" if method else ""))

"""An answer record as a terminal shows it (rich): answer, source, topic entities, paths, cost."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.text import Text
from rich.tree import Tree

from engine.questions.record import AnswerRecord

MAX_PATHS = 12


def _cost_line(record: AnswerRecord) -> Text:
    s: dict[str, Any] = record.extra.get("llm_summary") or {}
    text = Text(f"{s.get('calls', len(record.llm_calls))} LLM calls, "
                f"{s.get('prompt_tokens', 0)} prompt tokens ({s.get('cached_tokens', 0)} reused), "
                f"{s.get('completion_tokens', 0)} generated, {s.get('cache_hits', 0)} from the cache; "
                f"{record.seconds:.1f}s", style="dim")
    return text


def _paths_tree(record: AnswerRecord) -> Tree:
    tree = Tree(Text(f"evidence ({len(record.paths)} paths)", style="bold"))
    for path in record.paths[:MAX_PATHS]:
        score = f"  [{path.score:.3f}]" if path.score is not None else ""
        if path.triples:
            node = tree.add(Text(f"{path.source}{score}", style="cyan"))
            for head, relation, tail in path.triples:
                node.add(Text.assemble((head, "bold"), f"  —{relation}→  ", (tail, "bold")))
        else:
            ids = ", ".join(path.chunk_ids)
            node = tree.add(Text(f"{path.source} {ids}{score}", style="cyan"))
            for sentence in path.sentences:
                node.add(Text(sentence if len(sentence) <= 300 else sentence[:299] + "…"))
    if len(record.paths) > MAX_PATHS:
        tree.add(Text(f"… {len(record.paths) - MAX_PATHS} more (see --json)", style="dim"))
    return tree


def _topics(record: AnswerRecord) -> Tree:
    tree = Tree(Text("topic entities", style="bold"))
    for t in record.topic_entities:
        tree.add(Text.assemble((str(t.get("label", "")), "bold"),
                               f"  ({t.get('reason', '')}, {float(t.get('score', 0)):.2f})  ",
                               (str(t.get("id", "")), "dim")))
    return tree


def _trace_tree(trace: list[dict[str, Any]]) -> Tree:
    tree = Tree(Text("exploration", style="bold"))
    for step in trace:
        verdict = {True: "enough", False: "not enough"}.get(step.get("sufficient"), "—")
        node = tree.add(Text(f"depth {step['depth']}: {verdict}"))
        rels = "; ".join(f"{e}: {r}" for e, r in step.get("relations", []))
        node.add(Text(f"relations  {rels or '—'}"))
        node.add(Text(f"entities   {'; '.join(step.get('entities', [])) or '—'}"))
    return tree


def render_record(record: AnswerRecord, console: Console | None = None) -> None:
    """Print the record for a person: answer first, then how it was found."""
    console = console or Console()
    parts: list[Any] = [Text.assemble(("question  ", "dim"), record.question)]
    answer = Text.assemble(("answer    ", "dim"), (record.prediction or "(none)", "bold green"),
                           f"   from {record.answer_source}", (f"  [{record.method}]", "dim"))
    parts.append(answer)
    others = [p for p in record.predictions if p != record.prediction][:5]
    if others:
        parts.append(Text.assemble(("also      ", "dim"), "; ".join(others)))
    if record.error:
        parts.append(Text(f"error: {record.error}", style="bold red"))
    console.print(Group(*parts))
    if record.topic_entities:
        console.print(_topics(record))
    if record.extra.get("trace"):
        console.print(_trace_tree(record.extra["trace"]))
    if record.paths:
        console.print(_paths_tree(record))
    console.print(_cost_line(record))

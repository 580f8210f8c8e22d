"""An answer record as a terminal shows it (rich): answer, source, topic entities, paths, cost;
and one LLM call (its messages and raw reply) for `ask --trace`.

Evidence reads without the code: a document chunk shows its page title with its id
(`"Loop quantum gravity" (wiki 307#5)`), and every score says what it is (`cosine 0.412 to the
question`, `path score 0.333: product of the prune weights ...`)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from rich.console import Console, Group
from rich.text import Text
from rich.tree import Tree

from engine.questions.record import AnswerRecord

MAX_PATHS = 12
MAX_REPLY_CHARS = 4000


def _cost_line(record: AnswerRecord) -> Text:
    s: dict[str, Any] = record.extra.get("llm_summary") or {}
    text = Text(f"{s.get('calls', len(record.llm_calls))} LLM calls, "
                f"{s.get('prompt_tokens', 0)} prompt tokens ({s.get('cached_tokens', 0)} reused), "
                f"{s.get('completion_tokens', 0)} generated, {s.get('cache_hits', 0)} from the cache; "
                f"{record.seconds:.1f}s", style="dim")
    return text


def score_text(score: float | None, kind: str | None) -> str:
    """A score with what it is: "cosine 0.412 to the question", "path score 0.333" (a path
    score's making, "path score: product of ...", goes in the evidence header, once)."""
    if score is None:
        return ""
    if not kind:
        return f"score {score:.3f}"
    if kind.startswith("path score"):
        return f"path score {score:.3f}"
    head, _, rest = kind.partition(" ")
    return f"{head} {score:.3f} {rest}".strip()


def chunk_text(path: Any) -> str:
    """Document evidence by page title and chunk id: `"Title" (wiki 307#5)`."""
    titles = list(getattr(path, "titles", None) or [])
    parts = []
    for i, chunk_id in enumerate(path.chunk_ids):
        title = titles[i] if i < len(titles) and titles[i] else ""
        parts.append(f'"{title}" ({path.source} {chunk_id})' if title else f"{path.source} {chunk_id}")
    return ", ".join(parts) or path.source


def _paths_tree(record: AnswerRecord) -> Tree:
    header = f"evidence ({len(record.paths)} paths)"
    kinds = sorted({p.score_kind for p in record.paths if p.score_kind and p.score_kind.startswith("path score")})
    if kinds:  # say once how a path score is made
        header += "; " + "; ".join(kinds)
    tree = Tree(Text(header, style="bold"))
    for path in record.paths[:MAX_PATHS]:
        scored = score_text(path.score, path.score_kind)
        score = f"  [{scored}]" if scored else ""
        if path.triples:
            node = tree.add(Text(f"{path.source}{score}", style="cyan"))
            for head, relation, tail in path.triples:
                node.add(Text.assemble((head, "bold"), f"  —{relation}→  ", (tail, "bold")))
        else:
            node = tree.add(Text(f"{chunk_text(path)}{score}", style="cyan"))
            written = path.sentences[-1:] if path.written_by == "model" and len(path.sentences) > 1 else []
            for sentence in path.sentences[: len(path.sentences) - len(written)]:
                node.add(Text(sentence if len(sentence) <= 300 else sentence[:299] + "…"))
            for sentence in written:  # the model's words, never shown as the source's
                node.add(Text.assemble(("model's rewording: ", "italic dim"), (sentence[:300], "italic")))
    if len(record.paths) > MAX_PATHS:
        tree.add(Text(f"… {len(record.paths) - MAX_PATHS} more (see --json)", style="dim"))
    return tree


def _topics(record: AnswerRecord) -> Tree:
    tree = Tree(Text("topic entities", style="bold"))
    for t in record.topic_entities:
        tree.add(Text.assemble((str(t.get("label", "")), "bold"),
                               f"  ({t.get('reason', '')}, link score {float(t.get('score', 0)):.2f})  ",
                               (str(t.get("id", "")), "dim")))
    return tree


def _trace_tree(trace: list[dict[str, Any]]) -> Tree:
    """ToG's steps (`depth`, relations as [entity, relation], entity names) and ToG-2's rounds
    (`round`, relations as [entity, relation, score], entities as [name, score], clues)."""
    tree = Tree(Text("exploration", style="bold"))
    for number, step in enumerate(trace):
        verdict = {True: "enough", False: "not enough"}.get(step.get("sufficient"), "—")
        where = (f"depth {step['depth']}" if "depth" in step
                 else f"round {step['round']}" if "round" in step else f"step {number}")
        node = tree.add(Text(f"{where}: {verdict}"))
        if step.get("topics"):
            node.add(Text(f"from       {'; '.join(map(str, step['topics']))}"))
        rels = "; ".join(_step_item(r) for r in step.get("relations", []))
        node.add(Text(f"relations  {rels or '—'}"))
        node.add(Text(f"entities   {'; '.join(_step_item(e) for e in step.get('entities', [])) or '—'}"))
        if step.get("clues"):
            node.add(Text(f"clues      {step['clues']}", style="dim"))
        if step.get("provisional_answer"):
            node.add(Text(f"provisional answer \"{step['provisional_answer']}\" (waits for round 1)", style="dim"))
        if step.get("ungrounded_answer"):
            node.add(Text(f"not believed: \"{step['ungrounded_answer']}\" names no entity the paths reached",
                          style="yellow"))
    return tree


def _step_item(item: Any) -> str:
    """"name", [entity, relation] -> "entity: relation", or either with a trailing score."""
    if not isinstance(item, list | tuple):
        return str(item)
    *names, last = item
    if names and isinstance(last, int | float) and not isinstance(last, bool):
        return f"{': '.join(map(str, names))} ({last:g})"
    return ": ".join(map(str, item))


def render_record(record: AnswerRecord, console: Console | None = None) -> None:
    """Print the record for a person: answer first, then how it was found."""
    console = console or Console()
    parts: list[Any] = [Text.assemble(("question  ", "dim"), record.question)]
    if record.abstained:
        why = record.extra.get("abstained_because", "")
        answer = Text.assemble(("answer    ", "dim"), ("not found", "bold yellow"),
                               f"   (abstained: {why})" if why else "   (abstained)",
                               (f"  [{record.method}]", "dim"))
    else:
        grounding = record.extra.get("grounding")
        source = f"   from {record.answer_source}" + (f" ({grounding})" if grounding == "not in evidence" else "")
        answer = Text.assemble(("answer    ", "dim"), (record.prediction or "(none)", "bold green"),
                               source, (f"  [{record.method}]", "dim"))
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


def render_call(number: int, call: Any, console: Console | None = None) -> None:
    """One LLM call for `ask --trace`: stage, every message sent, the raw reply."""
    console = console or Console(stderr=True)
    info = call if isinstance(call, dict) else call.transcript()
    flags = ", from the cache" if info.get("cache_hit") else ""
    console.print(Text(f"── LLM call {number}: {info.get('stage', '?')}{flags} ──", style="bold magenta"))
    for message in info.get("messages") or []:
        console.print(Text(f"[{message.get('role')}]", style="magenta"))
        console.print(Text(str(message.get("content", ""))))
    reply = str(info.get("reply", ""))
    if len(reply) > MAX_REPLY_CHARS:
        reply = reply[:MAX_REPLY_CHARS] + f"… ({len(reply) - MAX_REPLY_CHARS} more characters)"
    console.print(Text("[raw reply]", style="magenta"))
    console.print(Text(reply or "(empty)"))
    if info.get("error"):
        console.print(Text(f"[error] {info['error']}", style="bold red"))


def call_printer(console: Console | None = None) -> Callable[[Any], None]:
    """A callback that prints each LLM call as it ends, numbered from 1 (stderr by default)."""
    console = console or Console(stderr=True)
    count = itertools.count(1)

    def print_call(call: Any) -> None:
        render_call(next(count), call, console)

    return print_call

"""Plain text lines of what the API returns, as the command line prints them (one function per
result; no I/O here, so a notebook can print the same lines)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def kg_stats_lines(path: Path, manifest: dict[str, Any]) -> list[str]:
    """`kg stats`: the totals, then per source facts, filtered and rejected with reasons."""
    from index.kg_stage import kg_summary_lines
    from index.manifest import kg_counts, kg_stats
    from index.mentions_kg import mentions_summary_lines

    stats, counts = kg_stats(manifest) or {}, kg_counts(manifest)
    lines = [f"{path}: {stats['triples']:,} fact triples, {stats['entities']:,} entities, "
             f"{stats['relations']:,} relations, {stats['rejects']:,} rejects", *kg_summary_lines(counts)]
    if "from_docs" in counts:  # a KG made from the documents (--kg-from-docs)
        lines += mentions_summary_lines(counts)
    if stats["document_rejects"]:
        lines.append(f"  (documents: {stats['document_rejects']:,} rejected records, not KG rejects: see `docs stats`)")
    return lines


def relations_lines(result: dict[str, Any]) -> list[str]:
    """`kg relations`: the entity, then one arrow line per relation."""
    lines = [f"{result['label']} <{result['entity']}>"]
    for row in result["relations"]:
        arrow = "->" if row["direction"] == "out" else "<-"
        lines.append(f"  {arrow} {row['label']}  <{row['id']}>")
    return lines


def tails_lines(result: dict[str, Any]) -> list[str]:
    """`kg tails`: one arrow line per tail (with its id unless a literal)."""
    return [f"{'->' if row['direction'] == 'out' else '<-'} {row['label']}" + (f"  <{row['id']}>" if row["id"] else "")
            for row in result["tails"]]


def docs_stats_lines(stats: dict[str, Any]) -> list[str]:
    """`docs stats`: documents, chunks, collections, embedding model and vector scope."""
    lines = [f"documents {stats['documents']:,}  chunks {stats['chunks']:,}  linked documents {stats['linked_documents']:,}"]
    for name, count in stats["collections"].items():
        lines.append(f"  {name:<8} {count:,} documents, {stats['chunks_per_collection'].get(name, 0):,} chunks")
    if "embedding" in stats:
        emb = stats["embedding"]
        where = f" at {emb['server']}" if emb.get("server") else ""
        lines.append(f"embedding {emb['model']} (dim {emb['dim']}, {emb.get('backend', 'torch')}{where}), "
                     f"chunk index {stats['chunk_index']['kind']}")
    if "vectors" in stats:
        lines.append(f"vectors {stats['vectors']}")
    return lines


def hits_lines(hits: list[dict[str, Any]]) -> list[str]:
    """`docs search` / `docs chunks`: rank, score, collection, title, entity, then the text."""
    lines = []
    for rank, hit in enumerate(hits, start=1):
        where = f"{hit['title'] or '(untitled)'}" + (f"  <{hit['entity']}>" if hit["entity"] else "")
        lines.append(f"{rank:>3}. {hit['score']:.4f}  [{hit['collection']}] {where}  ({hit['chunk_id']})")
        lines.append(f"     {hit['text'][:300].replace(chr(10), ' ')}")
    return lines


def link_lines(candidates: list[dict[str, Any]]) -> list[str]:
    """`link`: one line per candidate entity."""
    if not candidates:
        return ["no entity found"]
    return [f"{c['score']:.3f}  {c['mention']!r} -> {c['label']}  <{c['entity']}>  ({c['reason']})" for c in candidates]


def build_lines(report: Any, out: Path) -> list[str]:
    """`index`: the options inherited, what ran, was reused or removed, counts and summaries."""
    from index.kg_stage import kg_summary_lines
    from index.mentions_kg import mentions_summary_lines

    lines = []
    if report.inherited:
        lines.append("options of the previous build: " + ", ".join(f"{k}={v}" for k, v in report.inherited.items()))
    if report.up_to_date:
        return [*lines, f"{out}: up to date, nothing to do (stages {', '.join(report.skipped)} unchanged)"]
    done = [f"built {', '.join(report.ran)}"] if report.ran else []
    done += [f"removed {', '.join(report.removed)} (no longer has inputs)"] if report.removed else []
    done += [f"reused {', '.join(report.skipped)}"] if report.skipped else []
    lines.append(f"{out}: {'; '.join(done)} in {report.seconds:.1f}s")
    counts = {k: v for k, v in report.counts.items() if isinstance(v, int)}
    lines.append("  " + ", ".join(f"{k}={v:,}" for k, v in counts.items()))
    if report.rejects:
        lines.append(f"  {report.rejects:,} rejected input records: see {out / 'rejects.jsonl'}")
    if "kg" in report.ran:
        lines += kg_summary_lines(report.stage_counts.get("kg", {}))
    if "mentions" in report.ran:
        lines += mentions_summary_lines(report.stage_counts.get("mentions", {}))
    return lines


def batch_lines(report: Any, out: Path, shard: str | None = None) -> list[str]:
    """`batch`: questions x methods, answered now per method, already done, and how to score."""
    per_method = ", ".join(f"{m} {v['ran']} ({v['errors']} errors)" for m, v in report.per_method.items())
    shard_text = f" (shard {shard})" if shard else ""
    lines = [f"{out}{shard_text}: {report.questions} questions x {len(report.methods)} methods: {report.ran} "
             f"answered now ({per_method}), {report.already_done} already done, in {report.seconds:.1f}s"]
    if report.requeued:
        lines.append(f"  {report.requeued} questions answered again after their worker died")
    lines.append(f"  score it: python cli.py eval {out.parent if shard else out}")
    return lines


def methods_lines(methods: list[dict[str, Any]]) -> list[str]:
    """`methods`: each method's summary, then one line per config key: its default, allowed
    values, help and paper reference (a method without them: its keys and defaults on one line)."""
    lines = []
    for method in methods:
        lines.append(f"{method['name']}: {method['summary']}")
        options = method.get("options") or []
        if not any(o["help"] for o in options):
            lines.append("  " + ", ".join(f"{k}={json.dumps(v)}" for k, v in method["defaults"].items()))
            continue
        for o in options:
            paper = f" [{o['paper']}]" if o["paper"] else ""
            lines.append(f"  {o['key']}={json.dumps(o['default'])} ({o['allowed']}): {o['help']}{paper}")
    return lines


def models_lines(rows: list[dict[str, Any]]) -> list[str]:
    """`models list`: name, role, state and path of each registry model."""
    lines = []
    for row in rows:
        state = "verified" if row["verified"] else ("BROKEN" if row["installed"] else "not installed")
        lines.append(f"{row['name']:<20} {row['role']:<8} {state:<14} {row['path']}")
        if row["error"]:
            lines.append(f"{'':<20} {row['error']}")
    return lines


def verify_line(done: Any) -> str:
    """`models verify`: what was checked and against which digest."""
    checks = "GGUF header, size" + (", llama.cpp's tensor check" if done.tensors_checked else "")
    if done.against is None:
        return f"{done.path}: ok ({checks}); no digest was recorded before: sha256 {done.sha256} recorded now"
    return f"{done.path}: ok ({checks}), sha256 {done.sha256} matches {done.against}"


def report_line(stats: Any) -> str:
    """`report`: the page written, its questions, records, size and time."""
    return (f"{stats.out}: {stats.questions:,} questions, {stats.records:,} records, "
            f"{stats.bytes / 1e6:.1f} MB in {stats.seconds:.1f}s")


def serve_line(server: Any, backend: str) -> str:
    """`embed serve`: where the server listens, its model name, dimension and backend."""
    return f"listening on {server.url} (model {server.served_name}, dim {server.embedder.dim}, {backend})"

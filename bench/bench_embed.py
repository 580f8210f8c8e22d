"""Embedding backends side by side (`python -m bench.run_all embed`): torch (sentence-transformers
fp32), onnx (fp32), onnx-int8 and the embeddings server (onnx-int8 behind `cli.py embed serve` on
localhost), in one run on the same texts and the same cores.

- Speed: the 520 AdvHotpotQA paragraphs of the docs benchmark, every backend on all cores
  (torch threads = ONNX calls at once = os.cpu_count()), rounds interleaved so that a busy moment
  hits every backend alike; the best round of each.
- Retrieval: the docs benchmark's store (1,226 AdvHotpotQA paragraphs, 308 questions, k=10),
  built and queried with each local backend: questions with a supporting paragraph in the top 10
  (the docs benchmark's recall@10), and the share of all supporting paragraphs found.
- Linking: the MetaQA entity table with label vectors from each backend; the topic of every 12th
  dev question (1/2/3-hop), with brackets removed (as tests/test_linking.py), and with one letter
  of the topic dropped, so that only fuzzy (spelling) or label-embedding matching can find it.
The default backend switches to onnx-int8 only if it is >= 2.5x torch's texts/s, within 1 point
of its recall@10, and links as well; the result says whether each holds.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
HOTPOT = SHARED / "paper_questions" / "tog2" / "hotpotadv_dev.json"
METAQA = SHARED / "metaqa"
LOCAL = ("torch", "onnx", "onnx-int8")
ROUNDS = 3
K = 10
# Every 12th MetaQA dev question (about 950 over 1/2/3-hop): linking a question whose topic no
# label matches embeds its content n-grams, which takes minutes per thousand questions with torch.
LINK_EVERY = 12
_TOPIC = re.compile(r"\[([^\]]+)\]")


def _texts() -> list[str]:
    questions = json.loads(HOTPOT.read_text(encoding="utf-8"))[:130]
    return [p["context"] for q in questions for p in q["paragraphs"]][:520]


def _start_server() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "cli.py", "embed", "serve", "--port", "0", "--embed-backend", "onnx-int8"],
        cwd=REPO, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:
        if match := re.search(r"listening on (\S+)", line):
            return process, match.group(1)
    raise RuntimeError(f"embed serve exited with {process.wait()}")


def _speed(texts: list[str], threads: int) -> dict[str, Any]:
    from index.embed_backends import open_embedder
    from index.embed_http import ServerEmbedder
    from index.embed_onnx import OnnxEmbedder
    from index.embedder import SentenceTransformerEmbedder

    server, url = _start_server()
    try:
        embedders: dict[str, Any] = {
            "torch": SentenceTransformerEmbedder(threads=threads),
            "onnx": OnnxEmbedder(backend="onnx", threads=threads),
            "onnx-int8": OnnxEmbedder(backend="onnx-int8", threads=threads),
            "server (onnx-int8, localhost)": ServerEmbedder(url),
        }
        assert open_embedder(None, "onnx-int8").fingerprint == embedders["onnx-int8"].fingerprint
        for embedder in embedders.values():
            embedder.encode(texts[:64])  # load and warm up
        seconds: dict[str, list[float]] = {name: [] for name in embedders}
        vectors: dict[str, np.ndarray] = {}
        for _ in range(ROUNDS):
            for name, embedder in embedders.items():
                started = time.perf_counter()
                vectors[name] = embedder.encode(texts, batch_size=64)
                seconds[name].append(time.perf_counter() - started)
    finally:
        server.terminate()
        server.wait(timeout=30)
    reference = vectors["torch"]
    rows = {}
    for name, times in seconds.items():
        cosine = (vectors[name] * reference).sum(axis=1)
        rows[name] = {
            "texts_per_s": round(len(texts) / min(times), 1),
            "vs_torch": round(min(seconds["torch"]) / min(times), 2),
            "cosine_to_torch_mean": round(float(cosine.mean()), 4),
            "cosine_to_torch_min": round(float(cosine.min()), 4),
            "rounds_s": [round(t, 2) for t in times],
        }
    return {"texts": len(texts), "mean_chars": round(sum(map(len, texts)) / len(texts), 1), "threads": threads, "backends": rows}


def _retrieval(root: Path) -> dict[str, Any]:
    from engine.access.documents import ParquetDocumentStore
    from index.doc_options import DocOptions, DocSource
    from index.doc_stage import build_documents
    from index.paths import IndexPaths
    from index.vectors_stage import build_vectors
    from ingest.rejects import RejectLog

    questions = json.loads(HOTPOT.read_text(encoding="utf-8"))
    source = root / "hotpot.json"
    source.write_text(json.dumps(questions), encoding="utf-8")
    result = {}
    for backend in LOCAL:
        paths = IndexPaths(root / f"docs-{backend}")
        paths.root.mkdir(parents=True)
        log = RejectLog(paths.root / "rejects.jsonl")
        build_documents(paths, [DocSource(source, "hotpot", "wiki")], DocOptions(), log)
        log.close()
        started = time.perf_counter()
        build_vectors(paths, DocOptions(entity_vectors=False, embed_backend=backend), root / f"cache-{backend}")
        build_s = time.perf_counter() - started
        store = ParquetDocumentStore(paths)
        any_found, found, gold_total = 0, 0, 0
        for question in questions:
            titles = {h.chunk.title for h in store.dense_search(question["question"], K)}
            gold = {p["title"] for p in question["paragraphs"] if p.get("is_supp")}
            any_found += bool(gold & titles)
            found += len(gold & titles)
            gold_total += len(gold)
        result[backend] = {
            "questions": len(questions),
            "recall_at_10": round(100 * any_found / len(questions), 1),
            "supporting_found_pct": round(100 * found / gold_total, 1),
            "vectors_stage_s": round(build_s, 1),
        }
    return result


def linking_cases() -> dict[str, list[tuple[str, str]]]:
    """(question, topic name) pairs: every LINK_EVERY-th MetaQA dev question (1/2/3-hop) with
    brackets removed, and (topics of 6+ characters) with one letter of the topic dropped."""
    cases: dict[str, list[tuple[str, str]]] = {"without brackets": [], "one letter dropped": []}
    for hop in ("1-hop", "2-hop", "3-hop"):
        lines = (METAQA / "questions" / hop / "qa_dev.txt").read_text(encoding="utf-8").splitlines()[::LINK_EVERY]
        for line in lines:
            question = line.split("\t", 1)[0]
            topic = _TOPIC.search(question)
            if not topic:
                continue
            name = topic.group(1)
            cases["without brackets"].append((question.replace("[", "").replace("]", ""), name))
            if len(name) >= 6:  # drop the letter after the middle: no exact, alias or normalised match
                cut = len(name) // 2 + 1
                cases["one letter dropped"].append((_TOPIC.sub(name[:cut] + name[cut + 1:], question), name))
    return cases


def _linking(root: Path) -> dict[str, Any]:
    from engine.access.linking import EntityLinker
    from index.build import build_index
    from index.doc_options import DocSource
    from index.kg_stage import KgSource

    doc = root / "one.jsonl"  # the vectors stage needs a chunk; the labels are what is measured
    doc.write_text(json.dumps({"id": "d", "title": "Note", "text": "A note."}) + "\n", encoding="utf-8")
    cases = linking_cases()
    result: dict[str, Any] = {}
    for backend in ("torch", "onnx-int8"):
        out = root / f"metaqa-{backend}"
        started = time.perf_counter()
        build_index(out, [KgSource(METAQA / "kb", "metaqa")], [DocSource(doc, "jsonl", "wiki")],
                    doc_options={"embed_backend": backend})
        build_s = time.perf_counter() - started
        linker = EntityLinker.open(out)
        result[backend] = {"index_build_s": round(build_s, 1)}
        for case, pairs in cases.items():
            right = 0
            for question, name in pairs:
                found = linker.link(question)
                right += bool(found) and found[0].label == name
            result[backend][case] = {"questions": len(pairs), "top1_pct": round(100 * right / len(pairs), 2)}
    return result


def _markdown(result: dict[str, Any]) -> str:
    speed, retrieval, linking = result["speed"], result["retrieval"], result["linking"]
    lines = [
        f"Speed ({speed['texts']} AdvHotpotQA paragraphs, mean {speed['mean_chars']} chars, {speed['threads']} threads "
        f"each, best of {ROUNDS} interleaved rounds); cosine to the torch vectors:",
        "",
        "| backend | texts/s | vs torch | cosine mean | cosine min |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, row in speed["backends"].items():
        lines.append(f"| {name} | {row['texts_per_s']} | {row['vs_torch']}x | {row['cosine_to_torch_mean']} | {row['cosine_to_torch_min']} |")
    lines += ["", f"Retrieval (docs benchmark store, {retrieval['torch']['questions']} questions, k={K}):", "",
              "| backend | recall@10 (a supporting paragraph in top 10) | supporting paragraphs found | vectors stage s |",
              "|---|---:|---:|---:|"]
    for name, row in retrieval.items():
        lines.append(f"| {name} | {row['recall_at_10']} | {row['supporting_found_pct']} | {row['vectors_stage_s']} |")
    cases = [c for c in linking["torch"] if c != "index_build_s"]
    lines += ["", f"Linking (MetaQA dev, every {LINK_EVERY}th question, top-1 topic right, %):", "",
              "| backend | " + " | ".join(f"{c} ({linking['torch'][c]['questions']})" for c in cases) + " | index build s |",
              "|---|" + "---:|" * (len(cases) + 1)]
    for name, row in linking.items():
        lines.append(f"| {name} | " + " | ".join(str(row[c]["top1_pct"]) for c in cases) + f" | {row['index_build_s']} |")
    verdict = result["default_switch"]
    lines += ["", "onnx-int8 as the default: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in verdict.items() if k != "switch")
              + f" -> {'switch' if verdict['switch'] else 'keep torch'}"]
    return "\n".join(lines)


def run(results_dir: Path) -> dict[str, Any]:
    """Run the backend comparison; writes `<results_dir>/embed.json`."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    threads = os.cpu_count() or 1
    from index.embed_onnx import export_onnx

    export_onnx()
    root = Path(tempfile.mkdtemp(prefix="localkg-bench-embed-"))
    try:
        result: dict[str, Any] = {"speed": _speed(_texts(), threads)}
        print(f"embed bench: speed {json.dumps(result['speed']['backends'])}", file=sys.stderr)
        result["retrieval"] = _retrieval(root)
        print(f"embed bench: retrieval {json.dumps(result['retrieval'])}", file=sys.stderr)
        result["linking"] = _linking(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    int8, torch_ = result["retrieval"]["onnx-int8"], result["retrieval"]["torch"]
    link = result["linking"]
    verdict = {
        ">= 2.5x torch": result["speed"]["backends"]["onnx-int8"]["vs_torch"] >= 2.5,
        "recall@10 within 1 point": abs(int8["recall_at_10"] - torch_["recall_at_10"]) <= 1.0,
        "linking unchanged": all(link["onnx-int8"][c]["top1_pct"] >= link["torch"][c]["top1_pct"] - 0.5
                                 for c in link["torch"] if c != "index_build_s"),
    }
    result["default_switch"] = verdict | {"switch": all(verdict.values())}
    result["markdown"] = _markdown(result)
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "embed.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


if __name__ == "__main__":
    print(run(REPO / "bench" / "results")["markdown"])

"""Wikipedia-scale documents benchmark (`python -m bench.run_all wikiscale`).

Generates a multi-GB `pages-articles` XML file from the real English Wikipedia excerpt pages in
../shared/data/dumps/wikipedia/ (every page, redirects included, repeated under new page ids
and titles "T (copy N)"), builds a documents index from it the way a user would
(`cli.py index --docs FILE --docs-format wikipedia-xml --vectors none --sparse tantivy`, in a
child process whose process tree's memory is sampled), and measures pages/s, chunks/s, peak
memory and bytes on disk. Then, on slices:
  - bm25s (the default, in-memory sparse engine): peak memory and index bytes for the first
    BM25S_SAMPLE chunks of the generated index, per million chunks and projected to 40M;
  - tantivy vs bm25s: top-10 overlap on the 106 real articles (titles and chunk sentences as
    queries);
  - embedding: chunks/s of the vectors stage on the first EMBED_SLICE_PAGES excerpt pages.
Finally it projects English Wikipedia (6.9M articles, ~40M chunks, the figures of issue 13) from
the measured chunk rates, with and without vectors.

Size: LOCALKG_WIKISCALE_BYTES (default DEFAULT_BYTES); the temp folder is LOCALKG_WIKISCALE_TMP
(default: the system temp folder), removed at the end.
"""

from __future__ import annotations

import bz2
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DUMPS = REPO.parent / "shared" / "data" / "dumps" / "wikipedia"
SOURCES = (
    DUMPS / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",
    DUMPS / "enwiki-20150112-pages-articles.head1MiB.xml",  # cut mid-page: its complete pages only
)
DEFAULT_BYTES = 1_000_000_000  # 1 GB: about 12 min on 2 cores (2 GB would not fit in 20 min)
BM25S_SAMPLE = 250_000  # chunks indexed by bm25s to measure its memory
EMBED_SLICE_PAGES = 70  # excerpt pages embedded to measure the vectors stage (about 500 chunks)
ENWIKI_ARTICLES = 6_900_000
ENWIKI_CHUNKS = 40_000_000
MACHINE_RAM = 24 * 1024**3
_PAGE = re.compile(rb"<page>.*?</page>", re.S)
_TITLE = re.compile(rb"<title>(.*?)</title>")
_PAGE_ID = re.compile(rb"(</ns>\s*<id>)(\d+)(</id>)")


# ------------------------------------------------------------------------------------------
# the generated dump
# ------------------------------------------------------------------------------------------


def source_pages() -> tuple[bytes, list[bytes]]:
    """(the dump header up to the first page, every complete <page> block of the excerpts)."""
    texts = [bz2.decompress(p.read_bytes()) if p.suffix == ".bz2" else p.read_bytes() for p in SOURCES]
    header = texts[0][: texts[0].index(b"<page>")]
    pages: dict[bytes, bytes] = {}  # by page id: both excerpts start at the start of enwiki
    for text in texts:
        for match in _PAGE.finditer(text):
            page_id = _PAGE_ID.search(match.group(0))
            if page_id is not None:
                pages.setdefault(page_id.group(2), match.group(0))
    return header, list(pages.values())


def generate_pages_articles(out: Path, target_bytes: int, max_pages: int | None = None) -> dict[str, int]:
    """Write a pages-articles XML of about `target_bytes`: the excerpt pages (the first
    `max_pages` of them if given) repeated, copy N of a page titled "T (copy N)" with page id
    N * 10^7 + its id. Returns counts."""
    header, pages = source_pages()
    pages = pages[:max_pages]
    articles = sum(1 for p in pages if b"<redirect" not in p and b"<ns>0</ns>" in p)
    written = copies = count = 0
    with out.open("wb") as fh:
        fh.write(header)
        written += len(header)
        while copies == 0 or written < target_bytes:  # at least every page once
            for page in pages:
                if copies:
                    page = _renamed(page, copies)
                fh.write(b"  " + page + b"\n")
                written += len(page) + 3
                count += 1
            copies += 1
        fh.write(b"</mediawiki>\n")
    return {"bytes": out.stat().st_size, "pages": count, "copies": copies,
            "articles": articles * copies, "source_pages": len(pages), "source_articles": articles}


def _renamed(page: bytes, copy: int) -> bytes:
    """Copy `copy` of a page block: title "T (copy N)", page id N * 10^7 + the id."""
    page = _TITLE.sub(lambda m: b"<title>" + m.group(1) + b" (copy %d)</title>" % copy, page, count=1)
    return _PAGE_ID.sub(lambda m: m.group(1) + str(copy * 10**7 + int(m.group(2))).encode() + m.group(3), page, count=1)


# ------------------------------------------------------------------------------------------
# measuring a child process
# ------------------------------------------------------------------------------------------


def _tree_rss(root_pid: int) -> int:
    """Resident bytes of a process and all its descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(stat[1]), []).append(int(entry))
            rss[int(entry)] = int(stat[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def run_measured(command: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run `command`; its wall seconds and the peak resident memory of its process tree
    (sampled every 0.5 s), and its output tail. RuntimeError when it fails."""
    started = time.monotonic()
    proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = [0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], _tree_rss(proc.pid))
            time.sleep(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = proc.communicate()
    sampler.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({proc.returncode}):\n{output[-3000:]}")
    return {"seconds": round(time.monotonic() - started, 2), "peak_rss_bytes": peak[0], "output_tail": output[-2000:]}


def _folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def _child_env() -> dict[str, str]:
    return os.environ | {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "LOCALKG_PROGRESS_SECONDS": "60"}


# ------------------------------------------------------------------------------------------
# the measurements
# ------------------------------------------------------------------------------------------


def measure_build(xml: Path, out: Path) -> dict[str, Any]:
    """Build the documents index of `xml` (vectors none, tantivy) in a child process."""
    command = [sys.executable, "cli.py", "index", "--out", str(out), "--docs", str(xml), "--docs-format",
               "wikipedia-xml", "--collection", "wiki", "--vectors", "none", "--sparse", "tantivy"]
    run = run_measured(command, _child_env())
    counts = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["counts"]
    names = ("documents.parquet", "chunks.parquet", "bm25", "entities.parquet")
    return {
        "command": " ".join(["python", *command[1:]]),
        "seconds": run["seconds"],
        "peak_rss_bytes": run["peak_rss_bytes"],
        "documents": counts["documents"],
        "chunks": counts["chunks"],
        "disk_bytes": {name: _folder_bytes(out / name) for name in names if (out / name).exists()},
    }


def bm25s_probe(chunks: Path, limit: int, out_dir: Path) -> dict[str, Any]:
    """Build bm25s over the first `limit` chunks of `chunks` (in this process); its peak RSS
    (ru_maxrss) before and after, seconds and bytes. Run in a child by `measure_bm25s`."""
    import resource

    from index.bm25_index import build_bm25
    from index.chunk_texts import chunk_texts

    def first_texts() -> Any:
        left = limit
        for batch in chunk_texts(chunks):
            yield batch[:left]
            left -= len(batch[:left])
            if left <= 0:
                return

    import bm25s  # noqa: F401  (its import is not the index's memory)

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    started = time.monotonic()
    count = build_bm25(first_texts(), out_dir)
    return {"chunks": count, "seconds": round(time.monotonic() - started, 2), "rss_before_bytes": before,
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "index_bytes": _folder_bytes(out_dir)}


def measure_bm25s(chunks: Path, limit: int, out_dir: Path) -> dict[str, Any]:
    """`bm25s_probe` in a fresh child process (so that its peak memory is its own)."""
    code = ("import json, sys; from pathlib import Path; from bench.bench_wiki_scale import bm25s_probe; "
            "print(json.dumps(bm25s_probe(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))))")
    run = run_measured([sys.executable, "-c", code, str(chunks), str(limit), str(out_dir)], _child_env())
    probe = json.loads(run["output_tail"].strip().splitlines()[-1])
    grown = probe["peak_rss_bytes"] - probe["rss_before_bytes"]
    per_million = grown * 1_000_000 / probe["chunks"]
    probe |= {
        "bytes_per_million_chunks": int(per_million),
        "index_bytes_per_million_chunks": int(probe["index_bytes"] * 1_000_000 / probe["chunks"]),
        "projected_bytes_40m": int(per_million * ENWIKI_CHUNKS / 1_000_000),
    }
    probe["fits_24gib_at_40m"] = probe["projected_bytes_40m"] < MACHINE_RAM
    return probe


def sparse_overlap(root: Path, k: int = 10, queries: int = 100, seed: int = 0) -> dict[str, Any]:
    """Top-k overlap of tantivy and bm25s over the real excerpt articles (copy 0 only): queries
    are the article titles and `queries` sentences drawn from chunks (seeded)."""
    from engine.access.documents import ParquetDocumentStore
    from index.build import build_index
    from index.doc_options import DocSource

    root.mkdir(parents=True, exist_ok=True)
    xml = root / "overlap.xml"
    generate_pages_articles(xml, 1)  # one copy: the real pages as they are
    stores = {}
    for engine in ("bm25s", "tantivy"):
        build_index(root / engine, [], [DocSource(xml, "wikipedia-xml", "wiki")], doc_options={"vectors": False, "sparse": engine})
        stores[engine] = ParquetDocumentStore(root / engine)
    chunks = stores["bm25s"].rows(list(range(stores["bm25s"]._count)))
    rng = random.Random(seed)
    asked = sorted({c.title for c in chunks})
    for chunk in rng.sample(chunks, queries):
        sentence = chunk.text.split(". ")[0]
        asked.append(sentence[:200])
    overlaps, top1 = [], 0
    for text in asked:
        found = {name: [h.chunk.row for h in store.sparse_search(text, k)] for name, store in stores.items()}
        if found["bm25s"]:
            overlaps.append(len(set(found["bm25s"]) & set(found["tantivy"])) / len(found["bm25s"]))
            top1 += bool(found["tantivy"]) and found["tantivy"][0] == found["bm25s"][0]
    return {"chunks": len(chunks), "queries": len(overlaps), "k": k,
            "mean_overlap_at_k": round(sum(overlaps) / len(overlaps), 4), "top1_agreement": round(top1 / len(overlaps), 4)}


def measure_embedding(root: Path, backend: str = "torch") -> dict[str, Any]:
    """Chunks/s of the vectors stage on a small generated slice, with an embedding backend
    (torch: this process's torch threads; onnx-int8: as many one-thread calls as cores)."""
    import torch

    from index.build import build_index
    from index.doc_options import DocSource

    root.mkdir(parents=True, exist_ok=True)
    xml = root / "embed.xml"
    generate_pages_articles(xml, 1, max_pages=EMBED_SLICE_PAGES)
    source = DocSource(xml, "wikipedia-xml", "wiki")
    out = root / f"embed-{backend}"
    build_index(out, [], [source], doc_options={"vectors": False, "embed_backend": backend})
    report = build_index(out, [], [], doc_options={"vectors": True})
    counts = report.stage_counts["vectors"]
    threads = torch.get_num_threads() if backend == "torch" else os.cpu_count()
    return {"backend": backend, "chunks": counts["chunk_vectors"], "entity_labels": counts["entity_vectors"],
            "seconds": round(report.seconds, 2), "torch_threads": threads,
            "chunks_per_s": round(counts["chunk_vectors"] / report.seconds, 2)}  # labels' time counted too


def add_embedding_backends(results_dir: Path) -> dict[str, Any]:
    """Measure the slice's embedding with torch and onnx-int8 (one process, one after the other),
    put both and their projections into an existing wikiscale.json, rewrite its summary."""
    path = results_dir / "wikiscale.json"
    result = json.loads(path.read_text(encoding="utf-8"))
    root = Path(tempfile.mkdtemp(prefix="localkg-wikiscale-embed-"))
    try:
        result["embedding"] = measure_embedding(root / "torch", "torch")
        result["embedding_onnx_int8"] = measure_embedding(root / "int8", "onnx-int8")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result["enwiki_projection"] = project(result["build"], result["embedding"])
    result["enwiki_projection_onnx_int8"] = project(result["build"], result["embedding_onnx_int8"])
    result.pop("markdown", None)
    result["markdown"] = _markdown(result)
    path.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


def project(build: dict[str, Any], embed: dict[str, Any]) -> dict[str, Any]:
    """English Wikipedia hours from the measured chunk rates (the excerpt articles are long:
    projecting by articles would overstate the time per article)."""
    docs_hours = ENWIKI_CHUNKS / build["chunks_per_s"] / 3600
    embed_hours = ENWIKI_CHUNKS / embed["chunks_per_s"] / 3600
    return {"articles": ENWIKI_ARTICLES, "chunks": ENWIKI_CHUNKS,
            "hours_vectors_none": round(docs_hours, 1), "hours_vectors_all": round(docs_hours + embed_hours, 1),
            "hours_embedding_only": round(embed_hours, 1)}


def run(results_dir: Path, target_bytes: int | None = None) -> dict[str, Any]:
    """Run the benchmark; writes `<results_dir>/wikiscale.json` and returns it with `markdown`."""
    target = target_bytes or int(os.environ.get("LOCALKG_WIKISCALE_BYTES", DEFAULT_BYTES))
    root = Path(tempfile.mkdtemp(prefix="localkg-wikiscale-", dir=os.environ.get("LOCALKG_WIKISCALE_TMP")))
    try:
        xml = root / "enwiki-generated-pages-articles.xml"
        started = time.monotonic()
        generated = generate_pages_articles(xml, target) | {"seconds": round(time.monotonic() - started, 1)}
        _say(f"generated {generated['bytes']:,} bytes, {generated['pages']:,} pages; building the index")
        build = measure_build(xml, root / "index")
        build |= {"pages_per_s": round(generated["pages"] / build["seconds"], 1),
                  "articles_per_s": round(build["documents"] / build["seconds"], 1),
                  "chunks_per_s": round(build["chunks"] / build["seconds"], 1),
                  "xml_mb_per_s": round(generated["bytes"] / 1e6 / build["seconds"], 2)}
        _say(f"built in {build['seconds']} s; bm25s on {BM25S_SAMPLE:,} chunks")
        bm25s = measure_bm25s((root / "index" / "chunks.parquet"), BM25S_SAMPLE, root / "bm25s-probe")
        _say("tantivy vs bm25s overlap")
        overlap = sparse_overlap(root / "overlap")
        _say("embedding a slice")
        embed = measure_embedding(root / "embed-slice")
        embed_int8 = measure_embedding(root / "embed-slice-int8", "onnx-int8")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result: dict[str, Any] = {"cpu_count": os.cpu_count(), "generated": generated, "build": build, "bm25s": bm25s,
                              "sparse_overlap": overlap, "embedding": embed, "enwiki_projection": project(build, embed),
                              "embedding_onnx_int8": embed_int8,
                              "enwiki_projection_onnx_int8": project(build, embed_int8)}
    result["markdown"] = _markdown(result)
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "wikiscale.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


def _say(text: str) -> None:
    print(f"wikiscale: {text}", file=sys.stderr, flush=True)


def _gib(n: float) -> str:
    return f"{n / 1024**3:.2f} GiB"


def _markdown(r: dict[str, Any]) -> str:
    g, b, s, o, e, p = (r[k] for k in ("generated", "build", "bm25s", "sparse_overlap", "embedding", "enwiki_projection"))
    disk = ", ".join(f"{name} {_gib(n)}" for name, n in b["disk_bytes"].items())
    return "\n".join([
        f"Generated pages-articles XML: {g['bytes'] / 1e9:.2f} GB, {g['pages']:,} pages ({g['copies']} copies of "
        f"{g['source_pages']} real pages), {b['documents']:,} articles, {b['chunks']:,} chunks; {r['cpu_count']} cores.",
        "",
        "| measure | value |",
        "|---|---|",
        f"| docs index build (`--vectors none --sparse tantivy`) | {b['seconds']:.0f} s |",
        f"| pages/s (redirects included) | {b['pages_per_s']:,} |",
        f"| articles/s | {b['articles_per_s']:,} |",
        f"| chunks/s | {b['chunks_per_s']:,} |",
        f"| XML MB/s | {b['xml_mb_per_s']} |",
        f"| peak RSS of the build (process tree) | {_gib(b['peak_rss_bytes'])} |",
        f"| index on disk | {disk} |",
        f"| bm25s: peak memory per million chunks ({s['chunks']:,} indexed) | {_gib(s['bytes_per_million_chunks'])} |",
        f"| bm25s: index bytes per million chunks | {_gib(s['index_bytes_per_million_chunks'])} |",
        f"| bm25s projected to 40M chunks | {_gib(s['projected_bytes_40m'])} (fits 24 GiB: {s['fits_24gib_at_40m']}) |",
        f"| tantivy vs bm25s top-{o['k']} overlap ({o['queries']} queries, {o['chunks']:,} real chunks) | "
        f"{o['mean_overlap_at_k']:.3f} (top-1 agreement {o['top1_agreement']:.3f}) |",
        f"| embedding chunks/s ({e['chunks']:,} chunks + {e['entity_labels']} labels, {e['torch_threads']} torch threads) | "
        f"{e['chunks_per_s']} |",
        f"| English Wikipedia ({p['articles']:,} articles, {p['chunks']:,} chunks), `--vectors none` | {p['hours_vectors_none']} h |",
        f"| English Wikipedia, `--vectors all` (or `linked`: nearly every article links) | {p['hours_vectors_all']} h |",
        *_int8_rows(r),
    ])


def _int8_rows(r: dict[str, Any]) -> list[str]:
    """The onnx-int8 rows, when `add_embedding_backends` measured them."""
    if "embedding_onnx_int8" not in r:
        return []
    e, p = r["embedding_onnx_int8"], r["enwiki_projection_onnx_int8"]
    return [f"| embedding chunks/s, `--embed-backend onnx-int8` ({e['chunks']:,} chunks, {e['torch_threads']} one-thread calls at once) | "
            f"{e['chunks_per_s']} |",
            f"| English Wikipedia, `--vectors all --embed-backend onnx-int8` | {p['hours_vectors_all']} h |"]


if __name__ == "__main__":
    # --embedding-only: measure the slice's embedding with torch and onnx-int8 and add them to the
    # existing bench/results/wikiscale.json (the build part is left as it was measured).
    if sys.argv[1:] == ["--embedding-only"]:
        print(add_embedding_backends(REPO / "bench" / "results")["markdown"])
    else:
        print(run(REPO / "bench" / "results")["markdown"])

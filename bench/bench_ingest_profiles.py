"""Ingest of real-dump-shaped N-Triples per profile, against a raw `pyoxigraph.Store.bulk_load`.

For each profile (generic, wikidata, freebase) a generated file of `--lines` lines
(bench/gen_dump_lines.py: Wikidata-truthy-like lines for generic and wikidata, Freebase-like
lines for freebase) is loaded by:
- ours: `build_index` with that profile's format (`ntriples`, `wikidata`, `freebase`), the
  default path (the store parses the lines that the profile keeps);
- python: the same build with `LOCALKG_KG_PARSER=python` (every line parsed and routed in
  Python: the only path for wikidata and freebase before);
- bulk_load: a raw `Store.bulk_load` of the same file (every line, no routing, no tables).

The machine may be shared: the three are timed `--repeats` times, interleaved, and the median
of each is kept (every time is in the JSON, with the load average before and after). The
ratio is bulk_load seconds / ours seconds (1.0: as fast as the raw load). The two builds must
give the same counts (checked). `--profile` also writes a cProfile of one default build per
profile (bench/results/ingest_profiles-<profile>.prof, not checked in). One more default build
per profile is timed by step (scan, store loads, tables), for what holds a profile back.

    python -m bench.bench_ingest_profiles                   # 2,000,000 lines per profile
    python -m bench.bench_ingest_profiles --lines 200000 --repeats 1
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyoxigraph as ox

from bench.bench_kg import _timed, _with_parser
from bench.gen_dump_lines import write_dump
from index.build import build_index
from index.kg_stage import KgSource
from index.manifest import read_manifest
from index.paths import IndexPaths

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
# profile -> (generated kind, --kg-format)
PROFILES = {"generic": ("wikidata", "ntriples"), "wikidata": ("wikidata", "wikidata"), "freebase": ("freebase", "freebase")}
TARGET = 0.8


def _build(path: Path, fmt: str, out: Path, parser: str) -> Callable[[], None]:
    return _with_parser(parser, lambda: build_index(out, [KgSource(path, fmt)], [], rebuild=True))


def _bulk_load(path: Path, out: Path) -> Callable[[], None]:
    def run() -> None:
        shutil.rmtree(out, ignore_errors=True)
        store = ox.Store(str(out))
        store.bulk_load(path=str(path), format=ox.RdfFormat.N_TRIPLES)
        store.flush()
        del store
    return run


# Steps timed by wrapping them (wall seconds; the writer threads' loads run beside the scan, the
# relation table beside the entity table).
_PHASES = [("ingest.rdf_reader", "scan_ntriples", "generic scan (Arrow)"),
           ("ingest.rdf_reader", "drop_other_languages", "generic: other-language lines"),
           ("ingest.rdf_reader", "_routed_batch", "profile scan (Arrow)"),
           ("ingest.rdf_reader", "parse_batch", "Python parse of batches"),
           ("index.store_writer:StoreWriter", "_write", "store loads (writer threads, summed)"),
           ("index.store_writer:StoreWriter", "drain", "wait for the store to finish loading"),
           ("index.kg_stage:_Load", "degrees", "degree sums"),
           ("index.kg_stage", "_meta_rows", "metadata rows read from the store"),
           ("index.kg_stage", "_write_entities", "entity table (metadata rows included)"),
           ("index.kg_stage", "write_relation_table", "relation table (in a thread)")]


def phases(build: Callable[[], None]) -> dict[str, float]:
    """Wall seconds of one default build by step (see _PHASES)."""
    import functools
    import importlib

    seconds: dict[str, float] = {}
    saved = []
    for where, name, label in _PHASES:
        module, _, cls = where.partition(":")
        owner = getattr(importlib.import_module(module), cls) if cls else importlib.import_module(module)
        fn = getattr(owner, name)
        saved.append((owner, name, fn))

        def timed(*args: Any, _fn: Any = fn, _label: str = label, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return _fn(*args, **kwargs)
            finally:
                seconds[_label] = seconds.get(_label, 0.0) + time.perf_counter() - start

        setattr(owner, name, functools.wraps(fn)(timed))
    try:
        seconds["whole build"] = _timed(build)[0]
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)
    return {label: round(value, 2) for label, value in seconds.items()}


def _counts(index: Path) -> dict[str, Any]:
    counts: dict[str, Any] = read_manifest(IndexPaths(index))["stages"]["kg"]["counts"]
    return counts


def compare(profile: str, path: Path, work: Path, repeats: int, prof: Path | None) -> dict[str, Any]:
    """Time ours / python / bulk_load on `path`, interleaved; medians, ratios and counts."""
    fmt = PROFILES[profile][1]
    runs: dict[str, Callable[[], None]] = {
        "ours": _build(path, fmt, work / "ours", "store"),
        "python": _build(path, fmt, work / "python", "python"),
        "bulk_load": _bulk_load(path, work / "raw"),
    }
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, fn in runs.items():
            times[name].append(_timed(fn))
    ours, python = _counts(work / "ours"), _counts(work / "python")
    if ours != python:
        raise AssertionError(f"{profile}: the two parsers' counts differ:\n{ours}\n{python}")
    steps = phases(runs["ours"])
    if prof is not None:
        profiler = cProfile.Profile()
        profiler.runcall(runs["ours"])
        profiler.dump_stats(str(prof))
    median = {name: statistics.median(wall for wall, _ in t) for name, t in times.items()}
    cpu = {name: statistics.median(c for _, c in t) for name, t in times.items()}
    source = ours["sources"][0]
    return {
        "format": fmt,
        "lines": sum(1 for _ in path.open("rb")),
        "bytes": path.stat().st_size,
        "facts_read": source["facts_read"],
        "metadata_rows": source["metadata"],
        "filtered": sum(source["filtered"].values()),
        "triples": ours["triples"],
        "seconds": {name: round(value, 2) for name, value in median.items()},
        "cpu_seconds": {name: round(value, 2) for name, value in cpu.items()},
        "all_runs_seconds": {name: [round(wall, 2) for wall, _ in t] for name, t in times.items()},
        "phases_seconds": steps,
        "ours_vs_bulk_load": round(median["bulk_load"] / median["ours"], 3),
        "python_vs_bulk_load": round(median["bulk_load"] / median["python"], 3),
    }


def markdown(results: dict[str, Any]) -> str:
    lines = [
        f"# Ingest per profile vs raw bulk_load ({results['lines']:,} generated lines each)",
        "",
        f"Produced by `{results['command']}` on {results['machine']}, {results['date']}; "
        f"load average before {' / '.join(map(str, results['load_average_before']))}, after "
        f"{' / '.join(map(str, results['load_average_after']))} (1/5/15 min) on {results['cores']} cores. "
        f"Median of {results['repeats']} interleaved runs each (ours, python, bulk_load, ours, ...). "
        "Speed ratio = bulk_load seconds / build seconds; target >= 0.8x.",
        "",
        "| profile | --kg-format | facts kept | metadata rows | filtered | ours (s) | python path (s) | bulk_load (s) "
        "| ours / bulk_load | python path / bulk_load | CPU s: ours / python / bulk_load |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in results["profiles"].items():
        s, c = r["seconds"], r["cpu_seconds"]
        lines.append(
            f"| {name} | {r['format']} | {r['facts_read']:,} | {r['metadata_rows']:,} | {r['filtered']:,} | {s['ours']} "
            f"| {s['python']} | {s['bulk_load']} | **{r['ours_vs_bulk_load']}x** | {r['python_vs_bulk_load']}x "
            f"| {c['ours']} / {c['python']} / {c['bulk_load']} |"
        )
    lines += ["", "Every build's counts (manifest) were equal between the default path and `LOCALKG_KG_PARSER=python`."]
    for name, r in results["profiles"].items():
        steps = ", ".join(f"{label} {value}" for label, value in r["phases_seconds"].items())
        lines.append(f"\n{name}, one more default build by step (wall s): {steps}.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=2_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profiles", default=",".join(PROFILES), help="comma-separated: generic,wikidata,freebase")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS, help="where ingest_profiles.json and the summary go")
    parser.add_argument("--profile", action="store_true", help="also write a cProfile of one default build per profile")
    args = parser.parse_args(argv)
    chosen = [p.strip() for p in args.profiles.split(",") if p.strip()]
    results: dict[str, Any] = {
        "command": "python -m bench.bench_ingest_profiles" + (f" {' '.join(argv)}" if argv else ""),
        "machine": f"{platform.machine()}, Python {platform.python_version()}, pyoxigraph {ox.__version__}",
        "date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count(), "lines": args.lines, "repeats": args.repeats,
        "seed": args.seed, "load_average_before": [round(x, 2) for x in os.getloadavg()], "profiles": {},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="localkg-bench-profiles-") as tmp:
        work = Path(tmp)
        files: dict[str, Path] = {}
        for name in chosen:
            kind = PROFILES[name][0]
            if kind not in files:
                files[kind] = write_dump(kind, args.lines, work / f"{kind}.nt", args.seed)
            (work / name).mkdir()
            prof = args.out / f"ingest_profiles-{name}.prof" if args.profile else None
            results["profiles"][name] = compare(name, files[kind], work / name, args.repeats, prof)
            shutil.rmtree(work / name, ignore_errors=True)
            print(name, json.dumps(results["profiles"][name]), flush=True)
    results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    (args.out / "ingest_profiles.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    (args.out / "SUMMARY-ingest-profiles.md").write_text(markdown(results), encoding="utf-8")
    print(markdown(results))
    return results


def run(results_dir: Path) -> dict[str, Any]:
    """`python -m bench.run_all ingest-profiles`: the default sizes ($LOCALKG_BENCH_PROFILE_LINES
    lines per profile, 2,000,000 unless set), results in `results_dir`."""
    lines = os.environ.get("LOCALKG_BENCH_PROFILE_LINES", "2000000")
    results = main(["--lines", lines, "--out", str(results_dir)])
    results["markdown"] = markdown(results)
    return results


if __name__ == "__main__":
    main()

"""The HTML run report at scale: a synthetic run of 10,000 questions x 7 methods.

The run is cloned from the real records of `data/runs/demo` (`make demo`: tog, tog-r, tog2,
hydra, hydra-e, rag, io, with their calls/ transcripts): question k of the synthetic run takes
the demo record k mod 54 of each method, with a new id and the question text (and the prompts'
user messages) marked with k, so the shapes, evidence and transcripts are real but repeat. The
repetition makes gzip more effective than on a real run of 10,000 distinct questions, so the
file size here is a lower bound; the caps (`--prompt-chars`, 40 graph nodes, 12 chunks) bound
what a real run can add per record.

Measured: `cli.py report` wall seconds and peak memory (a child process's max RSS), the file's
bytes, and in headless chromium (Playwright) the time from navigation to the first rendered page
of questions (the page's `data-ready` marker), to a filter's new page, and to an opened question
(its detail block decoded). Writes results_dir/report.json.

    python -m bench.run_all report            # LOCALKG_BENCH_REPORT_QUESTIONS=1000 for a quick look
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEMO_RUN = REPO / "data" / "runs" / "demo"
METHODS = ("tog", "tog-r", "tog2", "hydra", "hydra-e", "rag", "io")
CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def make_run(out: Path, questions: int) -> None:
    """The synthetic run folder: run.json, one record file and one calls file per method."""
    (out / "calls").mkdir(parents=True)
    ids = [f"syn-{k:05d}" for k in range(questions)]
    for method in METHODS:
        records = _read(DEMO_RUN / f"{method}.jsonl")
        calls = {line["id"]: line for line in _read(DEMO_RUN / "calls" / f"{method}.jsonl")}
        with (out / f"{method}.jsonl").open("w", encoding="utf-8") as rec_out, \
                (out / "calls" / f"{method}.jsonl").open("w", encoding="utf-8") as call_out:
            for k, qid in enumerate(ids):
                template = records[k % len(records)]
                record = dict(template, id=qid, question=f"{template['question']} (#{k})")
                rec_out.write(json.dumps(record, ensure_ascii=False) + "\n")
                line = calls.get(template["id"])
                if line is not None:
                    marked = [dict(c, messages=[dict(m, content=f"{m['content']} (#{k})") if m.get("role") == "user" else m
                                                for m in c.get("messages") or []]) for c in line["calls"]]
                    call_out.write(json.dumps(dict(line, id=qid, calls=marked), ensure_ascii=False) + "\n")
    run = {"localkg_run": 1, "status": "complete", "methods": {m: {} for m in METHODS},
           "questions": {"path": None, "format": "jsonl", "count": questions, "ids": ids}}
    (out / "run.json").write_text(json.dumps(run), encoding="utf-8")


def time_report(run: Path, html: Path) -> dict[str, Any]:
    """`cli.py report` in a child process: wall seconds and its peak resident memory."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(REPO / "cli.py"), "report", str(run), "--out", str(html)],
                          cwd=REPO, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"report failed: {done.stderr[-2000:]}")
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"seconds": round(seconds, 1), "peak_rss_mb": round(peak_kib / 1024), "bytes": html.stat().st_size,
            "output": done.stdout.strip()}


def time_browser(html: Path) -> dict[str, Any]:
    """Load, filter and open-a-question times in headless chromium (3 loads, the median kept)."""
    from playwright.sync_api import sync_playwright

    loads, filters, opens = [], [], []
    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as profile:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=str(CHROMIUM), args=ARGS, headless=True, viewport={"width": 1400, "height": 1000})
        for _ in range(3):
            page = context.new_page()
            started = time.perf_counter()
            page.goto(html.resolve().as_uri(), timeout=300_000)
            page.wait_for_selector("body[data-ready='1']", timeout=300_000)
            loads.append(time.perf_counter() - started)
            filters.append(page.evaluate("""() => {
                const pick = (id, v) => { const s = document.getElementById(id); s.value = v;
                                          s.dispatchEvent(new Event('change')); };
                const t = performance.now();
                pick('f-a', '0'); pick('f-b', '6');  // right with the first method, wrong with the last
                return performance.now() - t; }""") / 1000)
            started = time.perf_counter()
            page.locator("tr.qrow").last.click()
            page.wait_for_selector("tr.detail .card", timeout=60_000)
            opens.append(time.perf_counter() - started)
            page.close()
        context.close()
    median = lambda values: round(sorted(values)[len(values) // 2], 2)  # noqa: E731
    return {"load_to_first_page_s": median(loads), "filter_s": median(filters),
            "open_question_s": median(opens), "loads_s": [round(v, 2) for v in loads]}


def run(results_dir: Path) -> dict[str, Any]:
    questions = int(os.environ.get("LOCALKG_BENCH_REPORT_QUESTIONS", "10000"))
    results: dict[str, Any] = {
        "command": "python -m bench.run_all report",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "load_average_at_start": round(os.getloadavg()[0], 2)},
        "questions": questions, "methods": list(METHODS), "skipped": {}}
    if not all((DEMO_RUN / f"{m}.jsonl").exists() for m in METHODS):
        results["skipped"]["all"] = f"{DEMO_RUN} lacks some of {', '.join(METHODS)} (run `make demo` first)"
    else:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            started = time.perf_counter()
            make_run(work / "run", questions)
            results["synthetic_run"] = {"seconds": round(time.perf_counter() - started, 1),
                                        "bytes": sum(p.stat().st_size for p in (work / "run").rglob("*") if p.is_file())}
            results["report"] = time_report(work / "run", work / "report.html")
            if CHROMIUM.exists():
                results["browser"] = time_browser(work / "report.html")
            else:
                results["skipped"]["browser"] = f"no chromium at {CHROMIUM}"
    (results_dir / "report.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    results["markdown"] = _markdown(results)
    return results


def _markdown(r: dict[str, Any]) -> str:
    if "all" in r["skipped"]:
        return f"skipped: {r['skipped']['all']}"
    rep, syn = r["report"], r["synthetic_run"]
    lines = [f"Synthetic run: {r['questions']:,} questions x {len(r['methods'])} methods "
             f"({syn['bytes'] / 1e6:,.0f} MB of records and transcripts, cloned from data/runs/demo).", "",
             "| measure | value |", "|---|---|",
             f"| `report` wall time | {rep['seconds']} s |",
             f"| `report` peak memory (max RSS) | {rep['peak_rss_mb']:,} MB |",
             f"| HTML file size | {rep['bytes'] / 1e6:.1f} MB |"]
    if "browser" in r:
        b = r["browser"]
        lines += [f"| chromium: navigation to first rendered page (median of 3) | {b['load_to_first_page_s']} s |",
                  f"| chromium: filter \"right with A, wrong with B\" over all questions | {b['filter_s'] * 1000:.0f} ms |",
                  f"| chromium: open a question (decode its block, draw graphs) | {b['open_question_s']} s |"]
    else:
        lines.append(f"| browser | skipped: {r['skipped'].get('browser')} |")
    lines.append(f"\nLoad average at start: {r['machine']['load_average_at_start']} on {r['machine']['cpus']} CPUs.")
    return "\n".join(lines)

"""The embeddings server under load (`python -m bench.run_all embedserver`, or this module alone with
`--duration` / `--clients`): `cli.py embed serve` (onnx-int8, the packaged all-MiniLM-L6-v2) on
127.0.0.1 and 200 concurrent clients for 60 s, each sending POST /v1/embeddings with 4 texts of a
few sentences over a new connection per request (as index/embed_http.py does), the next as soon as
the last is answered. The clients run in this process (asyncio) on the same cores as the server.

Reported: requests answered 200, connections reset or refused (or closed without a status),
timeouts (120 s, the client's), 5xx and other statuses, requests/s and texts/s, latency p50/p90/p99/max
(connect to last byte, queueing included) and the server's peak RSS (VmHWM). Writes
bench/results/embeddings_server_load.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULT_FILE = "embeddings_server_load.json"
CLIENTS = 200
DURATION_S = 60.0
TIMEOUT_S = 120.0
TEXTS_PER_REQUEST = 4
_WORDS = ("the", "river", "flows", "north", "through", "the", "valley", "past", "the", "old",
          "mill", "where", "the", "graph", "of", "rail", "lines", "meets", "a", "knowledge",
          "base", "of", "film", "directors", "actors", "and", "their", "birth", "places", "in",
          "nineteen", "eighty")


def _texts(seed: int) -> list[str]:
    """Four texts of 25-60 words, different for every request."""
    out = []
    for k in range(TEXTS_PER_REQUEST):
        n = 25 + (seed * 7 + k * 13) % 36
        out.append(" ".join(_WORDS[(seed + k + i * 5) % len(_WORDS)] for i in range(n)) + f" ({seed}-{k})")
    return out


def _drain(stream: Any) -> None:
    for _ in stream:
        pass


def _start_server(backend: str) -> tuple[subprocess.Popen[str], str, str]:
    process = subprocess.Popen(
        [sys.executable, "cli.py", "embed", "serve", "--port", "0", "--embed-backend", backend],
        cwd=REPO, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        env=os.environ | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    assert process.stderr is not None
    for line in process.stderr:
        if match := re.search(r"listening on (\S+) \(model (\S+),", line):
            threading.Thread(target=_drain, args=(process.stderr,), daemon=True).start()  # its log: a line a request
            return process, match.group(1), match.group(2)
    raise RuntimeError(f"embed serve exited with {process.wait()}")


def _rss_mb(pid: int, field: str) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(rf"{field}:\s+(\d+) kB", status)
    return round(int(match.group(1)) / 1024, 1) if match else -1.0


async def _request(host: str, port: int, path: str, body: bytes) -> int:
    """One POST over a new connection; the status, or an OSError / EOF on a reset."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
        await (reader.readexactly(int(length.group(1))) if length else reader.read())
        return status
    finally:
        writer.close()


async def _load(url: str, model: str, clients: int, duration_s: float) -> dict[str, Any]:
    match = re.match(r"http://([^:/]+):(\d+)(/.*)", url)
    assert match, url
    host, port, path = match.group(1), int(match.group(2)), match.group(3) + "/embeddings"
    counts = {"ok": 0, "resets": 0, "timeouts": 0, "status_5xx": 0, "other_status": 0}
    latencies: list[float] = []
    examples: dict[str, str] = {}
    deadline = time.monotonic() + duration_s
    sequence = iter(range(10**9))

    async def client() -> None:
        while time.monotonic() < deadline:
            body = json.dumps({"model": model, "input": _texts(next(sequence))}).encode()
            started = time.monotonic()
            try:
                status = await asyncio.wait_for(_request(host, port, path, body), TIMEOUT_S)
            except TimeoutError:
                counts["timeouts"] += 1
                continue
            except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
                counts["resets"] += 1
                examples.setdefault("reset", repr(exc))
                await asyncio.sleep(0.05)
                continue
            if status == 200:
                counts["ok"] += 1
                latencies.append(time.monotonic() - started)
            elif status >= 500:
                counts["status_5xx"] += 1
            else:
                counts["other_status"] += 1
                examples.setdefault("status", str(status))

    started = time.monotonic()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.monotonic() - started
    latencies.sort()

    def pct(q: float) -> float:
        return round(1000 * latencies[min(len(latencies) - 1, int(q * len(latencies)))], 1) if latencies else -1.0

    return counts | {
        "requests": sum(counts.values()), "elapsed_s": round(elapsed, 1),
        "requests_per_s": round(counts["ok"] / elapsed, 1),
        "texts_per_s": round(counts["ok"] * TEXTS_PER_REQUEST / elapsed, 1),
        "latency_ms": {"p50": pct(0.50), "p90": pct(0.90), "p99": pct(0.99), "max": pct(1.0)},
        "examples": examples,
    }


def _markdown(result: dict[str, Any]) -> str:
    load, lat = result["load"], result["load"]["latency_ms"]
    return "\n".join([
        f"`cli.py embed serve --embed-backend {result['backend']}` on 127.0.0.1, {result['clients']} concurrent clients "
        f"for {result['duration_s']:.0f} s ({TEXTS_PER_REQUEST} texts a request, a new connection each), "
        f"{result['machine']['cpus']} CPUs shared with the clients (load {result['machine']['load_average_at_start']} at start).",
        "",
        "| requests | 200 | resets | timeouts | 5xx | other | req/s | texts/s | p50 ms | p99 ms | max ms | peak RSS MB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {load['requests']} | {load['ok']} | {load['resets']} | {load['timeouts']} | {load['status_5xx']} | "
        f"{load['other_status']} | {load['requests_per_s']} | {load['texts_per_s']} | {lat['p50']} | {lat['p99']} | "
        f"{lat['max']} | {result['server_rss_mb']['peak']} |",
    ])


def run(results_dir: Path, duration_s: float = DURATION_S, clients: int = CLIENTS, backend: str = "onnx-int8") -> dict[str, Any]:
    """Run the load; writes `<results_dir>/embeddings_server_load.json`."""
    process, url, model = _start_server(backend)
    try:
        ready_rss = _rss_mb(process.pid, "VmRSS")
        result: dict[str, Any] = {
            "command": f"python -m bench.bench_embeddings_server_load --duration {duration_s:g} --clients {clients}",
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                        "load_average_at_start": round(os.getloadavg()[0], 2)},
            "backend": backend, "model": model, "clients": clients, "duration_s": duration_s,
            "texts_per_request": TEXTS_PER_REQUEST,
        }
        result["load"] = asyncio.run(_load(url, model, clients, duration_s))
        result["server_rss_mb"] = {"ready": ready_rss, "peak": _rss_mb(process.pid, "VmHWM"),
                                   "end": _rss_mb(process.pid, "VmRSS")}
        result["server_alive_at_end"] = process.poll() is None
    finally:
        process.terminate()
        process.wait(timeout=30)
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / RESULT_FILE).write_text(json.dumps(result, indent=2), encoding="utf-8")
    result["markdown"] = _markdown(result)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=DURATION_S, help="seconds of load (default 60)")
    parser.add_argument("--clients", type=int, default=CLIENTS, help="concurrent clients (default 200)")
    parser.add_argument("--embed-backend", default="onnx-int8", choices=["torch", "onnx", "onnx-int8"])
    args = parser.parse_args()
    print(run(REPO / "bench" / "results", args.duration, args.clients, args.embed_backend)["markdown"])

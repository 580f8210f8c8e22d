"""Readers never fail during a swap (issue 24, item 4).

A probe found 1 of 183 KG store opens during `index --rebuild` runs failing with RocksDB's
`Corruption: Sst file size mismatch` (a RuntimeError the CLI did not catch): opening a store is
many file opens (CURRENT, MANIFEST, every SST), and one that straddles the swap mixes the two
indexes. Readers now open through `index.paths.open_index`, which repeats an open during which
the folder at the path changed, so an open gives the previous or the new index, whole.

The test hammers opens (KG store + document store, each with a query) while another process
rebuilds the index back to back: with the exchange of the two folders (renameat2), and with the
fallback of two renames (the previous index at `.NAME.old` for a moment, then deleted).
`LOCALKG_SWAP_OPENS` sets the number of opens (default 200; 1000 for the full probe). Before the
fix, about one open in twenty failed here.
Also: a damaged store is one line and exit 2 in the CLI, never a traceback.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pyoxigraph as ox
import pytest
from click.testing import CliRunner

from cli import main
from engine.access.documents import ParquetDocumentStore
from engine.access.oxigraph_kg import OxigraphKG
from index.build import build_index
from index.doc_options import DocOptions, DocSource
from index.kg_stage import KgSource
from index.paths import IndexPaths

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "data" / "demo"
OPENS = int(os.environ.get("LOCALKG_SWAP_OPENS", "200"))
REBUILDER = """
import sys
from pathlib import Path

import index.build

out, stop, ready, mode = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
if mode == "renames":
    index.build._exchange = lambda a, b: False  # a file system without renameat2: two renames
ready.write_text("ready")
builds = 0
while not stop.exists():
    index.build.build_index(out, [], [], rebuild=True)
    builds += 1
print("builds", builds)
"""


@pytest.fixture
def demo_copy(tmp_path: Path) -> Path:
    """The demo KG and reports, documents without vectors (a rebuild takes well under a second)."""
    out = tmp_path / "demo"
    build_index(out, [KgSource(DEMO / "kg.ttl", "turtle")], [DocSource(DEMO / "reports", "files", "domain")],
                doc_options=DocOptions(vectors=False))
    return out


def _read_once(out: Path) -> tuple[int, int]:
    """Open the KG store and the document store as a method's context does; count facts and chunks."""
    kg = OxigraphKG.open(IndexPaths(out))
    facts = sum(1 for _ in kg.store.quads_for_pattern(None, None, None, ox.DefaultGraph()))
    return facts, ParquetDocumentStore(out).stats()["chunks"]


def _hammer(out: Path, opens: int, mode: str, tmp_path: Path) -> tuple[list[str], int, int]:
    """`opens` reads while another process rebuilds `out` without a pause: the failures, the
    swaps seen by the reader and the builds done."""
    expected = _read_once(out)
    stop, ready, log = tmp_path / f"stop-{mode}", tmp_path / f"ready-{mode}", tmp_path / f"rebuilder-{mode}.log"
    env = {**os.environ, "PYTHONPATH": str(REPO), "LOCALKG_PROGRESS_SECONDS": "0"}
    with log.open("w") as output:
        builder = subprocess.Popen([sys.executable, "-c", REBUILDER, str(out), str(stop), str(ready), mode],
                                   cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT)
    failures: list[str] = []
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and builder.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        for _ in range(opens):
            try:
                got = _read_once(out)
                if got != expected:
                    failures.append(f"read {got}, expected {expected}")
            except Exception as exc:  # every failure counts, whatever its type
                failures.append(f"{type(exc).__name__}: {str(exc)[:200]}")
            with contextlib.suppress(FileNotFoundError):
                seen.add(out.stat().st_ino)  # the folder at the path: another one after each swap
    finally:
        stop.write_text("stop")
        builder.wait(timeout=120)
    assert builder.returncode == 0, log.read_text()[-2000:]
    builds = int(log.read_text().split("builds ")[-1].split()[0])
    return failures, len(seen) - 1, builds


@pytest.mark.parametrize("mode", ["exchange", "renames"])
def test_opens_during_rebuilds_never_fail(demo_copy: Path, tmp_path: Path, mode: str) -> None:
    opens = OPENS if mode == "exchange" else max(OPENS // 2, 1)
    started = time.monotonic()
    failures, swaps, builds = _hammer(demo_copy, opens, mode, tmp_path)
    seconds = time.monotonic() - started
    print(f"{mode}: {opens} opens, {len(failures)} failures, {swaps} swaps seen, {builds} builds, {seconds:.1f}s")
    assert failures == [], f"{len(failures)} of {opens} opens failed: {failures[:5]}"
    assert builds >= 3 and swaps >= 3, "the reads did not overlap the rebuilds"
    assert not [p.name for p in demo_copy.parent.iterdir() if p.name.startswith(".demo.")]


def test_a_damaged_store_is_one_line_and_exit_2(demo_copy: Path) -> None:
    for sst in sorted((demo_copy / "kg").glob("*.sst"))[:3]:
        sst.write_bytes(sst.read_bytes()[:100])  # cut short: RocksDB's `Corruption: Sst file size mismatch`
    result = CliRunner().invoke(main, ["kg", "sparql", "--index", str(demo_copy), "ASK { ?s ?p ?o }"])
    assert result.exit_code == 2, result.output
    assert "cannot open the KG store read-only" in result.output and "Corruption" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1

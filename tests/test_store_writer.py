"""The store writer's threads (index/store_writer.py): results of unparsed batches come back in
queue order whatever finishes first, a raw load with removals runs alone, errors surface."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pyoxigraph as ox
import pytest

from index.store_writer import StoreWriter, writer_count
from ingest.kg_batch import KgBatch

EX = "http://example.org/"


def _line(i: int) -> bytes:
    return f"<{EX}s{i}> <{EX}p> <{EX}o{i}> .\n".encode()


def _batch(first: int, n: int, *, bad: bool = False) -> KgBatch:
    raw = b"".join(_line(i) for i in range(first, first + n)) + (b"<broken\n" if bad else b"")
    return KgBatch(raw=raw, unparsed_facts=n, lines=n, reparse=lambda: KgBatch())


def test_unparsed_results_come_back_in_queue_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = ox.Store(str(tmp_path / "kg"))
    slow_first = threading.Event()
    original = StoreWriter._write

    def write(self: StoreWriter, kind: str, payload: object) -> object:
        if kind == "unparsed" and payload[0].lines == 500:  # type: ignore[index]
            time.sleep(0.3)  # the first batch finishes last
            slow_first.set()
        return original(self, kind, payload)

    monkeypatch.setattr(StoreWriter, "_write", write)
    batches = [_batch(0, 500), _batch(500, 10, bad=True), _batch(510, 20)]
    with StoreWriter(store, writers=3) as writer:
        for batch in batches:
            writer.load_unparsed(batch, [])
        writer.drain()
        done = writer.finished()
    assert slow_first.is_set()
    assert [(b.lines, ok) for b, ok in done] == [(500, True), (10, False), (20, True)]
    assert len(store) == 520


def test_a_raw_load_with_removals_runs_alone(tmp_path: Path) -> None:
    """As with one writer: what a raw load removes and a later write adds stays in the store."""
    store = ox.Store(str(tmp_path / "kg"))
    label = ox.Quad(ox.NamedNode(f"{EX}s1"), ox.NamedNode(f"{EX}label"), ox.Literal("one"))
    raw = _line(1) + f"<{EX}s1> <{EX}label> \"one\" .\n".encode()
    with StoreWriter(store, writers=2) as writer:
        writer.load_raw(raw, [label])
        writer.extend([label])  # a later batch states it as a fact
        writer.load_raw(_line(2), [])
    assert label in store and len(store) == 3


def test_a_writer_error_reaches_the_caller(tmp_path: Path) -> None:
    store = ox.Store(str(tmp_path / "kg"))
    with pytest.raises(TypeError), StoreWriter(store, writers=2) as writer:
        writer.extend(["not a quad"])  # type: ignore[list-item]
        writer.drain()


def test_the_writer_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCALKG_KG_WRITERS", "3")
    assert writer_count() == 3
    monkeypatch.setenv("LOCALKG_KG_WRITERS", "")
    assert 1 <= writer_count() <= 2

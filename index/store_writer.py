"""Writes to the Oxigraph store on background threads while the caller parses the next batch.

`bulk_load` of raw bytes releases the GIL, and two loads at once use two cores: a 64 MiB batch
is about one internal batch of Oxigraph's loader, so one load at a time keeps one core busy
(2M generated Wikidata-like lines, 64 MiB batches: 10.3 s with one writer, 6.7 s with two; a
raw `bulk_load` of the whole file: 7.3 s). So the writer runs `writers` threads (the CPUs,
at most `MAX_WRITERS`; `$LOCALKG_KG_WRITERS` sets it).

The store holds a set of quads, so loads and inserts give the same store in any order. Two
things keep the order of the input:
- a raw load with quads to remove afterwards (labels or filtered predicates that the raw bytes
  brought in) runs alone: every write queued before it is done first, and none after it starts
  until it is done, as a single writer would do;
- the results of unparsed batches (loaded, or rejected by the store's parser) come back through
  `finished()` in the order the batches were queued, so their rejects are logged in file order.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Any

import pyoxigraph as ox

from ingest.kg_batch import KgBatch

WRITERS_ENV = "LOCALKG_KG_WRITERS"
MAX_WRITERS = 2


def writer_count() -> int:
    """`$LOCALKG_KG_WRITERS`, else the CPUs this process may use, at most `MAX_WRITERS`."""
    value = os.environ.get(WRITERS_ENV, "").strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(MAX_WRITERS, cpus))


class StoreWriter:
    """Background writes to `store` (see the module docstring); a context manager."""

    def __init__(self, store: ox.Store, writers: int | None = None) -> None:
        self.store = store
        self.writers = writers or writer_count()
        self._queue: queue.Queue[tuple[int, str, Any] | None] = queue.Queue(maxsize=self.writers + 1)
        self._finished: queue.SimpleQueue[tuple[KgBatch, bool]] = queue.SimpleQueue()
        self._results: dict[int, tuple[KgBatch, bool] | None] = {}
        self._next_result = 0
        self._serial = 0
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self._threads = [threading.Thread(target=self._work, name=f"kg-writer-{i}", daemon=True)
                         for i in range(self.writers)]

    def __enter__(self) -> StoreWriter:
        for thread in self._threads:
            thread.start()
        return self

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            serial, kind, payload = item
            result = None
            try:
                if self._error is None:
                    result = self._write(kind, payload)
            except BaseException as exc:  # surfaced in the caller's thread
                self._error = self._error or exc
            finally:
                self._done(serial, result)
                self._queue.task_done()

    def _done(self, serial: int, result: tuple[KgBatch, bool] | None) -> None:
        """Release the unparsed batches' results in queue order."""
        with self._lock:
            self._results[serial] = result
            while self._next_result in self._results:
                ready = self._results.pop(self._next_result)
                self._next_result += 1
                if ready is not None:
                    self._finished.put(ready)

    def _write(self, kind: str, payload: Any) -> tuple[KgBatch, bool] | None:
        if kind == "raw":
            data, not_facts = payload
            self.store.bulk_load(data, ox.RdfFormat.N_TRIPLES)
            for quad in not_facts:
                self.store.remove(quad)
        elif kind == "unparsed":
            batch, meta = payload
            try:
                # One load, so one set of new files in the store: N-Triples lines are N-Quads too.
                if batch.unparsed_meta:
                    self.store.bulk_load(batch.raw + batch.unparsed_meta, ox.RdfFormat.N_QUADS)
                else:
                    self.store.bulk_load(batch.raw, ox.RdfFormat.N_TRIPLES)
            except (SyntaxError, ValueError):
                return batch, False
            self.store.bulk_extend(meta)
            batch.raw, batch.unparsed_meta = None, b""  # loaded: the bytes need not wait for the caller
            return batch, True
        else:
            self.store.bulk_extend(payload)
        return None

    def _put(self, kind: str, payload: Any) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put((self._serial, kind, payload))
        self._serial += 1

    def load_raw(self, data: bytes, not_facts: list[ox.Quad]) -> None:
        """Bulk-load N-Triples bytes, then remove `not_facts` (alone: see the module docstring)."""
        if not_facts:
            self.drain()
            self._put("raw", (data, not_facts))
            self.drain()
        else:
            self._put("raw", (data, not_facts))

    def extend(self, quads: list[ox.Quad]) -> None:
        if quads:
            self._put("extend", quads)

    def load_unparsed(self, batch: KgBatch, meta: list[ox.Quad]) -> None:
        """Bulk-load `batch.raw` and then `meta` (only if the store accepts `batch.raw`)."""
        self._put("unparsed", (batch, meta))

    def finished(self) -> list[tuple[KgBatch, bool]]:
        """The unparsed batches handled since the last call, in order, each with whether it loaded."""
        done = []
        while True:
            try:
                done.append(self._finished.get_nowait())
            except queue.Empty:
                return done

    def drain(self) -> None:
        """Wait until every queued write is done (raising the writers' error, if any)."""
        self._queue.join()
        if self._error is not None:
            raise self._error

    def __exit__(self, *exc_info: object) -> None:
        for _ in self._threads:
            self._queue.put(None)  # each writer stops at a mark, after what is queued before it
        for thread in self._threads:
            thread.join()
        if self._error is not None and exc_info[0] is None:
            raise self._error

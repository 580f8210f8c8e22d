"""Degrees summed from per-batch Arrow tables (the N-Triples scan's), merged as they come."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa

from ingest.nt_scan import DEGREE_SCHEMA


class DegreeSum:
    """Sums `id -> n` tables. Pending tables are merged once they hold more rows than the merged
    one (and at least a million), so memory stays near two rows per entity, not one per line."""

    def __init__(self) -> None:
        self._merged = DEGREE_SCHEMA.empty_table()
        self._pending: list[pa.Table] = []
        self._pending_rows = 0

    def add(self, degrees: pa.Table) -> None:
        self._pending.append(degrees)
        self._pending_rows += degrees.num_rows
        if self._pending_rows > max(self._merged.num_rows, 1_000_000):
            self._merge()

    def _merge(self) -> None:
        if not self._pending:
            return
        summed = pa.concat_tables([self._merged, *self._pending]).group_by("id").aggregate([("n", "sum")])
        self._merged = pa.table([summed["id"], summed["n_sum"]], schema=DEGREE_SCHEMA)
        self._pending, self._pending_rows = [], 0

    def as_counter(self) -> Counter[str]:
        """The sums as a Counter keyed by id (the form the entity table is written from)."""
        self._merge()
        ids, counts = self._merged.column("id").to_pylist(), self._merged.column("n").to_pylist()
        return Counter(dict(zip(ids, counts, strict=True)))

"""Degrees summed from per-batch Arrow tables (the N-Triples scan's), merged as they come."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc

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

    def total(self) -> pa.Table:
        """The sums, one row per id whose sum is positive (a removal can take a degree to 0)."""
        self._merge()
        return self._merged.filter(pc.greater(self._merged.column("n"), 0))


def counter_table(counts: Counter[str]) -> pa.Table:
    """A Counter as an (id, n) degree table."""
    return pa.table([pa.array(list(counts), pa.string()), pa.array(list(counts.values()), pa.int64())],
                    schema=DEGREE_SCHEMA)

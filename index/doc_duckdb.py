"""DuckDB for the documents stage: a connection that spills to disk beyond DUCKDB_MEMORY,
SQL string quoting, and the queries over documents.parquet (the doc ids of each entity, the
number of linked entities).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# DuckDB's memory for the chunk sort and the entity queries (it spills to disk beyond it);
# LOCALKG_DUCKDB_MEMORY overrides (a DuckDB size such as 4GB).
DUCKDB_MEMORY = "2GB"


def _sql_str(text: str) -> str:
    return text.replace("'", "''")


@contextlib.contextmanager
def _duckdb(work_dir: Path) -> Iterator[Any]:
    """A DuckDB connection that spills to `work_dir`/.duckdb-tmp beyond DUCKDB_MEMORY (or
    LOCALKG_DUCKDB_MEMORY), removed afterwards."""
    import duckdb

    spill = work_dir / ".duckdb-tmp"
    con = duckdb.connect()
    try:
        con.execute(f"SET temp_directory = '{_sql_str(str(spill))}'")
        con.execute(f"SET memory_limit = '{_sql_str(os.environ.get('LOCALKG_DUCKDB_MEMORY', DUCKDB_MEMORY))}'")
        con.execute("SET preserve_insertion_order = true")
        yield con
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)


# The doc ids of each linked entity, in document order, from documents.parquet ({documents}).
_DOC_IDS_QUERY = """
    SELECT entity, list(doc_id ORDER BY file_row_number) AS doc_ids
    FROM read_parquet('{documents}', file_row_number = true) WHERE entity IS NOT NULL GROUP BY entity
"""


def _count_linked_entities(documents: Path) -> int:
    with _duckdb(documents.parent) as con:
        query = f"SELECT count(DISTINCT entity) FROM read_parquet('{_sql_str(str(documents))}')"
        return int(con.execute(query).fetchone()[0])

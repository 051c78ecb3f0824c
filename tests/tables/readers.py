"""Both readers of a table, Spark's own parquet scan of a local table and the `statekeeper_delta` data
source, compared row for row: what lets a job read local tables without Python (statekeeper.tables.parquet_scan)."""
from __future__ import annotations

from statekeeper.tables import Warehouse, delta_log
from statekeeper.tables.catalog import ALL_TABLES
from statekeeper.tables.engine import DeltaRsEngine


def rows_of(df) -> list[str]:
    return sorted(repr(r.asDict(recursive=True)) for r in df.collect())


def _types(df) -> list[tuple[str, str]]:
    # Spark's file scan reports every column nullable; names and types are what readers depend on.
    return [(f.name, f.dataType.simpleString()) for f in df.schema.fields]


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def same_reads(spark, warehouse: Warehouse, table: str, **read) -> int:
    """Assert Spark's own scan and the data source read `table` alike; the number of rows."""
    scanned = DeltaRsEngine().read(spark, warehouse, table, **read)
    sourced = DeltaRsEngine(local_parquet=False).read(spark, warehouse, table, **read)
    rows = rows_of(scanned)
    assert ("FileScan parquet" in _plan(scanned) or not rows) and "Python" not in _plan(scanned), _plan(scanned)
    assert "Python" in _plan(sourced), _plan(sourced)
    assert scanned.columns == sourced.columns
    assert _types(scanned) == _types(sourced)
    assert rows == rows_of(sourced)
    return len(rows)


def every_table_reads_alike(spark, warehouse: Warehouse) -> dict[str, int]:
    """Compare both readers on every catalog table `warehouse` holds; rows by table."""
    present = [s.name for s in ALL_TABLES if delta_log.table_exists(warehouse, s.name)]
    assert present, f"no Statekeeper table in {warehouse.uri}"
    return {name: same_reads(spark, warehouse, name) for name in present}

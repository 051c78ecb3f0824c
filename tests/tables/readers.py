"""The two readers of a table compared row for row: Delta's Spark reader (what the jobs read) and the delta-rs
TableReader (what the CLI, `explain` and the report page read, where no Spark runs)."""
from __future__ import annotations

import pyarrow as pa

from statekeeper.tables import Warehouse, delta_log
from statekeeper.tables.catalog import ALL_TABLES
from statekeeper.tables.delta_spark import DeltaSparkEngine
from statekeeper.tables.reader import TableReader


def _sorted_maps(value):
    """`value` with every dict's keys in sorted order: a map's entries have no order of their own (Spark's reader
    and delta-rs hand the same map's keys back in different orders)."""
    if isinstance(value, dict):
        return {k: _sorted_maps(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted_maps(v) for v in value]
    return value


def rows_of(df) -> list[str]:
    return sorted(repr(_sorted_maps(r.asDict(recursive=True))) for r in df.collect())


def _arrow_rows(table) -> list[str]:
    """TableReader's rows as rows_of renders Spark's: zoned timestamps as Spark returns them (naive UTC, the
    session's time zone), maps as dicts."""
    from datetime import datetime

    def plain(value):
        if isinstance(value, datetime):
            return value.replace(tzinfo=None)
        if isinstance(value, list) and value and isinstance(value[0], tuple):
            return {k: plain(v) for k, v in value}
        if isinstance(value, list):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    # an empty map comes back as an empty list of pairs, which `plain` cannot tell from an empty list
    maps = {f.name for f in table.schema if pa.types.is_map(f.type)}
    return sorted(repr(_sorted_maps({k: {} if k in maps and v == [] else plain(v) for k, v in row.items()}))
                  for row in table.to_pylist())


def same_reads(spark, warehouse: Warehouse, table: str) -> int:
    """Assert Delta's Spark reader and the delta-rs TableReader read `table` alike; the number of rows."""
    df = DeltaSparkEngine().read(spark, warehouse, table)
    rows = rows_of(df)
    other = _arrow_rows(TableReader(warehouse).read(table))
    assert rows == other, (table, sorted(set(rows) - set(other))[:3], sorted(set(other) - set(rows))[:3])
    return len(rows)


def every_table_reads_alike(spark, warehouse: Warehouse) -> dict[str, int]:
    """Compare both readers on every catalog table `warehouse` holds; rows by table."""
    present = [s.name for s in ALL_TABLES if delta_log.table_exists(warehouse, s.name)]
    assert present, f"no Statekeeper table in {warehouse.uri}"
    return {name: same_reads(spark, warehouse, name) for name in present}

"""Tables a test sets up without Spark (an old warehouse, an audit row, a forged cut), written by delta-rs's own
writer: where a test runs no Spark job, starting one only to fabricate its input would cost the suite seconds per
table. The jobs' tables are written by Delta's Spark writer (statekeeper.tables.delta_spark); both are plain Delta."""
from __future__ import annotations

import pyarrow as pa

from statekeeper.tables import TableSpec, Warehouse
from statekeeper.tables.delta_log import CommitResult


def append_rows(warehouse: Warehouse, spec: TableSpec, rows: pa.Table) -> CommitResult:
    """Append `rows` to `spec`'s table in one commit (created with the spec's partitioning when absent; columns the
    spec gained since are added, as the jobs' writes add them); the new version."""
    from deltalake import DeltaTable, write_deltalake

    location = warehouse.delta_location(spec.name)
    write_deltalake(location, spec.conform(rows), mode="append", partition_by=list(spec.partition_by) or None,
                    schema_mode="merge", storage_options=warehouse.storage_options())
    return CommitResult(spec.name, DeltaTable(location, storage_options=warehouse.storage_options()).version())

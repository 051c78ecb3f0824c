"""The table warehouse maintenance writes (`statekeeper.maintain`): one audit row per run, with what
each table's maintenance did. docs/tables.md documents every column."""
from __future__ import annotations

import pyarrow as pa

from statekeeper.tables.catalog.audit import (WAREHOUSE, MODE, OPTIONS, STATEKEEPER_VERSION, TABLE_VERSIONS,
                                              RUN_AND_STATUS, RUN_TIMES, AIRFLOW_RUN_AND_ERROR)
from statekeeper.tables.spec import TableSpec
from statekeeper.tables.spec import column as _f

# One table of a run (statekeeper.tables.maintenance.TableMaintenance): its versions and files before and
# after, what compaction, vacuum and the checkpoint did, and why it was skipped.
MAINTAINED_TABLE = pa.struct([
    _f("name", pa.string(), False),
    _f("outcome", pa.string(), False),
    _f("version_before", pa.int64()),
    _f("version_after", pa.int64()),
    _f("files_before", pa.int64()),
    _f("files_after", pa.int64()),
    _f("stored_files_before", pa.int64()),
    _f("stored_files_after", pa.int64()),
    _f("stored_bytes_before", pa.int64()),
    _f("stored_bytes_after", pa.int64()),
    _f("files_compacted", pa.int64()),
    _f("files_added", pa.int64()),
    _f("files_vacuumed", pa.int64()),
    _f("bytes_vacuumed", pa.int64()),
    _f("checkpoint_version", pa.int64()),
    _f("pinned_versions", pa.list_(pa.int64())),
    _f("skipped", pa.string()),
    _f("notes", pa.list_(pa.string())),
])

MAINTENANCE_RUNS = TableSpec(
    "maintenance_runs",
    pa.schema([
        *RUN_AND_STATUS,
        MODE,
        *RUN_TIMES,
        WAREHOUSE,
        OPTIONS,
        STATEKEEPER_VERSION,
        _f("retention_seconds", pa.float64()),
        TABLE_VERSIONS,
        _f("files_before", pa.int64(), False),
        _f("files_after", pa.int64(), False),
        _f("files_compacted", pa.int64(), False),
        _f("files_added", pa.int64(), False),
        _f("files_vacuumed", pa.int64(), False),
        _f("bytes_vacuumed", pa.int64(), False),
        _f("stored_files_before", pa.int64(), False),
        _f("stored_files_after", pa.int64(), False),
        _f("tables", pa.list_(MAINTAINED_TABLE), False),
        _f("problems", pa.list_(pa.string()), False),
        *AIRFLOW_RUN_AND_ERROR,
    ]),
    (),
    "Audit row per warehouse maintenance run: per table, what compaction, vacuum and the checkpoint did.",
    producer="maintain_warehouse",
)

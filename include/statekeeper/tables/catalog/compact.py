"""Tables written by compaction (`statekeeper.compact`). docs/compaction.md documents every column.

`compactions` holds one row per snapshot a run looked at: the source `_metadata`, the result (a new
snapshot directory, or the same `_metadata` replaced in place with the original kept beside it), sizes
before and after, and what moved. `compaction_runs` is the audit row per run, with the inline-state
report (per job and operator).
"""
from __future__ import annotations

import pyarrow as pa

from statekeeper.tables.catalog.audit import (FINISHED_AT, WAREHOUSE, MODE, OPTIONS, RUN_AND_STATUS, RUN_TIMES,
                                              RELEASE_AND_VERSIONS, AIRFLOW_RUN_AND_ERROR)
from statekeeper.tables.spec import TableSpec
from statekeeper.tables.spec import column as _f

COMPACTIONS = TableSpec(
    "compactions",
    pa.schema([
        *RUN_AND_STATUS,
        _f("placement", pa.string(), False),
        _f("source_metadata_uri", pa.string(), False),
        _f("source_etag", pa.string()),
        _f("result_metadata_uri", pa.string()),
        _f("backup_uri", pa.string()),
        _f("root", pa.string(), False),
        _f("job_dir", pa.string(), False),
        _f("job_id", pa.string()),
        _f("checkpoint_id", pa.int64()),
        _f("snapshot_type", pa.string()),
        _f("metadata_bytes_before", pa.int64()),
        _f("metadata_bytes_after", pa.int64()),
        _f("files_written", pa.int64(), False),
        _f("bytes_written", pa.int64(), False),
        _f("kept_inline", pa.int64(), False),
        _f("result_sha256", pa.string()),
        _f("problem", pa.string()),
        _f("seconds", pa.float64()),
        FINISHED_AT,
    ]),
    (),
    "One row per snapshot a compaction run looked at: the result, sizes before and after, files written.",
    producer="compact",
)

REPORT_ROW = pa.struct([
    _f("job_dir", pa.string()), _f("operator_id", pa.string()), _f("operator_name", pa.string()),
    _f("operator_uid", pa.string()), _f("snapshots", pa.int64()), _f("inline_bytes", pa.int64()),
    _f("movable_bytes", pa.int64()), _f("handle_count", pa.int64()),
])

COMPACTION_RUNS = TableSpec(
    "compaction_runs",
    pa.schema([
        *RUN_AND_STATUS,
        MODE,
        *RUN_TIMES,
        WAREHOUSE,
        OPTIONS,
        *RELEASE_AND_VERSIONS,
        _f("selected", pa.int64(), False),
        _f("compacted", pa.int64(), False),
        _f("failed", pa.int64(), False),
        _f("metadata_bytes_before", pa.int64(), False),
        _f("metadata_bytes_after", pa.int64(), False),
        _f("files_written", pa.int64(), False),
        _f("bytes_written", pa.int64(), False),
        _f("problems", pa.list_(pa.string()), False),
        _f("report", pa.list_(REPORT_ROW), False),
        # Legacy: the JSON report of warehouse maintenance when compaction ran it (mode maintain_warehouse).
        # Maintenance is a job of its own now (maintenance_runs); no run writes this any more, and the
        # column stays so that warehouses written before keep their schema and rows.
        _f("maintenance", pa.string()),
        *AIRFLOW_RUN_AND_ERROR,
    ]),
    (),
    "Audit row per compaction run: counts and the inline-state report.",
    producer="compact",
)

COMPACT_TABLES = (COMPACTIONS,)

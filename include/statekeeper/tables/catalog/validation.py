"""Tables written by the validation job. docs/chains-and-validation.md documents every column.

`validation_results` and `validation_jobs` hold the latest run (each run overwrites them in one
commit; earlier runs stay readable through Delta time travel, their versions are in
`validation_runs`, one appended audit row per run).
"""
from __future__ import annotations

import pyarrow as pa

from statekeeper.tables.catalog.index import PARTITION_BY  # (root_id, bucket), as the index tables
from statekeeper.tables.catalog.audit import (RUN_ID, STATUS, WAREHOUSE, ROOTS, RUN_AND_STATUS, RUN_TIMES,
                                              RELEASE_AND_VERSIONS, AIRFLOW_RUN_AND_ERROR)
from statekeeper.tables.spec import TIMESTAMP as TS
from statekeeper.tables.spec import TableSpec, snapshot_columns
from statekeeper.tables.spec import column as _f



VALIDATION_RESULTS = TableSpec(
    "validation_results",
    pa.schema([
        RUN_ID,
        *snapshot_columns(),
        _f("check", pa.string(), False),
        _f("severity", pa.string(), False),
        _f("subject", pa.string()),
        _f("detail", pa.string(), False),
        _f("files", pa.int64()),
        _f("bytes", pa.int64()),
        _f("restorable", pa.bool_()),
        _f("validated_at", TS, False),
    ]),
    PARTITION_BY,
    "Findings per snapshot (one row per offending file or directory) plus one `snapshot` summary row "
    "per snapshot with its worst severity and whether it is restorable.",
    producer="validate",
)

VALIDATION_JOBS = TableSpec(
    "validation_jobs",
    pa.schema([
        RUN_ID,
        _f("root", pa.string(), False),
        _f("root_id", pa.string(), False),
        _f("job_dir", pa.string(), False),
        _f("bucket", pa.string(), False),    # job_dir's bucket (statekeeper.tables.catalog.job_bucket)
        _f("location", pa.string(), False),
        _f("kind", pa.string(), False),
        _f("job_id", pa.string()),
        STATUS,
        _f("snapshots", pa.int64(), False),
        _f("snapshots_with_errors", pa.int64(), False),
        _f("snapshots_with_warnings", pa.int64(), False),
        _f("newest_uri", pa.string()),
        _f("newest_checkpoint_id", pa.int64()),
        _f("newest_restorable", pa.bool_()),
        _f("latest_restorable_uri", pa.string()),
        _f("latest_restorable_checkpoint_id", pa.int64()),
        _f("validated_at", TS, False),
    ]),
    PARTITION_BY,
    "Per job directory (and per savepoint directory): the newest retained checkpoint, whether it is "
    "restorable, and the latest restorable one.",
    producer="validate",
)

VALIDATION_RUNS = TableSpec(
    "validation_runs",
    pa.schema([
        *RUN_AND_STATUS,
        *RUN_TIMES,
        WAREHOUSE,
        ROOTS,
        *RELEASE_AND_VERSIONS,
        _f("snapshots", pa.int64(), False),
        _f("snapshots_with_errors", pa.int64(), False),
        _f("snapshots_with_warnings", pa.int64(), False),
        _f("findings", pa.map_(pa.string(), pa.int64())),
        _f("jobs", pa.int64(), False),
        _f("jobs_unrestorable", pa.int64(), False),
        _f("unrestorable", pa.list_(pa.string()), False),
        _f("files_statted", pa.int64(), False),
        _f("quality_success", pa.bool_()),
        _f("quality_failures", pa.list_(pa.string())),
        _f("report_uri", pa.string()),
        *AIRFLOW_RUN_AND_ERROR,
    ]),
    (),
    "Audit row per validation run.",
    producer="validate",
)

VALIDATION_TABLES = (VALIDATION_RESULTS, VALIDATION_JOBS)

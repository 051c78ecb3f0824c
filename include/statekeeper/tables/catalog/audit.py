"""The columns every job's audit table (`<job>_runs`) shares, declared once: which run, how it ended, when, where,
with which release, the table versions it read and wrote, the Airflow run that started it and its error.

Each table keeps its columns in the order it always had (every warehouse written so far holds them so, and a spec
that reordered them would describe tables nobody wrote), so these are single columns each spec places, not a block
to prepend; a data table that
names the run that wrote a row (`run_id`) or its error uses the same column.
"""
from __future__ import annotations

import pyarrow as pa

from statekeeper.tables.spec import TIMESTAMP as TS
from statekeeper.tables.spec import column

RUN_ID = column("run_id", pa.string(), False)
STATUS = column("status", pa.string(), False)
STARTED_AT = column("started_at", TS, False)
FINISHED_AT = column("finished_at", TS, False)
WAREHOUSE = column("warehouse", pa.string(), False)
ROOTS = column("roots", pa.list_(pa.string()), False)
MODE = column("mode", pa.string(), False)
OPTIONS = column("options", pa.string(), False)
STATEKEEPER_VERSION = column("statekeeper_version", pa.string(), False)
# {table: version} of the index tables a run read, pinned at its start (statekeeper.jobs.inputs).
SOURCE_VERSIONS = column("source_versions", pa.map_(pa.string(), pa.int64()))
# {table: version} of the tables the run committed.
TABLE_VERSIONS = column("table_versions", pa.map_(pa.string(), pa.int64()))
AIRFLOW_RUN_ID = column("airflow_run_id", pa.string())
ERROR = column("error", pa.string())

# The runs of them most audit tables hold in this order.
RUN_AND_STATUS = (RUN_ID, STATUS)
RUN_TIMES = (STARTED_AT, FINISHED_AT)
RELEASE_AND_VERSIONS = (STATEKEEPER_VERSION, SOURCE_VERSIONS, TABLE_VERSIONS)
AIRFLOW_RUN_AND_ERROR = (AIRFLOW_RUN_ID, ERROR)

"""The table the report job writes: one audit row per report, with the totals the page showed, so
the next report can draw the trend (docs/reports.md)."""
from __future__ import annotations

import pyarrow as pa

from statekeeper.tables.catalog.audit import (WAREHOUSE, RUN_AND_STATUS, RUN_TIMES, RELEASE_AND_VERSIONS,
                                              AIRFLOW_RUN_AND_ERROR)
from statekeeper.tables.spec import TableSpec
from statekeeper.tables.spec import column as _f

REPORT_RUNS = TableSpec(
    "report_runs",
    pa.schema([
        *RUN_AND_STATUS,
        *RUN_TIMES,
        WAREHOUSE,
        *RELEASE_AND_VERSIONS,
        _f("index_run_id", pa.string()),
        _f("report_uri", pa.string()),
        _f("directories", pa.int64(), False),
        _f("files", pa.int64(), False),
        _f("bytes_total", pa.int64(), False),
        _f("bytes_pinned", pa.int64(), False),
        _f("bytes_reclaimable", pa.int64(), False),
        _f("bytes_inline", pa.int64(), False),
        _f("jobs", pa.int64(), False),
        _f("jobs_unrestorable", pa.int64(), False),
        *AIRFLOW_RUN_AND_ERROR,
    ]),
    (),
    "Audit row per report run: where the page is and the totals it showed (the next report's trend).",
    producer="report",
)

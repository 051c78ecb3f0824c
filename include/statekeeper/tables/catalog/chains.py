"""Tables written by the chains job. docs/chains-and-validation.md documents every column.

`dependencies` and `pins` hold the same edges seen from both ends, each partitioned for its
question: `dependencies` by the dependent snapshot's unit ("what does this snapshot need?"),
`pins` by the target's unit ("who keeps this directory's files alive?"). Both are rewritten as a
whole by every run (the graph is global: one new snapshot can change any lineage); the run's
audit row in `chains_runs` names the index table versions they were computed from.
"""
from __future__ import annotations

import pyarrow as pa

from statekeeper.tables.catalog.index import PARTITION_BY  # (root_id, bucket), as the index tables
from statekeeper.tables.catalog.audit import (RUN_ID, WAREHOUSE, RUN_AND_STATUS, RUN_TIMES, RELEASE_AND_VERSIONS,
                                              AIRFLOW_RUN_AND_ERROR)
from statekeeper.tables.spec import TableSpec, snapshot_columns
from statekeeper.tables.spec import column as _f

_EDGE = [
    _f("relation", pa.string(), False),
    _f("dependency", pa.string(), False),
    _f("depth", pa.int32(), False),
    _f("via", pa.list_(pa.string()), False),
    _f("files", pa.int64()),
    _f("directories", pa.int64()),
    _f("bytes", pa.int64()),
    RUN_ID,
]

DEPENDENCIES = TableSpec(
    "dependencies",
    pa.schema([
        *snapshot_columns(),
        _f("target_kind", pa.string(), False),
        _f("target_uri", pa.string(), False),
        _f("target_snapshot_uri", pa.string()),
        _f("target_root", pa.string()),
        _f("target_root_id", pa.string(), False),
        _f("target_job_dir", pa.string(), False),
        _f("target_job_id", pa.string()),
        *_EDGE,
    ]),
    PARTITION_BY,
    "Per snapshot: every directory whose files it uses (direct, with files and bytes) and the "
    "directories its lineage reaches through other jobs and savepoints (transitive, with depth and path).",
    producer="chains",
)

PINS = TableSpec(
    "pins",
    pa.schema([
        _f("root", pa.string()),             # the target's root; null for external targets
        _f("root_id", pa.string(), False),   # the target's root id ("external" outside every root)
        _f("job_dir", pa.string(), False),   # the target's job directory ("." for flat layouts)
        _f("bucket", pa.string(), False),    # job_dir's bucket (statekeeper.tables.catalog.job_bucket)
        _f("target_kind", pa.string(), False),
        _f("target_uri", pa.string(), False),
        _f("target_snapshot_uri", pa.string()),
        _f("target_job_id", pa.string()),
        _f("snapshot_uri", pa.string(), False),
        _f("snapshot_root", pa.string(), False),
        _f("snapshot_root_id", pa.string(), False),
        _f("snapshot_job_dir", pa.string(), False),
        _f("snapshot_job_id", pa.string()),
        _f("snapshot_checkpoint_id", pa.int64()),
        _f("snapshot_type", pa.string()),
        *_EDGE,
    ]),
    PARTITION_BY,
    "Per job directory / savepoint / snapshot directory: the retained snapshots that keep some of its "
    "files alive (direct rows, with files and bytes pinned) and those whose lineage passes through it "
    "(transitive rows).",
    producer="chains",
)

CHAINS_RUNS = TableSpec(
    "chains_runs",
    pa.schema([
        *RUN_AND_STATUS,
        *RUN_TIMES,
        WAREHOUSE,
        *RELEASE_AND_VERSIONS,
        _f("snapshots", pa.int64(), False),
        _f("unparsed_snapshots", pa.int64(), False),
        _f("unparsed_examples", pa.list_(pa.string()), False),
        _f("direct_rows", pa.int64(), False),
        _f("transitive_rows", pa.int64(), False),
        _f("cross_directory_rows", pa.int64(), False),
        _f("max_depth", pa.int32(), False),
        *AIRFLOW_RUN_AND_ERROR,
    ]),
    (),
    "Audit row per chains run. `unparsed_snapshots` > 0 means some `_metadata` could not be read: "
    "their references are unknown, so the graph is incomplete and GC must not act on it.",
    producer="chains",
)

CHAINS_TABLES = (DEPENDENCIES, PINS)

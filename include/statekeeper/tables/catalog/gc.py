"""Tables written by garbage collection (`statekeeper.gc`). docs/gc.md documents every column.

`gc_actions` is the persisted plan: one row per file a run decided to delete, written before the
run touches storage, then rewritten (its run's partition only) with each file's outcome. `gc_runs`
is an append-only event log: every state transition of a run appends one row, so a reader takes
each run's newest row, and a run killed mid-way is visible as one whose newest row is `running`.
"""
from __future__ import annotations

import pyarrow as pa

from statekeeper.tables.catalog.audit import (RUN_ID, WAREHOUSE, ROOTS, MODE, OPTIONS, STATEKEEPER_VERSION,
                                              SOURCE_VERSIONS, TABLE_VERSIONS, RUN_AND_STATUS, RUN_TIMES,
                                              AIRFLOW_RUN_AND_ERROR)
from statekeeper.tables.spec import TIMESTAMP as TS
from statekeeper.tables.spec import TableSpec
from statekeeper.tables.spec import column as _f

GC_BREAKDOWN = pa.struct([
    pa.field("root", pa.string()),
    pa.field("job_dir", pa.string()),
    pa.field("reason", pa.string()),
    pa.field("files", pa.int64()),
    pa.field("bytes", pa.int64()),
])

# One ownerless job directory of a run (statekeeper.gc.plan): unreferenced files and bytes in it, and
# whether the run held them back or planned them (vocabulary.OwnerlessVerdict).
GC_OWNERLESS = pa.struct([
    pa.field("root", pa.string()),
    pa.field("job_dir", pa.string()),
    pa.field("files", pa.int64()),
    pa.field("bytes", pa.int64()),
    pa.field("verdict", pa.string()),
])

# One job directory with ForSt databases in checkpoint storage (statekeeper.gc.forst): its databases, how
# many can no longer be written, their bytes, the unreferenced files of those the run reclaims (before the
# ownerless rule), and the unreferenced files of the others, left alone as possibly live.
GC_FORST = pa.struct([
    pa.field("root", pa.string()),
    pa.field("job_dir", pa.string()),
    pa.field("databases", pa.int64()),
    pa.field("dead_databases", pa.int64()),
    pa.field("bytes", pa.int64()),
    pa.field("dead_files", pa.int64()),
    pa.field("dead_bytes", pa.int64()),
    pa.field("unjudged_files", pa.int64()),
    pa.field("unjudged_bytes", pa.int64()),
])

# What held one object store to the versions a mover relied on (statekeeper.jobs.protection; gc_runs and dr_runs):
# the store (its bucket or container and endpoint), the precondition (storage.enforcement.Guard), its self-test's
# verdict (enforced, ignored, unknown, not_tested) and the protection used (vocabulary.Protection).
STORE_PROTECTION = pa.struct([
    pa.field("store", pa.string()),
    pa.field("guard", pa.string()),
    pa.field("verdict", pa.string()),
    pa.field("protection", pa.string()),
    pa.field("detail", pa.string()),
])

GC_ACTIONS = TableSpec(
    "gc_actions",
    pa.schema([
        RUN_ID,
        _f("uri", pa.string(), False),
        _f("root", pa.string(), False),
        _f("root_id", pa.string(), False),
        _f("job_dir", pa.string(), False),
        _f("bucket", pa.string(), False),
        _f("relative_path", pa.string(), False),
        _f("kind", pa.string(), False),
        _f("size", pa.int64(), False),
        _f("mtime", TS, False),
        _f("etag", pa.string()),
        _f("reason", pa.string(), False),
        _f("snapshot_uri", pa.string()),
        _f("delete_order", pa.int32(), False),
        _f("outcome", pa.string(), False),
        _f("message", pa.string()),
        _f("attempted_at", TS),
    ]),
    ("run_id",),
    "One row per file a garbage-collection run planned to delete, with its outcome.",
    producer="gc",
)

GC_RUNS = TableSpec(
    "gc_runs",
    pa.schema([
        *RUN_AND_STATUS,
        MODE,
        _f("plan_run_id", pa.string(), False),
        *RUN_TIMES,
        WAREHOUSE,
        ROOTS,
        STATEKEEPER_VERSION,
        OPTIONS,
        SOURCE_VERSIONS,
        TABLE_VERSIONS,
        _f("blocked", pa.list_(pa.string()), False),
        _f("expired_snapshots", pa.int64(), False),
        _f("planned", pa.int64(), False),
        _f("planned_bytes", pa.int64(), False),
        _f("deleted", pa.int64(), False),
        _f("deleted_bytes", pa.int64(), False),
        _f("already_gone", pa.int64(), False),
        _f("changed_skipped", pa.int64(), False),
        _f("failed", pa.int64(), False),
        _f("retries", pa.int64(), False),
        _f("new_snapshots", pa.int64(), False),
        _f("breakdown", pa.list_(GC_BREAKDOWN), False),
        *AIRFLOW_RUN_AND_ERROR,
        # Added after the table's first release: last and nullable, so a gc_runs table created before
        # gains them on the next append (delta_log.add_missing_columns) and its older rows read as null.
        _f("ownerless", pa.list_(GC_OWNERLESS)),
        # The run's grace period (--older-than), typed: warehouse maintenance keeps the `references`
        # versions GC reads inside it. Older rows have it only in `options` (its `older_than`).
        _f("grace_seconds", pa.float64()),
        # Job directories with ForSt databases (GC_FORST), largest first.
        _f("forst", pa.list_(GC_FORST)),
        # Claimable tails (statekeeper.gc.plan): per job its unreferenced files newer than its newest retained
        # checkpoint that no failed checkpoint explains, in GC_OWNERLESS's shape (verdict: held_back, or
        # roots_complete when the run declared its roots complete), largest first.
        _f("claimable", pa.list_(GC_OWNERLESS)),
        # Per object store of a deleting run: whether its self-test proved conditional deletes, and the protection
        # used (STORE_PROTECTION: precondition or listing); null in rows of runs that deleted nothing or were
        # written before the column existed.
        _f("protection", pa.list_(STORE_PROTECTION)),
    ]),
    (),
    "Event log of garbage-collection runs: one row per state transition (requested, planned, running, "
    "completed, blocked, failed) with the plan's counts and bytes per root, job directory and reason.",
    producer="gc",
)

GC_TABLES = (GC_ACTIONS,)

"""Tables written by the disaster-recovery copy (`statekeeper.replicate`). docs/dr-copy.md documents every column.

`dr_copies` holds one row per snapshot a run tried to copy (or re-verified): `verified` rows name a
target `_metadata` that restores with every object it names present at the target; `failed` rows say
which object or rule stopped it, and no target `_metadata` was written for them. `dr_files` is the
copy plan with outcomes, one row per (copy, referenced object), partitioned by run: what each copy
consists of at the target, what `--mode verify` re-checks later. `dr_runs` is the audit row per run.
"""
from __future__ import annotations

import pyarrow as pa

from statekeeper.tables.catalog.gc import STORE_PROTECTION
from statekeeper.tables.catalog.audit import (RUN_ID, WAREHOUSE, ROOTS, MODE, OPTIONS, ERROR, RUN_AND_STATUS,
                                              RUN_TIMES, RELEASE_AND_VERSIONS, AIRFLOW_RUN_AND_ERROR)
from statekeeper.tables.spec import TIMESTAMP as TS
from statekeeper.tables.spec import TableSpec
from statekeeper.tables.spec import column as _f

DR_COPIES = TableSpec(
    "dr_copies",
    pa.schema([
        *RUN_AND_STATUS,
        _f("source_metadata_uri", pa.string(), False),
        _f("target_metadata_uri", pa.string()),
        _f("source_root", pa.string(), False),
        _f("target_root", pa.string(), False),
        _f("job_dir", pa.string(), False),
        _f("job_id", pa.string()),
        _f("checkpoint_id", pa.int64()),
        _f("snapshot_type", pa.string()),
        _f("selected_by", pa.string(), False),
        _f("files", pa.int64(), False),
        _f("bytes", pa.int64(), False),
        _f("files_copied", pa.int64(), False),
        _f("bytes_copied", pa.int64(), False),
        _f("files_skipped", pa.int64(), False),
        _f("bytes_skipped", pa.int64(), False),
        _f("verification", pa.string(), False),
        _f("metadata_sha256", pa.string()),
        _f("metadata_bytes", pa.int64()),
        _f("problem", pa.string()),
        ERROR,
        *RUN_TIMES,
        # Added after the first release (nullable, last; older rows read null): the copy's recovery point.
        _f("source_completed_at", TS),   # when the source snapshot completed: its `_metadata`'s mtime at the source
        _f("published_at", TS),          # when the target `_metadata` was written: its mtime at the target
    ]),
    (),
    "One row per snapshot a DR run copied (or re-verified): verified with its target `_metadata`, or failed "
    "with the object and the reason.",
    producer="dr_copy",
)

DR_FILES = TableSpec(
    "dr_files",
    pa.schema([
        RUN_ID,
        _f("source_metadata_uri", pa.string(), False),
        _f("target_metadata_uri", pa.string(), False),
        _f("source_uri", pa.string(), False),
        _f("target_uri", pa.string(), False),
        _f("size", pa.int64()),
        _f("checksum", pa.string()),
        _f("outcome", pa.string(), False),
        _f("method", pa.string()),
        _f("verified", pa.bool_()),
        _f("message", pa.string()),
        # Added after the first release (nullable, last: delta_log.add_missing_columns widens older tables;
        # their rows read it as null, which proves nothing, so those objects are checked by content again).
        _f("target_version", pa.string()),
    ]),
    ("run_id",),
    "The copy plan with outcomes: one row per referenced object of each copy, source and target.",
    producer="dr_copy",
)

# One job directory whose newest checkpoint a follow round refused (statekeeper.replicate.follow): the root, the job
# directory, the refused `_metadata` (null when the job directory itself was refused) and why.
DR_REFUSAL = pa.struct([
    pa.field("root", pa.string()),
    pa.field("job_dir", pa.string()),
    pa.field("metadata_uri", pa.string()),
    pa.field("reason", pa.string()),
])

DR_RUNS = TableSpec(
    "dr_runs",
    pa.schema([
        *RUN_AND_STATUS,
        MODE,
        *RUN_TIMES,
        WAREHOUSE,
        ROOTS,
        _f("targets", pa.map_(pa.string(), pa.string())),
        OPTIONS,
        *RELEASE_AND_VERSIONS,
        _f("snapshots", pa.int64(), False),
        _f("verified", pa.int64(), False),
        _f("failed", pa.int64(), False),
        _f("fallbacks", pa.int64(), False),
        _f("files_copied", pa.int64(), False),
        _f("bytes_copied", pa.int64(), False),
        _f("files_skipped", pa.int64(), False),
        _f("bytes_skipped", pa.int64(), False),
        _f("problems", pa.list_(pa.string()), False),
        _f("notes", pa.list_(pa.string()), False),
        *AIRFLOW_RUN_AND_ERROR,
        # Added after the first release (nullable, last): per target store and precondition the copy may rely on,
        # its self-test's verdict and the protection used (STORE_PROTECTION: precondition, source_recheck or
        # existence_check); null in rows written before the column existed.
        _f("protection", pa.list_(STORE_PROTECTION)),
        # A follow round's refusals, one per job directory whose newest checkpoint it refused (DR_REFUSAL; its
        # text is also a line of `problems`, which is cut at 50): what alerting counts per job. Null in rows of
        # other modes and in rows written before the column existed.
        _f("refused", pa.list_(DR_REFUSAL)),
    ]),
    (),
    "Audit row per DR copy run: counts, targets, and the snapshots that could not be copied.",
    producer="dr_copy",
)

DR_TABLES = (DR_COPIES, DR_FILES)

"""The tables the index job writes: names, schemas, partitioning. docs/tables.md documents every column.

All tables but `index_runs` are partitioned by (root_id, bucket), where `bucket` is a stable hash
of `job_dir` modulo JOB_BUCKETS (`job_bucket`). One partition per job directory made one tiny
parquet file per job per table (thousands per run: the classic small-file problem); a fixed
number of buckets bounds the files per root and table. `job_dir` stays an ordinary column and the
rows of a bucket file are sorted by it, so a per-job read prunes to one bucket and then filters.
Re-indexing a changed job directory rewrites its bucket (the other jobs' rows are carried over
unchanged). `job_dir` is the first path segment below the root: a job id, a savepoint directory
name, `chk-N`/`shared`/`taskowned` for roots written with create-subdir=false, or "." for objects
directly inside the root.
"""
from __future__ import annotations

import zlib

import pyarrow as pa

from statekeeper.tables.catalog.audit import (STATUS, WAREHOUSE, ROOTS, STATEKEEPER_VERSION, TABLE_VERSIONS,
                                              AIRFLOW_RUN_ID, ERROR, RUN_AND_STATUS, RUN_TIMES)
from statekeeper.tables.spec import TableSpec
from statekeeper.tables.spec import column as _f

TS = pa.timestamp("us", tz="UTC")
PARTITION_BY = ("root_id", "bucket")
ROOT_LEVEL_JOB_DIR = "."
# Fixed forever for a table: changing it would move jobs between buckets, so the tables carry the
# value nowhere but here. 16 keeps a root's files per table at <= 16 while a changed job rewrites
# about 1/16 of its root.
JOB_BUCKETS = 16


def job_bucket(job_dir: str) -> str:
    """The `bucket` partition value of a job directory: CRC-32 of its UTF-8 name mod JOB_BUCKETS,
    two digits ("00".."15"). CRC-32 is stable across processes and Python versions (unlike hash())."""
    return f"{zlib.crc32(job_dir.encode()) % JOB_BUCKETS:02d}"


def _location_fields() -> list[pa.Field]:
    return [_f("root", pa.string(), False), _f("root_id", pa.string(), False), _f("job_dir", pa.string(), False),
            _f("bucket", pa.string(), False)]


FILES = TableSpec(
    "files",
    pa.schema([
        _f("uri", pa.string(), False),
        *_location_fields(),
        _f("relative_path", pa.string(), False),
        _f("kind", pa.string(), False),
        _f("job_id", pa.string()),
        _f("checkpoint_id", pa.int64()),
        _f("size", pa.int64(), False),
        _f("mtime", TS, False),
        _f("etag", pa.string()),
        _f("index_run_id", pa.string(), False),
    ]),
    PARTITION_BY,
    "Every object under every root, as listed by the last index run that covered its job directory.",
    producer="index",
)

OPERATOR = pa.struct([
    _f("operator_id", pa.string()),
    _f("operator_name", pa.string()),
    _f("operator_uid", pa.string()),
    _f("parallelism", pa.int32()),
    _f("max_parallelism", pa.int32()),
    _f("subtask_states", pa.int32()),
    _f("finished", pa.bool_()),
])

SNAPSHOTS = TableSpec(
    "snapshots",
    pa.schema([
        _f("uri", pa.string(), False),
        *_location_fields(),
        _f("job_id", pa.string()),
        _f("layout_kind", pa.string(), False),
        _f("dir_checkpoint_id", pa.int64()),
        STATUS,
        ERROR,
        _f("metadata_version", pa.int32()),
        _f("checkpoint_id", pa.int64()),
        _f("snapshot_type", pa.string()),
        _f("snapshot_format", pa.string()),
        _f("sharing", pa.string()),
        _f("metadata_size", pa.int64(), False),
        _f("metadata_mtime", TS, False),
        _f("metadata_etag", pa.string()),
        _f("inline_bytes", pa.int64()),
        _f("inline_handle_count", pa.int64()),
        _f("reference_count", pa.int64()),
        _f("referenced_file_count", pa.int64()),
        _f("referenced_bytes", pa.int64()),
        _f("operator_count", pa.int32()),
        _f("operators", pa.list_(OPERATOR)),
        _f("parser_version", pa.string(), False),
        _f("index_run_id", pa.string(), False),
    ]),
    PARTITION_BY,
    "One row per `_metadata` object, parsed or with the reason it could not be.",
    producer="index",
)

REFERENCES = TableSpec(
    "references",
    pa.schema([
        _f("snapshot_uri", pa.string(), False),
        *_location_fields(),
        _f("snapshot_job_id", pa.string()),
        _f("snapshot_checkpoint_id", pa.int64()),
        _f("file_uri", pa.string(), False),
        _f("stored_path", pa.string()),
        _f("handle_kind", pa.string(), False),
        _f("scope", pa.string()),
        _f("stated_size", pa.int64()),
        _f("segment_start", pa.int64()),
        _f("segment_length", pa.int64()),
        _f("operator_id", pa.string()),
        _f("operator_name", pa.string()),
        _f("operator_uid", pa.string()),
        _f("subtask", pa.int32()),
        _f("slot", pa.string()),
        _f("role", pa.string()),
        _f("local_name", pa.string()),
        _f("file_root", pa.string()),
        _f("file_job_dir", pa.string()),
        _f("file_job_id", pa.string()),
        _f("file_kind", pa.string(), False),
    ]),
    PARTITION_BY,
    "One row per referenced physical file (or file segment) per snapshot; partitioned like the snapshot.",
    producer="index",
)

INLINE_STATE = TableSpec(
    "inline_state",
    pa.schema([
        _f("snapshot_uri", pa.string(), False),
        *_location_fields(),
        _f("snapshot_checkpoint_id", pa.int64()),
        _f("operator_id", pa.string()),
        _f("operator_name", pa.string()),
        _f("operator_uid", pa.string()),
        _f("handle_kind", pa.string(), False),
        _f("slot", pa.string()),
        _f("inline_bytes", pa.int64(), False),
        _f("handle_count", pa.int64(), False),
        _f("subtask_count", pa.int32(), False),
    ]),
    PARTITION_BY,
    "State bytes stored inside `_metadata`, per snapshot, operator, handle kind and slot.",
    producer="index",
)

INDEX_RUNS = TableSpec(
    "index_runs",
    pa.schema([
        *RUN_AND_STATUS,
        *RUN_TIMES,
        ROOTS,
        WAREHOUSE,
        _f("engine", pa.string(), False),
        STATEKEEPER_VERSION,
        _f("units", pa.int64(), False),
        _f("units_rewritten", pa.int64(), False),
        _f("units_unchanged", pa.int64(), False),
        _f("units_failed", pa.int64(), False),
        _f("objects_listed", pa.int64(), False),
        _f("bytes_listed", pa.int64(), False),
        _f("metadata_found", pa.int64(), False),
        _f("metadata_parsed", pa.int64(), False),
        _f("metadata_reused", pa.int64(), False),
        _f("metadata_failed", pa.int64(), False),
        _f("errors", pa.list_(pa.string()), False),
        TABLE_VERSIONS,
        _f("data_interval_start", TS),
        _f("data_interval_end", TS),
        AIRFLOW_RUN_ID,
        _f("options", pa.string()),
    ]),
    (),
    "Audit row per index run (successful, partial or failed).",
    producer="index",
)

INDEX_TABLES = (FILES, SNAPSHOTS, REFERENCES, INLINE_STATE)


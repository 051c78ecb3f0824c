"""Writing a local table with Spark's own parquet writer, so that a write starts no Python process.

Through the `statekeeper_delta` data source a write plans in one Python process, writes in Python
workers and commits in a third process; in a fresh spark-submit the first write cost 9-14 s and later
ones under a second. On a local warehouse the driver plans the write itself (`write_plan`), Spark's
JVM writes the parquet files into a staging directory of the table, the driver moves each file to the
place and name the data source would have given it (`files.data_file_path`) and makes the same single
Delta commit with delta-rs (`delta_log.commit`), strict against the planned version.

Files carry `numRecords` (from their parquet footers) as their only Delta statistics: the min/max the
data source computes serve other engines' data skipping, which no Statekeeper reader uses, and would
need every row read back on the driver here.

Partition values come back from Spark's `column=value` directories, where Spark escapes some characters
as %XX and writes null and empty values alike as `__HIVE_DEFAULT_PARTITION__`; a write that meets that
name is discarded before anything is committed and made through the data source instead.
"""
from __future__ import annotations

import os
import shutil
import uuid
from typing import Any
from urllib.parse import unquote

import pyarrow.parquet as pq

from statekeeper.tables import delta_log
from statekeeper.tables.delta_log import CommitResult
from statekeeper.tables.files import DataFile, data_file_path
from statekeeper.tables.parquet_scan import local_root
from statekeeper.tables.spark import spark_schema
from statekeeper.tables.spec import TableSpec
from statekeeper.tables.staging import STAGING_DIR
from statekeeper.tables.warehouse import Warehouse
from statekeeper.tables.write_plan import plan_write

# The staging lies below the table's directory, so a rename into the table never crosses filesystems; a
# staging a killed write left is removed by warehouse maintenance (statekeeper.tables.staging).
_NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# Spark writes timestamps as INT96 unless told otherwise; Delta and pyarrow readers expect microseconds.
TIMESTAMP_CONF = "spark.sql.parquet.outputTimestampType"
TIMESTAMP_TYPE = "TIMESTAMP_MICROS"


class _Unwritable(Exception):
    """The rows cannot be written this way; nothing was committed and the staging is gone."""


def write(df: Any, warehouse: Warehouse, spec: TableSpec, *, mode: str = "append",
          replace: list[dict[str, str]] | None = None, expected_version: int | None = None,
          metadata: dict[str, Any] | None = None) -> CommitResult | None:
    """Write `df` (exactly `spec`'s columns, in any order) to its table in one commit; None when it must
    be written through the data source instead (nothing was committed or left behind)."""
    # Partition columns are strings (TableSpec requires it): their directory names are their values.
    root = local_root(warehouse, spec.name)
    if root is None:
        return None
    spec.check_columns(df.columns)
    plan = plan_write(warehouse, spec, mode, replace=replace, expected_version=expected_version)
    commit_id = uuid.uuid4().hex
    staging = os.path.join(root, STAGING_DIR, commit_id)
    try:
        adds = _stage(df, warehouse, plan.spec, root, staging)
    except _Unwritable:
        return None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    # On a failure commit() asks the log, and deletes the moved files only when its commit is absent.
    return delta_log.commit(warehouse, plan.spec, adds, list(plan.removes), read_version=plan.read_version,
                            strict=plan.strict, metadata=metadata, commit_id=commit_id)


def _nullable(t: Any) -> Any:
    """Spark type `t` with every nested field nullable: Spark refuses a cast to NOT NULL fields, and its
    file writer stores every field as optional anyway (the data source's parquet files mark them so too)."""
    from pyspark.sql.types import ArrayType, MapType, StructField, StructType

    if isinstance(t, StructType):
        return StructType([StructField(f.name, _nullable(f.dataType), True) for f in t.fields])
    if isinstance(t, ArrayType):
        return ArrayType(_nullable(t.elementType), True)
    if isinstance(t, MapType):
        return MapType(_nullable(t.keyType), _nullable(t.valueType), True)
    return t


def _stage(df: Any, warehouse: Warehouse, spec: TableSpec, root: str, staging: str) -> list[DataFile]:
    """Spark writes the rows into `staging`; each non-empty file then moves to its place in the table."""
    from pyspark.sql import functions as F

    session = df.sparkSession
    if session.conf.get(TIMESTAMP_CONF, None) != TIMESTAMP_TYPE:
        # Read by the writer from the session's conf only (a write option does not reach it).
        session.conf.set(TIMESTAMP_CONF, TIMESTAMP_TYPE)
    rows = df.select(*(F.col(f.name).cast(_nullable(f.dataType)) for f in spark_schema(spec.schema).fields))
    writer = rows.write.mode("errorifexists").option("compression", "zstd")
    if spec.partition_by:
        writer = writer.partitionBy(*spec.partition_by)
    writer.parquet("file://" + staging)
    staged: list[tuple[str, dict[str, str]]] = []
    for directory, _dirs, names in os.walk(staging):
        rel = os.path.relpath(directory, staging)
        segments = [] if rel == "." else rel.split(os.sep)
        if any(s.startswith(("_", ".")) for s in segments):
            continue  # Spark's own _temporary
        for name in names:
            if name.startswith(("_", ".")) or not name.endswith(".parquet"):
                continue   # _SUCCESS, Hadoop's .crc files
            values = {}
            for segment in segments:
                column, _, value = segment.partition("=")
                if value == _NULL_PARTITION:
                    raise _Unwritable(segment)
                values[column] = unquote(value)
            if sorted(values) != sorted(spec.partition_by):
                raise _Unwritable(rel)
            staged.append((os.path.join(directory, name), values))
    adds: list[DataFile] = []
    try:
        for path, values in staged:
            count = pq.read_metadata(path).num_rows
            if count == 0:
                continue   # Spark writes an empty file for an empty unpartitioned write; the data source none
            rel = data_file_path(spec, values)
            target = os.path.join(root, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.rename(path, target)
            st = os.stat(target)
            adds.append(DataFile(path=rel, size=st.st_size, partition_values=values,
                                 modification_time=int(st.st_mtime * 1000), num_records=count))
    except BaseException:
        delta_log.abort_files(warehouse, spec, adds)
        raise
    return adds

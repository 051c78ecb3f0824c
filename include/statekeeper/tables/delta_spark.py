"""The delta-spark engine: Delta Lake's own Spark writer and reader.

Used only when the session has Delta's jars and `DeltaSparkSessionExtension` (see
`engine.delta_spark_available`); those jars are not on PyPI, so this path is exercised where they
are installed. Semantics match `DeltaRsEngine`: one commit per table, partition replaces via
`replaceWhere`, optimistic concurrency failures surfaced as ConcurrentCommitError.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from functools import reduce
from typing import Any

import pyarrow as pa

from statekeeper.tables.arrow_codec import table_from_ipc
from statekeeper.tables.changeset import ChangeOp
from statekeeper.tables.delta_log import CommitResult
from statekeeper.tables.engine_base import ChangesetResult, TableEngine, WriteMode
from statekeeper.tables.errors import ConcurrentCommitError, TableError
from statekeeper.tables.spark import spark_schema
from statekeeper.tables.spec import TableSpec
from statekeeper.tables.warehouse import Warehouse

_CONFLICTS = ("ConcurrentAppendException", "ConcurrentDeleteReadException", "ConcurrentDeleteDeleteException",
              "ConcurrentTransactionException", "MetadataChangedException", "ProtocolChangedException",
              "ConcurrentWriteException")


def spark_path(warehouse: Warehouse, table: str) -> str:
    uri = warehouse.table_uri(table)
    # Hadoop's S3 connector is s3a://; the object is the same.
    return "s3a://" + uri[len("s3://"):] if uri.startswith("s3://") else uri


def _current_version(spark: Any, path: str) -> int | None:
    from delta.tables import DeltaTable  # type: ignore[import-not-found]

    if not DeltaTable.isDeltaTable(spark, path):
        return None
    return int(DeltaTable.forPath(spark, path).history(1).collect()[0]["version"])


def _partition_predicate(spec: TableSpec, partitions: list[dict[str, str]]) -> str:
    def lit(value: str) -> str:
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"

    clauses = ["(" + " AND ".join(f"`{c}` = {lit(p[c])}" for c in spec.partition_by) + ")" for p in partitions]
    return " OR ".join(clauses) if clauses else "false"


def _decoder(spec: TableSpec):
    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for payload in batch.column("payload").to_pylist():
                yield from spec.conform(table_from_ipc(payload)).to_batches()
    return decode


class DeltaSparkEngine(TableEngine):
    name = "delta-spark"

    def read(self, spark: Any, warehouse: Warehouse, table: str, *, version: int | None = None,
             partitions: dict[str, list[str]] | None = None) -> Any:
        from pyspark.sql import functions as F

        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        df = reader.load(spark_path(warehouse, table))
        if partitions:
            df = df.where(reduce(lambda a, b: a & b, [F.col(c).isin(list(v)) for c, v in partitions.items()]))
        return df

    def write(self, df: Any, warehouse: Warehouse, spec: TableSpec, *, mode: WriteMode = "append",
              replace: list[dict[str, str]] | None = None, expected_version: int | None = None,
              metadata: dict[str, Any] | None = None) -> CommitResult:
        spark = df.sparkSession
        path = spark_path(warehouse, spec.name)
        before = _current_version(spark, path)
        if expected_version is not None and before != expected_version:
            raise ConcurrentCommitError(warehouse.table_uri(spec.name), expected_version, before)
        out = df.select(*spec.schema.names)
        writer = out.write.format("delta").option("userMetadata", json.dumps(metadata or {}))
        if before is None:
            writer = writer.partitionBy(*spec.partition_by)
        if mode == "append":
            # A table written before the spec gained a nullable column gets it (as add_missing_columns
            # does for delta-rs); `out` holds only the spec's columns, so nothing else can be merged in.
            writer = writer.mode("append").option("mergeSchema", "true")
        elif mode == "overwrite":
            writer = writer.mode("overwrite")
        elif mode == "replace_partitions":
            writer = writer.mode("overwrite").option("replaceWhere", _partition_predicate(spec, replace or []))
        else:
            raise TableError(f"unknown write mode {mode!r}")
        self._save(writer, path, warehouse.table_uri(spec.name), before)
        return CommitResult(spec.name, _current_version(spark, path))

    def append_rows(self, spark: Any, warehouse: Warehouse, spec: TableSpec, rows: Any, *,
                    metadata: dict[str, Any] | None = None) -> CommitResult:
        return self.write(spark.createDataFrame(spec.conform(rows)), warehouse, spec, mode="append", metadata=metadata)

    @staticmethod
    def _save(writer: Any, path: str, uri: str, read_version: int | None) -> None:
        try:
            writer.save(path)
        except Exception as exc:  # Py4JJavaError carrying io.delta.exceptions.*
            text = str(exc)
            if any(name in text for name in _CONFLICTS):
                raise ConcurrentCommitError(uri, read_version, None, text.splitlines()[0]) from exc
            raise

    def commit_changeset(self, changes: Any, warehouse: Warehouse, specs: list[TableSpec],
                         read_versions: dict[str, int | None], *,
                         metadata: dict[str, Any] | None = None, written: Any = None) -> ChangesetResult:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        spark = changes.sparkSession
        staged = changes.persist(StorageLevel.DISK_ONLY)
        try:
            if staged.where(F.col("op") == ChangeOp.FILE).limit(1).count():
                # Producer-written files would be silently dropped below: refuse instead.
                raise TableError("the delta-spark engine cannot commit change set 'file' rows (data files written "
                                 "by the producer); produce 'add' rows for it")
            notes = [json.loads(bytes(r["payload"]).decode())
                     for r in staged.where(F.col("op") == ChangeOp.NOTE).select("payload").toLocalIterator()]
            for spec in specs:
                path = spark_path(warehouse, spec.name)
                current = _current_version(spark, path)
                if current != read_versions.get(spec.name):
                    raise ConcurrentCommitError(warehouse.table_uri(spec.name), read_versions.get(spec.name), current)
            result = ChangesetResult(notes=notes)
            for spec in specs:
                path = spark_path(warehouse, spec.name)
                mine = staged.where(F.col("table") == spec.name)
                touched = [json.loads(r["partition"]) for r in
                           mine.where(F.col("op").isin(ChangeOp.ADD, ChangeOp.REMOVE)).select("partition").distinct().toLocalIterator()]
                read_version = read_versions.get(spec.name)
                if not touched and read_version is not None:
                    result.committed[spec.name] = CommitResult(spec.name, None)
                    continue
                rows = (mine.where(F.col("op") == ChangeOp.ADD).select("payload")
                        .mapInArrow(_decoder(spec), spark_schema(spec.schema)))
                writer = rows.write.format("delta").option("userMetadata", json.dumps(metadata or {}))
                if read_version is None:
                    writer = writer.partitionBy(*spec.partition_by).mode("overwrite")
                else:
                    writer = writer.mode("overwrite").option("replaceWhere", _partition_predicate(spec, touched))
                self._save(writer, path, warehouse.table_uri(spec.name), read_version)
                result.committed[spec.name] = CommitResult(spec.name, _current_version(spark, path))
            return result
        finally:
            staged.unpersist()

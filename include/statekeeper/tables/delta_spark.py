"""The delta-spark engine: Delta Lake's own Spark writer and reader, the table engine of every Spark job.

Every write runs in one Delta transaction started here (`DeltaLog.startTransaction`), so an expected version is
checked against the transaction's own snapshot: a commit that lands after it is judged by Delta's conflict
detection at commit time (`io.delta.exceptions.Concurrent*`), never by a read-then-write check with a window
between them. Both surface as ConcurrentCommitError, and nothing of the losing write is committed. The write
itself is Delta's `WriteIntoDelta` (what `df.write.format("delta")` runs), given that transaction instead of one it
would start: partitioning, `replaceWhere`, `mergeSchema` and new tables behave exactly as Delta's writer does.
"""
from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import reduce
from typing import Any, Literal
from urllib.parse import unquote

import pyarrow as pa

from statekeeper.tables.arrow_codec import table_from_ipc
from statekeeper.tables.changeset import ChangeOp
from statekeeper.tables.delta_log import COMMIT_ID_KEY, CommitResult
from statekeeper.tables.errors import (
    CommitOutcomeUnknownError,
    ConcurrentCommitError,
    PartialChangesetError,
    TableError,
)
from statekeeper.tables.s3a import configure as configure_s3a
from statekeeper.tables.spark import spark_schema
from statekeeper.tables.spec import TableSpec
from statekeeper.tables.warehouse import Warehouse

log = logging.getLogger("statekeeper.tables")

WriteMode = Literal["append", "overwrite", "replace_partitions"]


@dataclass
class ChangesetResult:
    committed: dict[str, CommitResult] = field(default_factory=dict)
    notes: list[Any] = field(default_factory=list)


_CONFLICTS = ("ConcurrentAppendException", "ConcurrentDeleteReadException", "ConcurrentDeleteDeleteException",
              "ConcurrentTransactionException", "MetadataChangedException", "ProtocolChangedException",
              "ConcurrentWriteException")


def spark_path(warehouse: Warehouse, table: str) -> str:
    uri = warehouse.table_uri(table)
    # Hadoop's S3 connector is s3a://; the object is the same.
    return "s3a://" + uri[len("s3://"):] if uri.startswith("s3://") else uri


def _current_version(spark: Any, path: str) -> int | None:
    return _read_version(_delta_log(spark, path).startTransaction())


def _delta_log(spark: Any, path: str) -> Any:
    return spark._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)


# Delta deletes commit files older than the log retention (30 days) when it writes a checkpoint. Jobs read tables at
# pinned versions (the index cut, GC's grace period) and the index restores to the last audited run: a version whose
# commit file is gone cannot be read at all. New tables get the property from the session's table defaults
# (statekeeper.launch.jars.spark_conf); older ones get it before their first write here.
KEEP_LOGS_PROPERTY = "delta.enableExpiredLogCleanup"


def _keeps_expired_logs(txn: Any) -> bool:
    value = txn.metadata().configuration().get(KEEP_LOGS_PROPERTY)
    return bool(value.isDefined()) and str(value.get()).lower() == "false"


def _keep_expired_logs(spark: Any, path: str) -> None:
    quoted = path.replace("`", "``")
    spark.sql(f"ALTER TABLE delta.`{quoted}` SET TBLPROPERTIES ('{KEEP_LOGS_PROPERTY}' = 'false')")


def _commit(txn: Any, actions: Any, operation: Any, tags: Any) -> int | None:
    """Commit the transaction; the new version, or None when it had nothing to commit."""
    committed = txn.commitIfNeeded(actions, operation, tags)
    return int(committed.get()) if committed.isDefined() else None


def _landed(warehouse: Warehouse, table: str, commit_id: str, read_version: int | None,
            exc: BaseException) -> int | None:
    """After a commit reported an error: the version the log holds it as (the answer was lost, the commit
    happened), or None when the log shows it absent. CommitOutcomeUnknownError when the log cannot be read."""
    from statekeeper.tables import delta_log

    try:
        return delta_log.find_commit(warehouse, table, commit_id, after=read_version)
    except Exception as lookup:  # noqa: BLE001 - any failure here leaves the outcome unknown
        raise CommitOutcomeUnknownError(
            f"commit {commit_id} to Delta table {warehouse.table_uri(table)} failed ({exc}) and the log could not be "
            f"read to tell whether it landed ({lookup}). Re-run the job: it reads the log again and repairs "
            "whichever way it went") from exc


def _discard_written(warehouse: Warehouse, table: str, actions: Any) -> None:
    """Delete the data files a transaction wrote whose commit lost a conflict. Delta leaves them to the next vacuum;
    they are this write's own (unique names no commit holds: Delta raised before it wrote a commit file), so they go
    now. A file that cannot be deleted is logged and left to maintenance's vacuum, which deletes unreferenced files."""
    base = warehouse.table_uri(table)
    uris = []
    for action in _scala_list(actions):
        if action.getClass().getSimpleName() == "AddFile":
            rel = unquote(str(action.path()))
            head, _, name = rel.rpartition("/")
            uris.append(f"{base}/{rel}")
            if warehouse.is_local:   # Hadoop's local file system writes a checksum beside each file
                uris.append(f"{base}/{head + '/' if head else ''}.{name}.crc")
    if not uris:
        return
    report = warehouse.file_io().delete_many(uris)
    if report.failed:
        log.warning("%d file(s) the losing write to %s wrote could not be deleted (maintenance's vacuum will): %s",
                    len(report.failed), base, "; ".join(str(f) for f in report.failed[:3]))


def _scala_list(seq: Any) -> list[Any]:
    items, iterator = [], seq.iterator()
    while iterator.hasNext():
        items.append(iterator.next())
    return items


def _read_version(txn: Any) -> int | None:
    version = int(txn.readVersion())
    return None if version < 0 else version


def _conflict(exc: BaseException) -> str | None:
    """The first line of a Delta conflict exception carried by a py4j error, or None."""
    text = str(exc)
    if not any(name in text for name in _CONFLICTS):
        return None
    for line in text.splitlines():
        if any(name in line for name in _CONFLICTS):
            return line.strip()
    return text.splitlines()[0]


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


def _with_trailing_columns(df: Any, table: str) -> Any:
    """`df` with the nullable columns its catalog spec gained after the table was written, as nulls: a table gets
    them on its next write (mergeSchema), and until then no job has to ask whether a table predates a column."""
    from pyspark.sql import functions as F

    from statekeeper.tables.catalog import ALL_TABLES

    spec = next((s for s in ALL_TABLES if s.name == table), None)
    if spec is None:
        return df
    missing = [f for f in spec.schema if f.name not in df.columns]
    if not missing:
        return df
    if any(not f.nullable for f in missing):
        raise TableError(f"Delta table {table} lacks the required column(s) "
                         f"{', '.join(f.name for f in missing if not f.nullable)} of its spec: it was not written "
                         "by Statekeeper, or by a newer release")
    types = {f.name: f.dataType for f in spark_schema(pa.schema(missing)).fields}
    for f in missing:
        df = df.withColumn(f.name, F.lit(None).cast(types[f.name]))
    return df


class DeltaSparkEngine:
    """Reads and writes Statekeeper's Delta tables in a Spark session that has Delta's jars (`select_engine`)."""

    name = "delta-spark"

    def read(self, spark: Any, warehouse: Warehouse, table: str, *, version: int | None = None,
             partitions: dict[str, list[str]] | None = None) -> Any:
        from pyspark.sql import functions as F

        configure_s3a(spark, warehouse)   # the bucket's endpoint and keys, before S3A first opens it
        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        df = _with_trailing_columns(reader.load(spark_path(warehouse, table)), table)
        if partitions:
            df = df.where(reduce(lambda a, b: a & b, [F.col(c).isin(list(v)) for c, v in partitions.items()]))
        return df

    def write(self, df: Any, warehouse: Warehouse, spec: TableSpec, *, mode: WriteMode = "append",
              replace: list[dict[str, str]] | None = None, expected_version: int | None = None,
              metadata: dict[str, Any] | None = None, commit_id: str | None = None) -> CommitResult:
        """Write `df` to the table in one commit. `replace` lists the partitions a replace_partitions write swaps
        out; `expected_version` makes the write fail unless the table is still at that version; `commit_id`
        (default: a new one) marks the commit in its log, so that a caller can ask the log whether it landed."""
        if mode not in ("append", "overwrite", "replace_partitions"):
            raise TableError(f"unknown write mode {mode!r}")
        spark = df.sparkSession
        configure_s3a(spark, warehouse)
        jvm = spark._jvm
        path = spark_path(warehouse, spec.name)
        uri = warehouse.table_uri(spec.name)
        txn = _delta_log(spark, path).startTransaction()
        read_version = _read_version(txn)
        if read_version is not None and not _keeps_expired_logs(txn):
            # A table created before its writes went through Delta's Spark writer: turn the cleanup off first, in
            # a commit of its own (the write's transaction then starts after it; a commit of ours the caller did
            # not plan for moves the version it expects by one, and anyone else's still fails the check).
            _keep_expired_logs(spark, path)
            planned_on_ours = expected_version is not None and read_version == expected_version
            txn = _delta_log(spark, path).startTransaction()
            read_version = _read_version(txn)
            if planned_on_ours:
                expected_version = expected_version + 1
        if expected_version is not None and read_version != expected_version:
            raise ConcurrentCommitError(uri, expected_version, read_version)
        if expected_version is not None:
            # The write was planned from the whole table at that version: any commit after it that adds or removes
            # files conflicts, blind appends included (which Delta otherwise lets commute: two runs adding the same
            # rows would both land).
            txn.readWholeTable()
        # Chosen before the commit, so that whatever the commit reports, the log can say whether it landed.
        commit_id = commit_id or uuid.uuid4().hex
        options = {"userMetadata": json.dumps({COMMIT_ID_KEY: commit_id, **(metadata or {})}),
                   # A table written before the spec gained a nullable column gets it; the frame holds only the
                   # spec's columns, so nothing else can merge in.
                   "mergeSchema": "true"}
        predicate = None
        if mode == "replace_partitions":
            predicate = options["replaceWhere"] = _partition_predicate(spec, replace or [])
        save_mode = jvm.org.apache.spark.sql.SaveMode.valueOf("Append" if mode == "append" else "Overwrite")
        utils = jvm.org.apache.spark.api.python.PythonUtils
        session = spark._jsparkSession
        none = jvm.scala.Option.empty()
        delta_options = jvm.org.apache.spark.sql.delta.DeltaOptions(utils.toScalaMap(options),
                                                                     session.sessionState().conf())
        partition_by = utils.toSeq(list(spec.partition_by))
        out = df.select(*spec.schema.names)
        command = jvm.org.apache.spark.sql.delta.commands.WriteIntoDelta(
            txn.deltaLog(), save_mode, delta_options, partition_by, utils.toScalaMap({}), out._jdf, none, none, False)
        operation = jvm.org.apache.spark.sql.delta.DeltaOperations.Write(
            save_mode, jvm.scala.Option.apply(partition_by), jvm.scala.Option.apply(predicate),
            jvm.scala.Option.apply(options["userMetadata"]), none, none, none, none, none)
        actions = command.write(txn, session, none, False)
        try:
            version = _commit(txn, actions, operation, utils.toScalaMap({}))
        except Exception as exc:  # Py4JJavaError carrying io.delta.exceptions.*, or a lost answer
            # The log first, conflict or not: a conflict with this write's own commit (it landed and the store's
            # answer was lost) is no conflict, and the files that commit names must stay.
            landed = _landed(warehouse, spec.name, commit_id, read_version, exc)
            detail = _conflict(exc)
            if landed is None and detail is not None:
                _discard_written(warehouse, spec.name, actions)
                raise ConcurrentCommitError(uri, read_version, None, detail) from exc
            if landed is None:
                raise
            log.warning("commit %s to %s reported %s: %s, but the log holds it as version %d; it happened",
                        commit_id, uri, type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "", landed)
            version = landed
        return CommitResult(spec.name, version)

    def append_rows(self, spark: Any, warehouse: Warehouse, spec: TableSpec, rows: Any, *,
                    metadata: dict[str, Any] | None = None) -> CommitResult:
        return self.write(spark.createDataFrame(spec.conform(rows), schema=spark_schema(spec.schema)), warehouse,
                          spec, mode="append", metadata=metadata)

    def commit_changeset(self, changes: Any, warehouse: Warehouse, specs: list[TableSpec],
                         read_versions: dict[str, int | None], *,
                         metadata: dict[str, Any] | None = None) -> ChangesetResult:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        spark = changes.sparkSession
        configure_s3a(spark, warehouse)
        staged = changes.persist(StorageLevel.DISK_ONLY)
        try:
            unknown = staged.where(~F.col("op").isin(*[str(o) for o in ChangeOp])).select("op").limit(1).collect()
            if unknown:
                raise TableError(f"unknown change set op {unknown[0]['op']!r}: nothing was committed")
            notes = [json.loads(bytes(r["payload"]).decode())
                     for r in staged.where(F.col("op") == ChangeOp.NOTE).select("payload").toLocalIterator()]
            for spec in specs:
                path = spark_path(warehouse, spec.name)
                current = _current_version(spark, path)
                if current != read_versions.get(spec.name):
                    raise ConcurrentCommitError(warehouse.table_uri(spec.name), read_versions.get(spec.name), current)
            result = ChangesetResult(notes=notes)
            for spec in specs:
                mine = staged.where(F.col("table") == spec.name)
                touched = [json.loads(r["partition"]) for r in
                           mine.where(F.col("op").isin(ChangeOp.ADD, ChangeOp.REMOVE)).select("partition").distinct()
                           .toLocalIterator()]
                read_version = read_versions.get(spec.name)
                if not touched and read_version is not None:
                    result.committed[spec.name] = CommitResult(spec.name, None)
                    continue
                rows = (mine.where(F.col("op") == ChangeOp.ADD).select("payload")
                        .mapInArrow(_decoder(spec), spark_schema(spec.schema)))
                commit_id = uuid.uuid4().hex
                try:
                    result.committed[spec.name] = self.write(
                        rows, warehouse, spec, mode="overwrite" if read_version is None else "replace_partitions",
                        replace=touched, expected_version=read_version, metadata=metadata, commit_id=commit_id)
                except BaseException as exc:
                    done = {n: c.version for n, c in result.committed.items() if c.version is not None}
                    # The failure may have come after this table's commit landed: the log says.
                    landed = _landed(warehouse, spec.name, commit_id, read_version, exc)
                    if landed is not None:
                        done[spec.name] = landed
                    if done:
                        raise PartialChangesetError(
                            f"the change set failed ({type(exc).__name__}: {exc}) after "
                            f"{', '.join(f'{n} v{v}' for n, v in done.items())} committed; those commits stay, "
                            "and the next index run restores the tables to the last audited run before it plans",
                            done) from exc
                    raise
            return result
        finally:
            staged.unpersist()

"""Table engines: one interface, two ways to write Delta from Spark.

* `DeltaRsEngine` (default): Python Data Sources (`statekeeper.tables.datasource`); executors
  write parquet with pyarrow, one delta-rs commit per table on the driver side.
* `DeltaSparkEngine`: Delta Lake's own Spark integration, used only when its jars and session
  extension are present (they cannot be installed from PyPI, so they are absent here).

Both produce the same tables (schemas from `statekeeper.tables.catalog` or the caller's TableSpec),
readable by deltalake, Spark and polars.
"""
from __future__ import annotations

import json
import os
import tempfile
import uuid
from typing import Any

from statekeeper.tables import delta_log, parquet_scan, parquet_write
from statekeeper.tables.arrow_codec import schema_to_text
from statekeeper.tables.changeset_commit import commit_tables
from statekeeper.tables.delta_log import CommitResult
from statekeeper.tables.delta_spark import DeltaSparkEngine
from statekeeper.tables.engine_base import ChangesetResult, EngineName, TableEngine, WriteMode
from statekeeper.tables.errors import ConcurrentCommitError, EngineUnavailableError, PartialChangesetError, TableError
from statekeeper.tables.files import DataFile
from statekeeper.tables.spark import activate, register_data_sources
from statekeeper.tables.spec import TableSpec
from statekeeper.tables.warehouse import Warehouse

_DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
_DELTA_CLASS = "io.delta.tables.DeltaTable"


def _storage_option(warehouse: Warehouse) -> str:
    # Executors need the real keys; Spark redacts option values whose key contains "secret".
    return json.dumps(warehouse.storage.to_mapping(include_secrets=True))


def _min_splits(spark: Any) -> int:
    """Read splits per table scan: two per core the session has, so no scan runs as one task."""
    try:
        return max(1, 2 * int(spark.sparkContext.defaultParallelism))
    except Exception:  # noqa: BLE001 - sessions without a SparkContext (Spark Connect)
        return 1


class DeltaRsEngine(TableEngine):
    name = "delta-rs"

    def __init__(self, *, local_parquet: bool = True) -> None:
        # Local warehouses are read and written by Spark's own parquet scan and writer (parquet_scan,
        # parquet_write); False takes every table through the data sources (tests compare the two).
        self.local_parquet = local_parquet

    def read(self, spark: Any, warehouse: Warehouse, table: str, *, version: int | None = None,
             partitions: dict[str, list[str]] | None = None) -> Any:
        if self.local_parquet:
            df = parquet_scan.scan(spark, warehouse, table, version=version, partitions=partitions,
                                   min_splits=_min_splits(spark))
            if df is not None:
                return df
        activate(spark)
        register_data_sources(spark)
        reader = (spark.read.format("statekeeper_delta")
                  .option("warehouse", warehouse.uri)
                  .option("storage_secret", _storage_option(warehouse))
                  .option("table", table))
        if version is not None:
            reader = reader.option("version", str(version))
        if partitions:
            reader = reader.option("partitions", json.dumps(partitions))
        return reader.option("min_splits", str(_min_splits(spark))).load()

    def write(self, df: Any, warehouse: Warehouse, spec: TableSpec, *, mode: WriteMode = "append",
              replace: list[dict[str, str]] | None = None, expected_version: int | None = None,
              metadata: dict[str, Any] | None = None) -> CommitResult:
        if self.local_parquet:
            done = parquet_write.write(df, warehouse, spec, mode=mode, replace=replace,
                                       expected_version=expected_version, metadata=metadata)
            if done is not None:
                return done
        activate(df.sparkSession)
        register_data_sources(df.sparkSession)
        with _result_file() as result_path:
            writer = (df.write.format("statekeeper_delta")
                      .option("warehouse", warehouse.uri)
                      .option("storage_secret", _storage_option(warehouse))
                      .option("table", spec.name)
                      .option("spec_schema", schema_to_text(spec.schema))
                      .option("partition_by", ",".join(spec.partition_by))
                      .option("mode", mode)
                      .option("result_path", result_path)
                      .option("commit_metadata", json.dumps(metadata or {})))
            if replace is not None:
                writer = writer.option("replace", json.dumps(replace))
            if expected_version is not None:
                writer = writer.option("expected_version", str(expected_version))
            _run_write(writer.mode("overwrite" if mode == "overwrite" else "append"), warehouse, [spec.name])
            result = _load_result(result_path)
        return CommitResult(**result)

    def append_rows(self, spark: Any, warehouse: Warehouse, spec: TableSpec, rows: Any, *,
                    metadata: dict[str, Any] | None = None) -> CommitResult:
        # A few rows do not need a Spark job: write the file and commit here on the driver,
        # through the same delta-rs path the data sources use.
        from statekeeper.tables.files import split_partitions, write_data_file

        state = delta_log.add_missing_columns(warehouse, delta_log.load_state(warehouse, spec.name), spec)
        delta_log.check_compatible(state, spec)
        adds = [write_data_file(warehouse, spec, part, values)
                for values, part in split_partitions(spec, spec.conform(rows)) if part.num_rows]
        return delta_log.commit(warehouse, spec, adds, [], read_version=None if state is None else state.version,
                                strict=False, metadata=metadata)

    def commit_changeset(self, changes: Any, warehouse: Warehouse, specs: list[TableSpec],
                         read_versions: dict[str, int | None], *,
                         metadata: dict[str, Any] | None = None, written: Any = None) -> ChangesetResult:
        """The producer's tasks run once, into a local checkpoint; a change set of `file`, `remove` and `note`
        rows (producers that wrote their data files) is then committed here on the driver, one delta-rs commit
        per table, and one with `add` rows through the `statekeeper_changeset` data source.

        Through the data source every change set paid three Python processes Spark starts for its planning,
        writer and commit (about 3.5 s in a fresh spark-submit, against 0.2 s once they run). What comes to the
        driver is one descriptor per written or replaced data file and one note per task, never the rows: the
        same the data source's commit() received. If the producer's job fails, the files its successful tasks
        wrote (`written`, a changeset.written_files accumulator) are deleted, as the writer's abort() did."""
        from pyspark.sql import functions as F

        from statekeeper.tables.changeset import ChangeOp, decode_written
        from statekeeper.tables.spark import release_checkpoint

        # Chosen here so that, whatever happens to the commit, this driver can ask the Delta logs which of the
        # tables committed.
        batch = uuid.uuid4().hex
        commit_ids = {s.name: f"{batch}.{s.name}" for s in specs}
        staged = None
        adds: dict[str, list[DataFile]] = {}
        try:
            try:
                staged = changes.localCheckpoint(eager=True)
                rows = staged.select("table", "op", "partition",
                                     F.when(F.col("op") != ChangeOp.ADD, F.col("payload")).alias("payload")).collect()
                through_source = any(r["op"] == ChangeOp.ADD for r in rows)
                if not through_source:
                    adds, removes, notes, problem = _read_rows(rows, commit_ids)
                    if problem:
                        raise TableError(problem)
            except BaseException:
                # Nothing was committed: every file the producer wrote is ours to delete.
                _abort_files(warehouse, specs, decode_written(written.value) if written is not None else adds)
                raise
            if through_source:
                return self._commit_through_source(staged, warehouse, specs, read_versions, commit_ids, metadata)
            try:
                committed = commit_tables(warehouse, specs, read_versions, commit_ids, adds, removes,
                                          metadata=metadata or {})
            except BaseException as exc:
                _raise_partial(exc, warehouse, commit_ids, read_versions)
                raise
            return ChangesetResult(committed, notes)
        finally:
            if staged is not None:
                release_checkpoint(staged)

    def _commit_through_source(self, changes: Any, warehouse: Warehouse, specs: list[TableSpec],
                               read_versions: dict[str, int | None], commit_ids: dict[str, str],
                               metadata: dict[str, Any] | None) -> ChangesetResult:
        activate(changes.sparkSession)
        register_data_sources(changes.sparkSession)
        tables = {s.name: {"schema": schema_to_text(s.schema), "partition_by": list(s.partition_by),
                           "read_version": read_versions.get(s.name)} for s in specs}
        with _result_file() as result_path:
            writer = (changes.write.format("statekeeper_changeset")
                      .option("warehouse", warehouse.uri)
                      .option("storage_secret", _storage_option(warehouse))
                      .option("tables", json.dumps(tables))
                      .option("commit_ids", json.dumps(commit_ids))
                      .option("result_path", result_path)
                      .option("commit_metadata", json.dumps(metadata or {}))
                      .mode("append"))
            try:
                _run_write(writer, warehouse, [s.name for s in specs], result_path=result_path)
                result = _load_result(result_path)
            except BaseException as exc:
                _raise_partial(exc, warehouse, commit_ids, read_versions)
                raise
        return ChangesetResult({n: CommitResult(**r) for n, r in result["committed"].items()}, result["notes"])


def _read_rows(rows: list[Any], tables: dict[str, str]) -> tuple[dict[str, list[DataFile]],
                                                                  dict[str, list[DataFile]], list[Any], str | None]:
    """(adds, removes, notes, first problem) of a change set's `file`, `remove` and `note` rows. Every `file` row
    is read even after a problem, so that the files it names can be deleted."""
    from statekeeper.tables.changeset import ChangeOp

    adds: dict[str, list[DataFile]] = {}
    removes: dict[str, list[DataFile]] = {}
    notes: list[Any] = []
    problem = None
    for r in rows:
        payload = bytes(r["payload"]).decode()
        if r["op"] == ChangeOp.NOTE:
            notes.append(json.loads(payload))
        elif r["op"] in (ChangeOp.FILE, ChangeOp.REMOVE):
            if r["table"] not in tables:
                problem = problem or f"change set names table {r['table']!r}, not one of {', '.join(tables)}"
                continue
            target = adds if r["op"] == ChangeOp.FILE else removes
            target.setdefault(r["table"], []).append(DataFile.from_json(payload))
        else:
            problem = problem or f"unknown change set op {r['op']!r}"
    return adds, removes, notes, problem


def _abort_files(warehouse: Warehouse, specs: list[TableSpec], files: dict[str, list[DataFile]]) -> None:
    """Delete uncommitted data files of a change set that will not be committed."""
    by_name = {s.name: s for s in specs}
    for name, table_files in files.items():
        if name in by_name:
            delta_log.abort_files(warehouse, by_name[name], table_files)


def _raise_partial(exc: BaseException, warehouse: Warehouse, commit_ids: dict[str, str],
                   read_versions: dict[str, int | None]) -> None:
    """Raise PartialChangesetError if some tables of the failed change set committed (the log says which)."""
    committed = _committed(warehouse, commit_ids, read_versions)
    if committed:
        raise PartialChangesetError(
            f"the change set failed ({type(exc).__name__}: {exc}) after "
            f"{', '.join(f'{n} v{v}' for n, v in committed.items())} committed; those commits stay, "
            "and the next index run restores the tables to the last audited run before it plans",
            committed) from exc


def _committed(warehouse: Warehouse, commit_ids: dict[str, str],
               read_versions: dict[str, int | None]) -> dict[str, int]:
    """Tables whose commit of this change set is in their log (version by table)."""
    found: dict[str, int] = {}
    for name, commit_id in commit_ids.items():
        try:
            version = delta_log.find_commit(warehouse, name, commit_id, after=read_versions.get(name))
        except Exception:  # noqa: BLE001 - reported as unknown by the caller's own error
            continue
        if version is not None:
            found[name] = version
    return found


class _result_file:
    """A private local path the driver-side commit writes its outcome to (commit runs in another
    Python process, so it cannot return values)."""

    def __enter__(self) -> str:
        fd, self.path = tempfile.mkstemp(prefix="statekeeper-commit-", suffix=".json")
        os.close(fd)
        os.unlink(self.path)
        return self.path

    def __exit__(self, *exc: object) -> None:
        for p in (self.path, f"{self.path}.tmp"):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass


def _load_result(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as src:
            return json.load(src)
    except FileNotFoundError:
        raise TableError("the Delta commit reported no result; the write may not have run") from None


def _run_write(writer: Any, warehouse: Warehouse, tables: list[str], *, result_path: str | None = None) -> None:
    """Run a Spark write and surface our own errors (they arrive wrapped in JVM exceptions)."""
    try:
        writer.save()
    except Exception as exc:  # py4j / AnalysisException / PythonException wrappers
        text = str(exc)
        if "ConcurrentCommitError" in text:
            # The commit ran in another Python process; keep its message (it names the table and
            # versions) and drop the JVM stack around it.
            line = text[text.index("ConcurrentCommitError"):].splitlines()[0]
            message = line.split(":", 1)[1].strip() if ":" in line else line
            raise ConcurrentCommitError(", ".join(warehouse.table_uri(t) for t in tables), None, None,
                                        message=message) from exc
        for marker in ("TableSchemaError", "UnsupportedTableError", "TableError"):
            if marker in text:
                line = text[text.index(marker):].splitlines()[0]
                raise TableError(line) from exc
        raise


def delta_spark_available(spark: Any) -> bool:
    """True when Delta Lake's jars are on the classpath and its session extension is configured."""
    try:
        extensions = spark.conf.get("spark.sql.extensions", "") or ""
    except Exception:  # noqa: BLE001 - Spark Connect sessions may refuse conf reads
        return False
    if _DELTA_EXTENSION not in extensions:
        return False
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return False
    try:
        jvm.java.lang.Class.forName(_DELTA_CLASS, False, jvm.Thread.currentThread().getContextClassLoader())
    except Exception:  # noqa: BLE001 - py4j raises Py4JJavaError for ClassNotFoundException
        return False
    return True


def select_engine(spark: Any, requested: EngineName | str = "auto") -> TableEngine:
    """`auto` picks delta-spark when it is installed and configured in the session, else delta-rs."""
    if requested == "delta-rs":
        return DeltaRsEngine()
    if requested == "delta-spark":
        if not delta_spark_available(spark):
            raise EngineUnavailableError(
                "engine delta-spark requested, but Delta Lake's jars/extension are not in this Spark session "
                f"(need {_DELTA_EXTENSION} in spark.sql.extensions and {_DELTA_CLASS} on the classpath); "
                "use --engine delta-rs"
            )
        return DeltaSparkEngine()
    if requested == "auto":
        if delta_spark_available(spark):
            return DeltaSparkEngine()
        return DeltaRsEngine()
    raise TableError(f"unknown table engine {requested!r}: auto, delta-rs or delta-spark")



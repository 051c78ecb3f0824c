"""Spark 4 Python Data Sources over Delta tables, committed through delta-rs.

* `statekeeper_delta` — read a table (at a version, optionally only some partitions) and write a
  DataFrame to one table (append, overwrite, replace partitions).
* `statekeeper_changeset` — write a multi-table change set in one pass (rows of
  `statekeeper.tables.changeset`: add, file, remove, note). Producers such as the index job emit
  these from `mapInArrow`, so parsing and writing happen in the same Spark task without a second pass.

Executors only write parquet with pyarrow; `commit()` runs once on the driver side and makes one
Delta commit per table with deltalake. Spark runs `writer()`, `write()` and `commit()` in separate
Python workers, so everything the writer needs travels in its pickled state, and the module must
be importable there (see `statekeeper.tables.spark.configure_builder`). Spark lower-cases option
keys; all keys here are lower case. Secrets travel in the `storage_secret` option (Spark redacts
option keys matching "secret" in plans and the UI).
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from statekeeper.storage import StorageConfig
from statekeeper.tables.arrow_codec import schema_from_text, table_from_ipc
from statekeeper.tables.changeset import CHANGESET_SCHEMA, ChangeOp
from statekeeper.tables.changeset_commit import commit_tables, delete_unless_committed
from statekeeper.tables.errors import TableError
from statekeeper.tables.files import DataFile, read_data_file, split_partitions, write_data_file
from statekeeper.tables.spark import spark_schema
from statekeeper.tables.spec import TableSpec
from statekeeper.tables.splits import MIN_SPLIT_BYTES, plan_splits
from statekeeper.tables.write_plan import plan_write
from statekeeper.tables.warehouse import Warehouse

DELTA_SOURCE = "statekeeper_delta"
CHANGESET_SOURCE = "statekeeper_changeset"

_MAX_BUFFERED_ROWS = 1_000_000


def _warehouse(options: dict[str, str]) -> Warehouse:
    try:
        uri = options["warehouse"]
    except KeyError:
        raise TableError("option 'warehouse' is required") from None
    storage = json.loads(options.get("storage_secret") or "{}")
    return Warehouse(uri, StorageConfig.from_mapping(storage))


def _write_result(path: str | None, payload: dict[str, Any]) -> None:
    if not path:
        return
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as out:
        json.dump(payload, out)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------
# statekeeper_delta: read one table, write one table
# ---------------------------------------------------------------------------------------------

class DeltaDataSource(DataSource):
    """Options: warehouse, table, storage_secret; read: version, partitions (JSON {col: [values]}),
    min_splits (read splits to make at least, files permitting, none under min_split_bytes);
    write: spec_schema, partition_by, mode (append|overwrite|replace_partitions), replace (JSON list
    of partition dicts), expected_version, result_path, commit_metadata (JSON)."""

    @classmethod
    def name(cls) -> str:
        return DELTA_SOURCE

    def _table(self) -> str:
        try:
            return self.options["table"]
        except KeyError:
            raise TableError("option 'table' is required") from None

    def schema(self) -> StructType:
        from statekeeper.tables import delta_log

        warehouse = _warehouse(self.options)
        version = self.options.get("version")
        dt = delta_log.open_table(warehouse, self._table(), int(version) if version else None)
        return spark_schema(delta_log.read_schema(self._table(), pa.schema(dt.schema().to_arrow())))

    def reader(self, schema: StructType) -> DataSourceReader:
        return DeltaReader(dict(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DeltaWriter:
        return DeltaWriter.plan(dict(self.options), schema, overwrite)


class _Split(InputPartition):
    def __init__(self, files: tuple[DataFile, ...]) -> None:
        super().__init__(None)
        self.files = files


class DeltaReader(DataSourceReader):
    """Pins the table version at planning; the file list is computed in `partitions()` and travels
    only inside each split (Spark pickles the reader into every task before asking for splits)."""

    def __init__(self, options: dict[str, str]) -> None:
        from statekeeper.tables import delta_log

        self.options = options
        self.warehouse = _warehouse(options)
        self.table = options["table"]
        version = options.get("version")
        dt = delta_log.open_table(self.warehouse, self.table, int(version) if version else None)
        delta_log.check_readable(dt, self.warehouse.table_uri(self.table))
        self.version = dt.version()
        self.arrow_schema = delta_log.read_schema(self.table, pa.schema(dt.schema().to_arrow()))
        self.partition_by = tuple(dt.metadata().partition_columns)
        wanted = json.loads(options.get("partitions") or "null") or {}
        unknown = [c for c in wanted if c not in self.partition_by]
        if unknown:
            raise TableError(f"option 'partitions' names non-partition columns {unknown} of {self.table}")
        self.wanted = {c: sorted(set(map(str, v))) for c, v in wanted.items()}

    def partitions(self) -> list[InputPartition]:
        from statekeeper.tables import delta_log

        state = delta_log.load_state(self.warehouse, self.table, self.version)
        assert state is not None
        sets = {c: set(v) for c, v in self.wanted.items()}
        files = [f for f in state.files if all(f.partition_values[c] in s for c, s in sets.items())]
        min_splits = max(1, int(self.options.get("min_splits") or 1))
        floor = int(self.options.get("min_split_bytes") or MIN_SPLIT_BYTES)
        return [_Split(group) for group in plan_splits(files, self.partition_by, min_splits=min_splits,
                                                       min_split_bytes=floor)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        files = getattr(partition, "files", None)
        if not files:  # Spark substitutes one empty partition for an empty table
            return iter(())
        return self._read(files)

    def _read(self, files: tuple[DataFile, ...]) -> Iterator[pa.RecordBatch]:
        fileio = self.warehouse.file_io()
        for f in files:
            table = read_data_file(self.warehouse, self.arrow_schema, self.partition_by, f.path,
                                   f.partition_values, fileio=fileio, table_name=self.table)
            yield from table.to_batches(max_chunksize=65536)


@dataclass
class FilesMessage(WriterCommitMessage):
    files: list[DataFile] = field(default_factory=list)


class DeltaWriter(DataSourceArrowWriter):
    """Single-table writer. The plan (read version, files to remove) is fixed in `plan()` on the
    driver side, so commit() is strict against exactly the state the removes were computed from."""

    def __init__(self, options: dict[str, str], spec: TableSpec, read_version: int | None,
                 removes: list[DataFile], strict: bool) -> None:
        import uuid

        self.options = options
        self.warehouse = _warehouse(options)
        self.spec = spec
        self.read_version = read_version
        self.removes = removes
        self.strict = strict
        # Chosen here on the driver and pickled into the commit and abort workers, so abort() can
        # ask the log whether commit() landed before it deletes anything.
        self.commit_id = options.get("commit_id") or uuid.uuid4().hex

    @classmethod
    def plan(cls, options: dict[str, str], schema: StructType, overwrite: bool) -> DeltaWriter:
        from pyspark.sql.pandas.types import to_arrow_schema

        warehouse = _warehouse(options)
        name = options.get("table")
        if not name:
            raise TableError("option 'table' is required")
        mode = options.get("mode", "overwrite" if overwrite else "append")
        partition_by = tuple(c for c in (options.get("partition_by") or "").split(",") if c)
        if options.get("spec_schema"):
            spec = TableSpec(name, schema_from_text(options["spec_schema"]), partition_by)
        else:
            arrow = to_arrow_schema(schema, timezone="UTC")
            spec = TableSpec.from_arrow(name, arrow, partition_by)
        expected = options.get("expected_version")
        plan = plan_write(warehouse, spec, mode, replace=json.loads(options.get("replace") or "[]"),
                          expected_version=None if expected in (None, "") else int(expected),
                          declared=bool(options.get("spec_schema")))
        return cls(options, plan.spec, plan.read_version, list(plan.removes), plan.strict)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FilesMessage:
        fileio = self.warehouse.file_io()
        files: list[DataFile] = []
        pending: list[pa.RecordBatch] = []
        rows = 0

        def flush() -> None:
            if not pending:
                return
            table = self.spec.conform(pa.Table.from_batches(pending))
            for values, part in split_partitions(self.spec, table):
                files.append(write_data_file(self.warehouse, self.spec, part, values, fileio=fileio))
            pending.clear()

        try:
            for batch in iterator:
                if batch.num_rows:
                    pending.append(batch)
                    rows += batch.num_rows
                if rows >= _MAX_BUFFERED_ROWS:
                    flush()
                    rows = 0
            flush()
        except BaseException:
            from statekeeper.tables import delta_log

            delta_log.abort_files(self.warehouse, self.spec, files)
            raise
        return FilesMessage(files)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        from statekeeper.tables import delta_log

        adds = [f for m in messages if isinstance(m, FilesMessage) for f in m.files]
        metadata = json.loads(self.options.get("commit_metadata") or "{}")
        result = delta_log.commit(self.warehouse, self.spec, adds, self.removes, read_version=self.read_version,
                                  strict=self.strict, metadata=metadata, commit_id=self.commit_id)
        _write_result(self.options.get("result_path"), result.to_mapping())

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        adds = [f for m in messages if isinstance(m, FilesMessage) for f in m.files]
        delete_unless_committed(self.warehouse, {self.spec.name: (self.spec, adds)}, {self.spec.name: self.commit_id},
                                {self.spec.name: self.read_version})


# ---------------------------------------------------------------------------------------------
# statekeeper_changeset: several tables, one pass
# ---------------------------------------------------------------------------------------------

class ChangesetDataSource(DataSource):
    """Options: warehouse, storage_secret, tables (JSON: {name: {schema, partition_by,
    read_version}} in commit order), result_path, commit_metadata."""

    @classmethod
    def name(cls) -> str:
        return CHANGESET_SOURCE

    def schema(self) -> str:
        return CHANGESET_SCHEMA

    def writer(self, schema: StructType, overwrite: bool) -> ChangesetWriter:
        return ChangesetWriter(dict(self.options))


@dataclass
class ChangesetMessage(WriterCommitMessage):
    adds: dict[str, list[DataFile]] = field(default_factory=dict)
    removes: dict[str, list[DataFile]] = field(default_factory=dict)
    notes: list[Any] = field(default_factory=list)


class ChangesetWriter(DataSourceArrowWriter):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.warehouse = _warehouse(options)
        tables = json.loads(options.get("tables") or "{}")
        if not tables:
            raise TableError("option 'tables' is required for a change set")
        self.order = list(tables)
        self.specs = {name: TableSpec(name, schema_from_text(t["schema"]), tuple(t.get("partition_by", ())))
                      for name, t in tables.items()}
        self.read_versions: dict[str, int | None] = {name: t.get("read_version") for name, t in tables.items()}
        self.result_path = options.get("result_path")
        # One id per table commit, chosen by the caller on the driver (so it can look the commits
        # up after any failure) or here, and pickled into the commit and abort workers.
        import uuid

        ids = json.loads(options.get("commit_ids") or "{}")
        self.commit_ids: dict[str, str] = {name: ids.get(name) or uuid.uuid4().hex for name in self.order}

    def _spec(self, name: str) -> TableSpec:
        spec = self.specs.get(name)
        if spec is None:
            raise TableError(f"change set names table {name!r}, not declared in option 'tables'")
        return spec

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ChangesetMessage:
        fileio = self.warehouse.file_io()
        message = ChangesetMessage()
        pending: dict[tuple[str, str], list[pa.Table]] = {}
        pending_rows: dict[tuple[str, str], int] = {}
        current: dict[str, tuple[str, str]] = {}

        def flush(key: tuple[str, str]) -> None:
            chunks = pending.pop(key, [])
            pending_rows.pop(key, None)
            if not chunks:
                return
            name, partition = key
            spec = self._spec(name)
            table = spec.conform(pa.concat_tables(chunks) if len(chunks) > 1 else chunks[0])
            values = json.loads(partition)
            message.adds.setdefault(name, []).append(
                write_data_file(self.warehouse, spec, table, values, fileio=fileio))

        try:
            for batch in iterator:
                cols = batch.to_pydict()
                for name, op, partition, payload in zip(cols["table"], cols["op"], cols["partition"],
                                                        cols["payload"], strict=True):
                    if op == ChangeOp.ADD:
                        key = (name, partition)
                        # Producers send one partition's chunks together: once another partition
                        # of the same table starts, the previous one is complete. Writing it now
                        # bounds memory to one partition instead of the whole task.
                        previous = current.get(name)
                        if previous is not None and previous != key:
                            flush(previous)
                        current[name] = key
                        chunk = table_from_ipc(payload)
                        if chunk.num_rows == 0:
                            continue
                        pending.setdefault(key, []).append(chunk)
                        pending_rows[key] = pending_rows.get(key, 0) + chunk.num_rows
                        if pending_rows[key] >= _MAX_BUFFERED_ROWS:
                            flush(key)
                    elif op == ChangeOp.FILE:
                        # Written by the producer in the same task; from here on ours to commit
                        # or to delete (on failure, with the rest of message.adds).
                        self._spec(name)
                        message.adds.setdefault(name, []).append(DataFile.from_json(payload.decode()))
                    elif op == ChangeOp.REMOVE:
                        self._spec(name)
                        message.removes.setdefault(name, []).append(DataFile.from_json(payload.decode()))
                    elif op == ChangeOp.NOTE:
                        message.notes.append(json.loads(payload.decode()))
                    else:
                        raise TableError(f"unknown change set op {op!r}")
            for key in list(pending):
                flush(key)
        except BaseException:
            self._delete(message.adds)
            raise
        return message

    def _delete(self, adds: dict[str, list[DataFile]]) -> None:
        from statekeeper.tables import delta_log

        for name, files in adds.items():
            delta_log.abort_files(self.warehouse, self._spec(name), files)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        msgs = [m for m in messages if isinstance(m, ChangesetMessage)]
        adds: dict[str, list[DataFile]] = {n: [] for n in self.order}
        removes: dict[str, list[DataFile]] = {n: [] for n in self.order}
        notes: list[Any] = []
        for m in msgs:
            for n, files in m.adds.items():
                adds[n].extend(files)
            for n, files in m.removes.items():
                removes[n].extend(files)
            notes.extend(m.notes)
        metadata = json.loads(self.options.get("commit_metadata") or "{}")
        result: dict[str, Any] = {"committed": {}, "notes": notes, "error": None}

        def committed(name: str, outcome: Any) -> None:
            result["committed"][name] = outcome.to_mapping()
            _write_result(self.result_path, result)

        try:
            commit_tables(self.warehouse, [self.specs[n] for n in self.order], self.read_versions, self.commit_ids,
                          adds, removes, metadata=metadata, on_commit=committed)
        except BaseException as exc:
            result["error"] = f"{type(exc).__name__}: {exc}"
            result["uncommitted"] = [n for n in self.order if n not in result["committed"]]
            _write_result(self.result_path, result)
            raise
        _write_result(self.result_path, result)

    def _delete_unless_committed(self, adds: dict[str, list[DataFile]]) -> None:
        delete_unless_committed(self.warehouse, {n: (self._spec(n), files) for n, files in adds.items()},
                                self.commit_ids, self.read_versions)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # The result file may be missing or stale (the commit worker can die between a commit
        # and writing it): the Delta log, not the file, says which tables committed.
        adds: dict[str, list[DataFile]] = {}
        for m in messages:
            if isinstance(m, ChangesetMessage):
                for n, files in m.adds.items():
                    adds.setdefault(n, []).extend(files)
        self._delete_unless_committed(adds)

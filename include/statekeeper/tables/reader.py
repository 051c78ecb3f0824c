"""Reading Statekeeper's tables without Spark: the one reader for commands and driver-side code."""
from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from statekeeper.tables.errors import MissingTableError
from statekeeper.tables.warehouse import Warehouse


def read_files(warehouse: Warehouse, schema: pa.Schema, partition_by: tuple[str, ...] | list[str],
               files: list[Any], *, table_name: str, columns: list[str] | None = None,
               fileio: Any = None) -> pa.Table:
    """The rows of some data files of one table (add actions: `path`, `partition_values`), partition
    columns filled in from the log, in the table's column order (or `columns`)."""
    from statekeeper.tables.files import read_data_file

    parts = [read_data_file(warehouse, schema, partition_by, f.path, f.partition_values, fileio=fileio,
                            table_name=table_name, columns=columns) for f in files]
    if not parts:
        return (schema if columns is None else pa.schema([schema.field(c) for c in columns])).empty_table()
    return parts[0] if len(parts) == 1 else pa.concat_tables(parts)


class TableReader:
    """Partition-pruned reads of one warehouse's tables, without Spark.

    Files are picked from the Delta log's add actions by partition value and read with pyarrow
    (statekeeper.tables.files.read_data_file), so a read costs what its partitions hold. Two
    reasons not to go through deltalake's dataset reader: it builds a filter expression for every
    data file of the table on each call (seconds on tables with thousands of files), and it turns
    the missing min/max statistics of long strings (URIs; the writers omit them) into
    `col >= null`, pruning every file: a pushed-down URI filter silently returns no rows.
    """

    def __init__(self, warehouse: Warehouse, versions: dict[str, int] | None = None) -> None:
        self.warehouse = warehouse
        # Tables named here are read at that version (the index tables at their consistent cut,
        # statekeeper.tables.cut); the others at their latest.
        self.versions = dict(versions or {})
        self._states: dict[str, Any] = {}
        self._io = warehouse.file_io()

    def state(self, name: str) -> Any | None:
        if name not in self._states:
            from statekeeper.tables import delta_log

            self._states[name] = delta_log.load_state(self.warehouse, name, self.versions.get(name))
        return self._states[name]

    def require(self, name: str, producer: str | None = None) -> Any:
        """The table's state; MissingTableError naming the entry point that writes it when absent."""
        state = self.state(name)
        if state is None:
            if producer is None:
                from statekeeper.registry import job
                from statekeeper.tables.catalog import spec

                producer = job(spec(name).producer).entry_point
            raise MissingTableError(f"warehouse {self.warehouse.uri} has no table {name}: run {producer} first")
        return state

    def read(self, name: str, *, partitions: list[tuple[str, str, Any]] | None = None,
             filters: Any = None, columns: list[str] | None = None) -> pa.Table:
        """Rows of `name` whose location matches every (column, "=" | "in", value) of `partitions`,
        then `filters` (a pyarrow expression over `columns`, or all columns).

        `partitions` may name `job_dir` on every table: all Statekeeper tables but the `*_runs` audits
        are partitioned by (root_id, bucket) with job_dir as a column
        (`statekeeper.tables.catalog.job_bucket`), so the job_dir condition prunes to its bucket's
        files and then filters rows."""
        from statekeeper.tables.catalog import job_bucket

        state = self.state(name)
        if state is None:
            return pa.table({})
        prune: list[tuple[str, str, Any]] = []
        rows: Any = None
        for c, op, v in partitions or ():
            if c in state.partition_by:
                prune.append((c, op, v))
                continue
            if c == "job_dir" and "bucket" in state.partition_by:
                prune.append(("bucket", op, job_bucket(v) if op == "=" else {job_bucket(x) for x in v}))
            cond = (pc.field(c) == v) if op == "=" else pc.field(c).isin(list(v))
            rows = cond if rows is None else rows & cond
        wanted = []
        for f in state.files:
            values = f.partition_values
            if all((values.get(c) == v) if op == "=" else (values.get(c) in v) for c, op, v in prune):
                wanted.append(f)
        from statekeeper.tables.delta_log import read_schema

        full = read_schema(name, state.schema)
        schema = full if not columns else pa.schema([full.field(c) for c in columns])
        table = read_files(self.warehouse, full, state.partition_by, wanted, table_name=name, fileio=self._io)
        if rows is not None:
            table = table.filter(rows)
        table = table.select(schema.names)
        return table.filter(filters) if filters is not None else table

    def version(self, name: str) -> int | None:
        state = self.state(name)
        return None if state is None else state.version

    def newest(self, name: str, *, by: str = "finished_at", columns: list[str] | None = None) -> dict[str, Any] | None:
        """The row of `name` with the greatest `by` (an audit table's newest run; the last read
        of equal ones), or None."""
        rows = self.read(name, columns=None if columns is None else sorted({by, *columns})).to_pylist()
        return sorted(rows, key=lambda r: r[by])[-1] if rows else None

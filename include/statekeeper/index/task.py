"""The Spark side of the index job: turn bucket plans into change set rows, one task at a time.

`IndexTask` is the `mapInArrow` function. It is pickled with the storage config, roots and
warehouse (never with deltalake objects) and emits rows of
`statekeeper.tables.changeset.CHANGESET_SCHEMA`: `file` rows naming the data files it wrote for
a bucket (one per table, rows sorted by job_dir), `remove` rows for the bucket's previous data
files, and one `note` per task with its counters, so the driver never sees the listing itself.
"""
from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from statekeeper.index.bucket import BucketPlan, index_bucket
from statekeeper.index.parse import RootIndex
from statekeeper.index.unit import FAILED, UnitContext, UnitStats
from statekeeper.storage import GuardedFileIO, Roots, RoutingFileIO, StorageConfig
from statekeeper.tables.changeset import ChangesetRows
from statekeeper.tables.files import DataFile, write_data_file
from statekeeper.tables.warehouse import Warehouse

log = logging.getLogger("statekeeper.index")

_FILE_ROWS = 1_000_000   # rows per data file; a bucket's rows of one table are one file below that
_IPC_ROWS = 50_000
_MAX_ERRORS_PER_TASK = 50


def encode_previous(previous: dict[str, list[DataFile]]) -> str:
    return json.dumps({t: [json.loads(f.to_json()) for f in files] for t, files in previous.items() if files},
                      separators=(",", ":"))


def decode_previous(text: str | None) -> dict[str, list[DataFile]]:
    if not text:
        return {}
    return {t: [DataFile(**f) for f in files] for t, files in json.loads(text).items()}


@dataclass
class IndexTask:
    roots: list[str]
    storage: StorageConfig
    warehouse: Warehouse
    run_id: str
    accumulators: dict[str, Any] | None = None   # pyspark Accumulators for live progress
    # bins[i]: the buckets task i indexes, as (root uri, bucket, job dirs, encoded previous files)
    bins: list[list[tuple[str, str, list[str], str]]] = field(default_factory=list)
    job_filter: str | None = None
    # True: write the data files in the task and emit `file` rows (delta-rs engine). False: emit
    # the rows as Arrow IPC `add` rows for engines that write the files themselves (delta-spark).
    write_files: bool = True
    written: Any = None   # changeset.written_files accumulator: the files this task wrote, once it succeeded

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        roots = Roots(self.roots)
        by_uri = {r.uri: r for r in roots}
        ctx = UnitContext(
            storage=GuardedFileIO(RoutingFileIO(self.storage), roots),
            warehouse=self.warehouse,
            warehouse_io=self.warehouse.file_io(),
            run_id=self.run_id,
            roots=RootIndex(list(roots)),
        )
        totals = UnitStats()
        started = time.monotonic()
        # Every file this task wrote: until the task succeeds, nobody else knows them, so a failure deletes them
        # all here (rows already yielded die with the task).
        written: list[tuple[Any, DataFile]] = []
        try:
            for batch in batches:  # ids of bins (a range: one id per Spark task)
                for bin_id in batch.column("id").to_pylist():
                    for root_uri, bucket, job_dirs, previous in self.bins[bin_id]:
                        out = self._bucket(ctx, by_uri[root_uri], bucket, job_dirs, previous, totals, written)
                        if out is not None:
                            yield out
        except BaseException:
            _abort(self.warehouse, written)
            raise
        if self.written is not None and written:
            self.written.add([(spec.name, f.to_json()) for spec, f in written])
        note = ChangesetRows()
        note.note({"kind": "index_task", "seconds": round(time.monotonic() - started, 3), **totals.to_mapping()})
        yield note.batch()

    def _bucket(self, ctx: UnitContext, root: Any, bucket: str, job_dirs: list[str], previous: str,
                totals: UnitStats, written: list[tuple[Any, DataFile]]) -> pa.RecordBatch | None:
        plan = BucketPlan(root, bucket, list(job_dirs), decode_previous(previous), self.job_filter)
        result = index_bucket(ctx, plan, _MAX_ERRORS_PER_TASK)
        totals.add(result.stats, _MAX_ERRORS_PER_TASK)
        self._progress(result.stats)
        for job_dir, unit in result.units.items():
            if unit.outcome == FAILED:
                log.warning("unit %s/%s failed: %s", root.uri, job_dir, "; ".join(unit.stats.errors))
        if self.write_files:
            return _changes(self.warehouse, ctx.warehouse_io, plan, result.tables, result.removes, written)
        return _ipc_changes(plan, result.tables, result.removes)

    def _progress(self, stats: UnitStats) -> None:
        if not self.accumulators:
            return
        for name, acc in self.accumulators.items():
            value = getattr(stats, name, 0)
            if value:
                acc.add(value)


def _abort(warehouse: Warehouse, written: list[tuple[Any, DataFile]]) -> None:
    from statekeeper.tables import delta_log

    for spec, f in written:
        delta_log.abort_files(warehouse, spec, [f])


def _changes(warehouse: Warehouse, fileio: Any, plan: BucketPlan, tables: dict[str, pa.Table],
             removes: dict[str, list[DataFile]], written: list[tuple[Any, DataFile]]) -> pa.RecordBatch | None:
    """Write the bucket's new data files here, in the task, and describe them as `file` rows.

    Shipping the rows to the change set writer as Arrow IPC instead cost a third of a full run
    (encode, two JVM hops, decode in a second Python worker) for the same parquet write. A file
    is uncommitted and invisible until the driver's commit; each is appended to `written`, which the
    task deletes if it fails, and reports (changeset.written_files) once it succeeded.
    """
    from statekeeper.tables.catalog import spec as table_spec

    rows = ChangesetRows()
    for name, files in removes.items():
        for f in files:
            rows.remove(name, f)
    for name, table in tables.items():
        spec = table_spec(name)
        for offset in range(0, table.num_rows, _FILE_ROWS):
            f = write_data_file(warehouse, spec, table.slice(offset, _FILE_ROWS), plan.partition, fileio=fileio)
            written.append((spec, f))
            rows.file(name, plan.partition, f)
    return rows.batch()


def _ipc_changes(plan: BucketPlan, tables: dict[str, pa.Table],
                 removes: dict[str, list[DataFile]]) -> pa.RecordBatch | None:
    """The bucket's rows as Arrow IPC `add` rows (chunks of _IPC_ROWS), for engines that write
    the data files themselves."""
    rows = ChangesetRows()
    for name, files in removes.items():
        for f in files:
            rows.remove(name, f)
    for name, table in tables.items():
        rows.add(name, plan.partition, table, _IPC_ROWS)
    return rows.batch()

"""The Spark side of the index job: turn bucket plans into change set rows, one task at a time.

`IndexTask` is the `mapInArrow` function. It is pickled with the storage config, roots and
warehouse (never with deltalake objects) and emits rows of
`statekeeper.tables.changeset.CHANGESET_SCHEMA`: `add` rows carrying a bucket's new rows as Arrow IPC
(one partition per bucket, rows sorted by job_dir), `remove` rows naming the bucket's previous data files, and
one `note` per task with its counters; Delta's writer turns the `add` rows into data files, so the driver never
sees the listing itself.
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
from statekeeper.tables.files import DataFile
from statekeeper.tables.warehouse import Warehouse

log = logging.getLogger("statekeeper.index")

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
        for batch in batches:  # ids of bins (a range: one id per Spark task)
            for bin_id in batch.column("id").to_pylist():
                for root_uri, bucket, job_dirs, previous in self.bins[bin_id]:
                    out = self._bucket(ctx, by_uri[root_uri], bucket, job_dirs, previous, totals)
                    if out is not None:
                        yield out
        note = ChangesetRows()
        note.note({"kind": "index_task", "seconds": round(time.monotonic() - started, 3), **totals.to_mapping()})
        yield note.batch()

    def _bucket(self, ctx: UnitContext, root: Any, bucket: str, job_dirs: list[str], previous: str,
                totals: UnitStats) -> pa.RecordBatch | None:
        plan = BucketPlan(root, bucket, list(job_dirs), decode_previous(previous), self.job_filter)
        result = index_bucket(ctx, plan, _MAX_ERRORS_PER_TASK)
        totals.add(result.stats, _MAX_ERRORS_PER_TASK)
        self._progress(result.stats)
        for job_dir, unit in result.units.items():
            if unit.outcome == FAILED:
                log.warning("unit %s/%s failed: %s", root.uri, job_dir, "; ".join(unit.stats.errors))
        return _changes(plan, result.tables, result.removes)

    def _progress(self, stats: UnitStats) -> None:
        if not self.accumulators:
            return
        for name, acc in self.accumulators.items():
            value = getattr(stats, name, 0)
            if value:
                acc.add(value)


def _changes(plan: BucketPlan, tables: dict[str, pa.Table],
             removes: dict[str, list[DataFile]]) -> pa.RecordBatch | None:
    """The bucket's rows as Arrow IPC `add` rows (chunks of _IPC_ROWS) and its previous files as `remove` rows."""
    rows = ChangesetRows()
    for name, files in removes.items():
        for f in files:
            rows.remove(name, f)
    for name, table in tables.items():
        rows.add(name, plan.partition, table, _IPC_ROWS)
    return rows.batch()

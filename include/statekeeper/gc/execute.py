"""Executing a persisted plan in Spark tasks: each task re-checks and deletes its partition's files.

The plan is repartitioned by root, bucket and parent directory (a directory's files stay in one task,
so an S3 re-check lists a directory once and a local `chk-N/` is removed after its last file);
nothing is collected to the driver. The run's `--max-deletes-per-second` is split evenly between
the tasks that can run at once.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from statekeeper.gc.deleter import Deleter, DeleteSettings, PlannedDelete
from statekeeper.storage import StorageConfig
from statekeeper.storage.pace_report import prefix_rows
from statekeeper.tables.arrow_codec import utc_datetimes, utc_timestamps

OUTCOME_SCHEMA = pa.schema([
    pa.field("uri", pa.string()), pa.field("outcome", pa.string()), pa.field("message", pa.string()),
    pa.field("retries", pa.int64()), pa.field("attempted_at", pa.timestamp("us", tz="UTC")),
])
OUTCOME_SPARK_SCHEMA = "uri string, outcome string, message string, retries long, attempted_at timestamp"


@dataclass
class DeleteTask:
    """mapInArrow: plan rows (uri, size, mtime, etag, delete_order) -> OUTCOME_SCHEMA rows."""

    roots: list[str]
    storage: StorageConfig
    settings: DeleteSettings
    files: Any = None     # Accumulator: files done (deleted or already gone)
    bytes: Any = None     # Accumulator: bytes done
    retries: Any = None   # Accumulator: retried requests/keys
    prefixes: Any = None  # Accumulator (statekeeper.storage.pace_report): what each job prefix achieved

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        def progress(files: int, nbytes: int, retries: int) -> None:
            for acc, value in ((self.files, files), (self.bytes, nbytes), (self.retries, retries)):
                if acc is not None and value:
                    acc.add(value)

        items: list[PlannedDelete] = []
        for batch in batches:
            # Column by column: a plan holds millions of rows, and row dicts cost more than the deletes' CPU.
            uris, sizes, etags, orders = (batch.column(name).to_pylist()
                                          for name in ("uri", "size", "etag", "delete_order"))
            items.extend(map(PlannedDelete, uris, sizes, utc_datetimes(batch.column("mtime")), etags, orders))
        if not items:
            return
        deleter = Deleter(self.storage, self.roots, self.settings, on_progress=progress)
        out: list[Any] = []
        for result in deleter.run(items):
            out.append(result)
            if len(out) >= 10_000:
                yield _outcomes(out)
                out = []
        if out:
            yield _outcomes(out)
        if self.prefixes is not None:
            self.prefixes.add(prefix_rows(deleter.prefix_report()))


def _outcomes(results: list[Any]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([
        pa.array([r.uri for r in results], pa.string()), pa.array([r.outcome.value for r in results], pa.string()),
        pa.array([r.message for r in results], pa.string()), pa.array([r.retries for r in results], pa.int64()),
        utc_timestamps([r.attempted_at for r in results])], schema=OUTCOME_SCHEMA)


def delete_plan(plan: Any, roots: list[str], storage: StorageConfig, settings: DeleteSettings,
                max_deletes_per_second: float | None, accumulators: tuple[Any, Any, Any],
                prefixes: Any = None) -> Any:
    """Outcomes (OUTCOME_SPARK_SCHEMA) of deleting `plan`'s rows with one `delete_order`."""
    from pyspark.sql import functions as F

    spark = plan.sparkSession
    slots = max(1, spark.sparkContext.defaultParallelism)
    partitions = slots * 2
    if max_deletes_per_second is not None:
        settings = replace(settings, max_deletes_per_second=max_deletes_per_second / min(slots, partitions))
    parent = F.regexp_replace(F.col("relative_path"), r"/[^/]*$", "")
    # No sort within the partitions: the deleter orders by delete_order (and by key where it lists) itself.
    work = (plan.select("uri", "size", "mtime", "etag", "delete_order", "root_id", "bucket", "relative_path")
            .repartition(partitions, "root_id", "bucket", parent)
            .select("uri", "size", "mtime", "etag", "delete_order"))
    files, nbytes, retries = accumulators
    return work.mapInArrow(DeleteTask(roots, storage, settings, files, nbytes, retries, prefixes),
                           OUTCOME_SPARK_SCHEMA)

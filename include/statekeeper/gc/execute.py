"""Executing a persisted plan in Spark tasks: each task re-checks and deletes its partition's files.

Where a re-check needs a directory's files together, the plan is repartitioned by root, bucket and parent
directory: local files (a `chk-N/` is removed after its last file, and a directory's symlink check is made once)
and object stores re-checked by listing (a directory is listed once). Deletes held by the store's precondition
(roots whose store's self-test proved it: the run's `Enforcement`, which the tasks get) need nothing of the kind,
so their keys are spread over the tasks by key: a job's `shared/` holds most of its files, and placed by directory it kept one task busy while the others
had finished (20 job prefixes in 4 partitions: 10,000 to 40,000 keys each). Nothing is collected to the driver.
The run's `--max-deletes-per-second`, and S3's rate per prefix, are split evenly between the tasks that can run
at once.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from statekeeper.gc.deleter import Deleter, DeleteSettings, PlannedDelete
from statekeeper.storage import StorageConfig
from statekeeper.storage.enforcement import Enforcement
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
    enforcement: Enforcement   # what the stores were proven to enforce, on the driver: the tasks test nothing again
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
        deleter = Deleter(self.storage, self.roots, self.settings, on_progress=progress, enforcement=self.enforcement)
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


def placed(plan: Any, spread: list[str], partitions: int) -> Any:
    """`plan`'s rows in `partitions` partitions: by key below the roots (`root_id`s) in `spread`, whose deletes are
    held by the store's precondition; by root, bucket and parent directory elsewhere, where the re-check needs a
    directory's files together."""
    from pyspark.sql import functions as F

    parent = F.regexp_replace(F.col("relative_path"), r"/[^/]*$", "")
    place = F.when(F.col("root_id").isin(*spread), F.col("relative_path")).otherwise(parent) if spread else parent
    # No sort within the partitions: the deleter orders by delete_order (and by key where it lists) itself.
    return (plan.select("uri", "size", "mtime", "etag", "delete_order", "root_id", "bucket", "relative_path")
            .repartition(partitions, "root_id", "bucket", place))


def delete_plan(plan: Any, roots: list[str], storage: StorageConfig, settings: DeleteSettings,
                max_deletes_per_second: float | None, accumulators: tuple[Any, Any, Any],
                prefixes: Any = None, *, enforcement: Enforcement, spread: list[str]) -> Any:
    """Outcomes (OUTCOME_SPARK_SCHEMA) of deleting `plan`'s rows with one `delete_order`. `enforcement`: the run's
    proven verdicts; `spread`: the root ids whose deletes they let hold by the store's precondition."""
    spark = plan.sparkSession
    slots = max(1, spark.sparkContext.defaultParallelism)
    partitions = slots * 2
    at_once = min(slots, partitions)
    settings = replace(settings, tasks_at_once=at_once)
    if max_deletes_per_second is not None:
        settings = replace(settings, max_deletes_per_second=max_deletes_per_second / at_once)
    work = placed(plan, spread, partitions).select("uri", "size", "mtime", "etag", "delete_order")
    files, nbytes, retries = accumulators
    return work.mapInArrow(DeleteTask(roots, storage, settings, enforcement, files, nbytes, retries, prefixes),
                           OUTCOME_SPARK_SCHEMA)

"""Executing a persisted plan in Spark tasks: each task re-checks and deletes its partition's files.

Where a re-check needs a directory's files together, the plan is repartitioned by root, bucket and parent
directory: local files (a `chk-N/` is removed after its last file, and a directory's symlink check is made once)
and object stores re-checked by listing (a directory is listed once). Deletes conditional on the planned version
(S3 and OSS with `precondition`, GCS, Azure) need nothing of the kind, so their keys are spread over the tasks by
key: a job's `shared/` holds most of its files, and placed by directory it kept one task busy while the others
had finished (20 job prefixes in 4 partitions: 10,000 to 40,000 keys each). Nothing is collected to the driver.
The run's `--max-deletes-per-second`, and S3's rate per prefix, are split evenly between the tasks that can run
at once.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from statekeeper.gc.deleter import Deleter, DeleteSettings, PlannedDelete, deletes_conditionally
from statekeeper.storage import StorageConfig
from statekeeper.storage.pace_report import prefix_rows
from statekeeper.tables.spark import ascii_lower
from statekeeper.tables.arrow_codec import utc_datetimes, utc_timestamps
from statekeeper.uri import S3_SCHEME_ALIASES

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


def spread_schemes(storage: StorageConfig) -> list[str]:
    """URI schemes, as plans may spell them (S3's aliases too), whose deletes are conditional on the planned
    version (no re-check by listing), so that their keys need not stay with their directory's."""
    spellings = [(alias, "s3") for alias in sorted(S3_SCHEME_ALIASES)] + [(s, s) for s in ("oss", "gs", "abfss")]
    return [spelled for spelled, canonical in spellings if deletes_conditionally(storage, canonical)]


def placed(plan: Any, storage: StorageConfig, partitions: int) -> Any:
    """`plan`'s rows in `partitions` partitions: by root, bucket and parent directory where the re-check needs a
    directory's files together, by key where the delete is conditional (spread_schemes)."""
    from pyspark.sql import functions as F

    parent = F.regexp_replace(F.col("relative_path"), r"/[^/]*$", "")
    scheme = ascii_lower(F.substring_index(F.col("uri"), ":", 1))
    place = F.when(scheme.isin(*spread_schemes(storage)), F.col("relative_path")).otherwise(parent)
    # No sort within the partitions: the deleter orders by delete_order (and by key where it lists) itself.
    return (plan.select("uri", "size", "mtime", "etag", "delete_order", "root_id", "bucket", "relative_path")
            .repartition(partitions, "root_id", "bucket", place))


def delete_plan(plan: Any, roots: list[str], storage: StorageConfig, settings: DeleteSettings,
                max_deletes_per_second: float | None, accumulators: tuple[Any, Any, Any],
                prefixes: Any = None) -> Any:
    """Outcomes (OUTCOME_SPARK_SCHEMA) of deleting `plan`'s rows with one `delete_order`."""
    spark = plan.sparkSession
    slots = max(1, spark.sparkContext.defaultParallelism)
    partitions = slots * 2
    at_once = min(slots, partitions)
    settings = replace(settings, tasks_at_once=at_once)
    if max_deletes_per_second is not None:
        settings = replace(settings, max_deletes_per_second=max_deletes_per_second / at_once)
    work = placed(plan, storage, partitions).select("uri", "size", "mtime", "etag", "delete_order")
    files, nbytes, retries = accumulators
    return work.mapInArrow(DeleteTask(roots, storage, settings, files, nbytes, retries, prefixes),
                           OUTCOME_SPARK_SCHEMA)

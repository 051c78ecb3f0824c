"""Driver-side planning of an index run: which bucket partitions to visit, with which job dirs.

The driver lists only the roots' child directories (job directories, savepoint directories) and
reads the Delta logs' file lists (one entry per data file, not per row); the objects below the
children are listed inside Spark tasks. A bucket is planned when a current child hashes into it
or when it holds previous rows (a vanished job directory's rows must disappear); which job
directories the previous rows name is learned in the task, from the bucket's own files.
"""
from __future__ import annotations

import fnmatch
import heapq
from dataclasses import dataclass

from statekeeper.index.bucket import BucketPlan
from statekeeper.storage import EmptyRootError, Roots
from statekeeper.storage.base import FileIO
from statekeeper.tables.catalog import INDEX_TABLES, ROOT_LEVEL_JOB_DIR, job_bucket
from statekeeper.tables.delta_log import TableState
from statekeeper.tables.files import DataFile


@dataclass(frozen=True)
class PlannedBucket:
    plan: BucketPlan
    weight: int          # expected rows (objects) of the bucket, for balancing tasks


def plan_buckets(storage: FileIO, roots: Roots, states: dict[str, TableState | None],
                 job_filter: str | None = None, *, allow_empty_root: bool = False) -> list[PlannedBucket]:
    """`allow_empty_root`: accept an object-store root with no object under it (EmptyRootError
    otherwise); a missing bucket or local directory is an error either way."""
    previous: dict[tuple[str, str], dict[str, list[DataFile]]] = {}
    for spec in INDEX_TABLES:
        state = states.get(spec.name)
        if state is None:
            continue
        for (root_id, bucket), files in state.files_by_partition().items():
            previous.setdefault((root_id, bucket), {})[spec.name] = files

    planned: list[PlannedBucket] = []
    for root in roots:
        try:
            storage.check_directory(root.uri)  # fail closed on a missing mount, bucket or prefix
        except EmptyRootError as exc:
            if not allow_empty_root:
                raise EmptyRootError(f"{exc}; check the root's spelling, or pass --allow-empty-root "
                                     "(IndexOptions.allow_empty_root) if it is intentionally empty") from exc
        names = {d.rstrip("/").rpartition("/")[2] for d in storage.list_dirs(root.uri)}
        names.add(ROOT_LEVEL_JOB_DIR)
        if job_filter:
            names = {n for n in names if n != ROOT_LEVEL_JOB_DIR and fnmatch.fnmatchcase(n, job_filter)}
        by_bucket: dict[str, list[str]] = {}
        for name in names:
            by_bucket.setdefault(job_bucket(name), []).append(name)
        buckets = set(by_bucket) | {b for (root_id, b) in previous if root_id == root.root_id}
        for bucket in sorted(buckets):
            prev = previous.get((root.root_id, bucket), {})
            weight = sum(f.num_records for f in prev.get("files", []))
            plan = BucketPlan(root, bucket, sorted(by_bucket.get(bucket, [])), prev, job_filter)
            planned.append(PlannedBucket(plan, weight))
    return planned


def balance(buckets: list[PlannedBucket], bins: int) -> list[list[PlannedBucket]]:
    """Longest-processing-time-first assignment of buckets to `bins` tasks by expected size.

    Buckets never indexed before get the median known weight (or, on a first run, their number of
    job directories), so a first run degrades to an even spread by count.
    """
    if not buckets:
        return []
    bins = max(1, min(bins, len(buckets)))
    known = sorted(b.weight for b in buckets if b.weight > 0)
    default = known[len(known) // 2] if known else 0

    def weight(b: PlannedBucket) -> int:
        return b.weight or default or max(1, len(b.plan.job_dirs))

    ordered = sorted(buckets, key=lambda b: (-weight(b), b.plan.root.uri, b.plan.bucket))
    heap = [(0, i) for i in range(bins)]
    out: list[list[PlannedBucket]] = [[] for _ in range(bins)]
    for b in ordered:
        load, i = heapq.heappop(heap)
        out[i].append(b)
        heapq.heappush(heap, (load + weight(b) + 1, i))
    return [b for b in out if b]

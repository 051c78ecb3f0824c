"""How a table scan's files are grouped into read tasks: by partition, about equal in bytes.

Both readers of a table follow this rule (the data source builds its splits with it; Spark's own scan of a
local table is coalesced to as many tasks), so a step's task counts, and the files its writes produce
downstream of a scan, do not depend on which reader ran.
"""
from __future__ import annotations

from collections.abc import Iterable

from statekeeper.tables.files import DataFile

TARGET_SPLIT_BYTES = 64 * 1024 * 1024
MIN_SPLIT_BYTES = 1024 * 1024
MAX_FILES_PER_SPLIT = 256


def plan_splits(files: Iterable[DataFile], partition_by: tuple[str, ...], *, min_splits: int = 1,
                min_split_bytes: int = MIN_SPLIT_BYTES) -> list[tuple[DataFile, ...]]:
    """Groups of whole files in (partition, path) order.

    At least `min_splits` groups when there are that many files: with 64 MiB splits alone, a `files`
    table of a store under ~1.4M objects (~4.6 MB of parquet per 100k) was one split, so one task on one
    core read the whole listing in every job that joins it. No group is made smaller than
    `min_split_bytes` (1 MiB): a task per few kilobytes made small warehouses slower (validation of the
    17-snapshot sample store ran 808 tasks instead of 310)."""
    ordered = sorted(files, key=lambda f: (f.partition_key(partition_by), f.path))
    per_split = -(-sum(f.size for f in ordered) // max(1, min_splits))
    target = min(TARGET_SPLIT_BYTES, max(1, min_split_bytes, per_split))
    splits: list[tuple[DataFile, ...]] = []
    current: list[DataFile] = []
    size = 0
    for f in ordered:
        if current and (size + f.size > target or len(current) >= MAX_FILES_PER_SPLIT):
            splits.append(tuple(current))
            current, size = [], 0
        current.append(f)
        size += f.size
    if current:
        splits.append(tuple(current))
    return splits

"""Looking at referenced files the index did not list, inside Spark tasks.

A reference outside every indexed root (entropy-injected paths, another bucket) has no row in
`files`. If it lies under one of the validation run's configured roots it is stat'ed through the
FileIO here, a few requests in flight per task; otherwise it is reported as outside the roots and
the check fails closed (`file_unverifiable`). Never touches anything outside the roots.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from statekeeper.storage import GuardedFileIO, ObjectNotFoundError, Roots, RoutingFileIO, StorageConfig, StorageError
from statekeeper.validate.checks import STAT_FOUND, STAT_MISSING, STAT_OUTSIDE, STAT_UNREADABLE

STAT_SCHEMA = pa.schema([
    pa.field("file_uri", pa.string()), pa.field("stat_status", pa.string()), pa.field("stat_size", pa.int64()),
    pa.field("stat_error", pa.string()),
])
STAT_SPARK_SCHEMA = "file_uri string, stat_status string, stat_size long, stat_error string"


def stat_one(fileio: GuardedFileIO | None, roots: Roots | None, uri: str) -> tuple[str, str, int | None, str | None]:
    try:
        root = None if roots is None else roots.root_of(uri)
    except ValueError as exc:
        # A stored path that names no object (an index written before relative stored paths
        # became parse errors): a failed check for that snapshot, never a failed run.
        return uri, STAT_UNREADABLE, None, f"unresolvable reference {uri!r}: {exc}"[:2000]
    if root is None or fileio is None:
        return uri, STAT_OUTSIDE, None, None
    try:
        info = fileio.stat(uri)
    except ObjectNotFoundError:
        return uri, STAT_MISSING, None, None
    except StorageError as exc:
        return uri, STAT_UNREADABLE, None, f"{type(exc).__name__}: {exc}"[:2000]
    return uri, STAT_FOUND, info.size, None


@dataclass
class StatTask:
    """mapInArrow function: rows with `file_uri` -> STAT_SCHEMA rows."""

    roots: list[str]
    storage: StorageConfig
    threads: int = 8
    accumulator: Any = None      # pyspark Accumulator counting stat'ed files, for progress logs

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        roots = Roots(self.roots) if self.roots else None
        fileio = GuardedFileIO(RoutingFileIO(self.storage), roots) if roots is not None else None
        with ThreadPoolExecutor(max_workers=max(1, self.threads)) as pool:
            for batch in batches:
                uris = batch.column("file_uri").to_pylist()
                if not uris:
                    continue
                rows = list(pool.map(lambda u: stat_one(fileio, roots, u), uris))
                if self.accumulator is not None:
                    self.accumulator.add(len(rows))
                cols = list(zip(*rows, strict=True))
                yield pa.RecordBatch.from_arrays(
                    [pa.array(list(c), f.type) for c, f in zip(cols, STAT_SCHEMA, strict=True)], schema=STAT_SCHEMA)

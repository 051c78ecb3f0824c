"""The Spark task of a compaction run: one snapshot at a time, each with its own storage client."""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa

from statekeeper.storage import StorageConfig

OUT = pa.schema([
    pa.field("uri", pa.string()), pa.field("status", pa.string()), pa.field("result_metadata_uri", pa.string()),
    pa.field("backup_uri", pa.string()), pa.field("metadata_bytes_before", pa.int64()),
    pa.field("metadata_bytes_after", pa.int64()), pa.field("files_written", pa.int64()),
    pa.field("bytes_written", pa.int64()), pa.field("kept_inline", pa.int64()), pa.field("result_sha256", pa.string()),
    pa.field("problem", pa.string()), pa.field("seconds", pa.float64()), pa.field("finished_at", pa.timestamp("us", "UTC")),
])
OUT_SPARK = ("uri string, status string, result_metadata_uri string, backup_uri string, metadata_bytes_before long, "
             "metadata_bytes_after long, files_written long, bytes_written long, kept_inline long, "
             "result_sha256 string, problem string, seconds double, finished_at timestamp")

@dataclass
class CompactTask:
    """rows (uri, metadata_size, metadata_etag, checkpoint_id, refused) -> OUT."""

    storage: StorageConfig
    placement: str
    min_bytes: int
    dry_run: bool
    roots: list[str]
    done: Any = None      # Accumulator: snapshots finished

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from statekeeper.storage import GuardedFileIO, Roots, RoutingFileIO

        fileio = GuardedFileIO(RoutingFileIO(self.storage), Roots(self.roots))
        for batch in batches:
            out = []
            for row in batch.to_pylist():
                out.append(self._one(fileio, row))
                if self.done is not None:
                    self.done.add(1)
            yield pa.RecordBatch.from_pylist(out, schema=OUT)

    def _one(self, fileio: Any, row: dict[str, Any]) -> dict[str, Any]:
        from statekeeper.compact.apply import SnapshotRequest, compact_snapshot
        from statekeeper.compact.plan import Placement
        from statekeeper.tables.vocabulary import CompactionStatus

        placement = Placement(self.placement)
        refused = row["refused"] or (self._running(fileio, row) if placement is Placement.IN_PLACE
                                     and not self.dry_run else None)
        if refused:
            return _row(row["uri"], CompactionStatus.REFUSED.value, problem=refused)
        out = compact_snapshot(fileio, SnapshotRequest(row["uri"], row["metadata_size"], row["metadata_etag"],
                                                       placement, self.min_bytes, self.dry_run))
        return _row(row["uri"], out.outcome.value, result_metadata_uri=out.result_uri, backup_uri=out.backup_uri,
                    metadata_bytes_before=out.metadata_bytes_before, metadata_bytes_after=out.metadata_bytes_after,
                    files_written=out.files_written, bytes_written=out.bytes_written, kept_inline=out.kept_inline,
                    result_sha256=out.result_sha256, problem=out.problem, seconds=out.seconds)

    @staticmethod
    def _running(fileio: Any, row: dict[str, Any]) -> str | None:
        """In place, checked again just before the work: a checkpoint newer than the indexed one appeared in
        the job directory, so the job runs (its JobManager owns every chk-N it retains)."""
        from statekeeper.layout.classify import checkpoint_id_of
        from statekeeper.uri import parent_uri

        if row["checkpoint_id"] is None or not row["uri"].endswith("/_metadata"):
            return None
        chk_dir = parent_uri(row["uri"])
        if checkpoint_id_of(chk_dir.rsplit("/", 1)[-1]) is None:
            return None
        newer = []
        for d in fileio.list_dirs(parent_uri(chk_dir)):
            n = checkpoint_id_of(d.rstrip("/").rsplit("/", 1)[-1])
            if n is not None and n > row["job_newest_checkpoint"]:
                newer.append(d)
        if newer:
            return (f"--in-place refused: {newer[0]} appeared after the index ran; the job is running and its "
                    "JobManager owns this checkpoint. Stop the job, re-index, then re-run; or compact into a new "
                    "directory (the default)")
        return None


def _row(uri: str, status: str, **values: Any) -> dict[str, Any]:
    row = {f.name: None for f in OUT}
    row.update(uri=uri, status=status, files_written=0, bytes_written=0, kept_inline=0,
               finished_at=datetime.now(timezone.utc))
    row.update(values)
    return row

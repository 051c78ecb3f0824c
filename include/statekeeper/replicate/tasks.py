"""The Spark tasks of a DR copy (mapInArrow callables): copy objects, verify them, write `_metadata` last.

Each task builds its own storage clients from the pickled settings; nothing but one partition's rows
is ever in a task, and nothing of a closure reaches the driver.
"""
from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from statekeeper.storage import StorageConfig
from statekeeper.storage.pace_report import prefix_rows

COPY_OUT = pa.schema([
    pa.field("source_uri", pa.string()), pa.field("target_uri", pa.string()), pa.field("outcome", pa.string()),
    pa.field("size", pa.int64()), pa.field("checksum", pa.string()), pa.field("method", pa.string()),
    pa.field("message", pa.string()), pa.field("retries", pa.int64()),
])
COPY_OUT_SPARK = ("source_uri string, target_uri string, outcome string, size long, checksum string, method string, "
                  "message string, retries long")

# The copy's rows with the verification of each object the task wrote or skipped (null columns for the others).
COPY_VERIFIED_OUT = pa.schema([*COPY_OUT, pa.field("verified", pa.bool_()), pa.field("found_size", pa.int64()),
                               pa.field("verify_message", pa.string()), pa.field("found_version", pa.string())])
COPY_VERIFIED_OUT_SPARK = (COPY_OUT_SPARK + ", verified boolean, found_size long, verify_message string, "
                           "found_version string")

VERIFY_OUT = pa.schema([
    pa.field("target_uri", pa.string()), pa.field("verified", pa.bool_()), pa.field("found_size", pa.int64()),
    pa.field("verify_message", pa.string()), pa.field("found_version", pa.string()),
])
VERIFY_OUT_SPARK = "target_uri string, verified boolean, found_size long, verify_message string, found_version string"

META_OUT = pa.schema([
    pa.field("snapshot_uri", pa.string()), pa.field("target_metadata_uri", pa.string()), pa.field("ok", pa.bool_()),
    pa.field("problem", pa.string()), pa.field("source_problem", pa.bool_()),
    pa.field("metadata_sha256", pa.string()), pa.field("metadata_bytes", pa.int64()),
    pa.field("published_at", pa.timestamp("us", tz="UTC")),
])
META_OUT_SPARK = ("snapshot_uri string, target_metadata_uri string, ok boolean, problem string, source_problem boolean, "
                  "metadata_sha256 string, metadata_bytes long, published_at timestamp")

_BATCH = 10_000


def in_target_order(rows: Any, parts: int) -> Any:
    """`rows` (a DataFrame with `target_uri`) as the copy and verify tasks want them: each task a contiguous range
    of target keys, in key order. A task then learns what a target directory holds from consecutive listing pages
    (about one LIST per 1,000 objects). Hash-partitioned, every task held a thin slice of every directory: each
    listing page answered too few of its keys, and the lookup fell back to a HEAD per object (0.39 requests per
    object on a complete target, where the listing needs 0.001)."""
    return rows.repartitionByRange(parts, "target_uri").sortWithinPartitions("target_uri")


def _batches(rows: Iterable[dict[str, Any]], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    out: list[dict[str, Any]] = []
    for row in rows:
        out.append(row)
        if len(out) >= _BATCH:
            yield pa.RecordBatch.from_pylist(out, schema=schema)
            out = []
    if out:
        yield pa.RecordBatch.from_pylist(out, schema=schema)


@dataclass
class CopyTask:
    """rows (source_uri, target_uri, expected_size, expected_version, known_version, known_checksum) -> COPY_OUT.

    expected_size/expected_version: the source object as the index recorded it (files.size, files.etag). With
    both, the copy is pinned to that version and nothing is stat'ed: what the targets hold comes from listing
    their directories (one request per page of 1,000), so a server-side copy is one request per object; a source
    that changed since it was indexed is refused by the store (source_changed: the job falls back).
    known_version/known_checksum: what an earlier run recorded for this target object when it wrote or
    verified it (null: no record), the proof of identity that lets a same-size target be skipped."""

    source: StorageConfig
    target: StorageConfig | None
    source_roots: list[str]
    target_roots: list[str]
    in_flight: int
    checksum: bool
    per_second: float | None = None   # this task's share of --max-copies-per-second
    enforcement: Any = None   # storage.enforcement.Enforcement: what the target stores were proven to enforce
    files: Any = None     # Accumulator: objects done
    bytes: Any = None     # Accumulator: bytes copied
    prefixes: Any = None  # Accumulator (statekeeper.storage.pace_report): what each target job prefix achieved

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from statekeeper.storage.transfer import Transfer, TransferItem, TransferOutcome, TransferSettings

        def items() -> Iterator[TransferItem]:
            for batch in batches:
                for row in batch.to_pylist():
                    yield TransferItem(row["source_uri"], row["target_uri"], row["expected_size"],
                                       row.get("known_version"), row.get("known_checksum"),
                                       row.get("expected_version"))

        # The run's --max-copies-per-second share is the engine's overall limit; each target job prefix is paced
        # on its own besides (statekeeper.storage.pacing).
        transfer = Transfer(self.source, self.target, self.target_roots,
                            TransferSettings(in_flight=self.in_flight, checksum=self.checksum,
                                             max_per_second=self.per_second or None),
                            source_roots=self.source_roots, enforcement=self.enforcement)

        def rows() -> Iterator[dict[str, Any]]:
            for r in transfer.run(items()):
                if self.files is not None:
                    self.files.add(1)
                if self.bytes is not None and r.outcome is TransferOutcome.COPIED:
                    self.bytes.add(r.size)
                yield {"source_uri": r.source, "target_uri": r.target, "outcome": r.outcome.value, "size": r.size,
                       "checksum": r.checksum, "method": r.method, "message": r.message, "retries": r.retries}
            transfer.log_prefix_report()
            if self.prefixes is not None:
                self.prefixes.add(prefix_rows(transfer.prefix_report()))

        yield from _batches(rows(), COPY_OUT)


@dataclass
class CopyThenVerifyTask:
    """`copy`'s rows -> COPY_VERIFIED_OUT: each batch of what the copy wrote or skipped is verified at the target
    (as VerifyTask would) by the task that copied it, once the batch's copies have finished. A stage of its own
    cost a second pass of the rows through Python workers and a Spark job per round, for the same checks: the
    target is listed again after the copies (the copy's own lookups are not reused), before any `_metadata` is
    written."""

    copy: CopyTask
    target: StorageConfig
    checksum: bool
    in_flight: int

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from statekeeper.storage.transfer import TransferOutcome, VerifyItem, verify_objects

        done = {TransferOutcome.COPIED.value, TransferOutcome.SKIPPED.value}
        for batch in self.copy(batches):
            rows = batch.to_pylist()
            items = [VerifyItem(r["target_uri"], r["size"], r["checksum"]) for r in rows if r["outcome"] in done]
            found = {v.target: v for v in verify_objects(items, self.target, checksum=self.checksum,
                                                         in_flight=self.in_flight)}
            out = [{**r, **_verification(found.get(r["target_uri"]) if r["outcome"] in done else None)}
                   for r in rows]
            yield pa.RecordBatch.from_pylist(out, schema=COPY_VERIFIED_OUT)


def _verification(result: Any) -> dict[str, Any]:
    """The VERIFY_OUT columns but target_uri of a VerifyResult (all null: the object was not verified)."""
    if result is None:
        return {"verified": None, "found_size": None, "verify_message": None, "found_version": None}
    return {"verified": result.ok, "found_size": result.size, "verify_message": result.message,
            "found_version": result.version}


@dataclass
class VerifyTask:
    """rows (target_uri, size, checksum[, version]) -> VERIFY_OUT: each object present at the target as copied
    (and, where a version is given, still that version); found_version is what later runs trust."""

    target: StorageConfig
    checksum: bool
    in_flight: int

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from statekeeper.storage.transfer import VerifyItem, verify_objects

        def items() -> Iterator[VerifyItem]:
            for batch in batches:
                for row in batch.to_pylist():
                    yield VerifyItem(row["target_uri"], row["size"], row["checksum"], row.get("version"))

        def rows() -> Iterator[dict[str, Any]]:
            for r in verify_objects(items(), self.target, checksum=self.checksum, in_flight=self.in_flight):
                yield {"target_uri": r.target, **_verification(r)}

        yield from _batches(rows(), VERIFY_OUT)


@dataclass
class MetadataTask:
    """One row per snapshot whose every object is verified at the target -> META_OUT.

    Reads the source `_metadata` (refusing one that changed since it was indexed), rewrites it, checks
    that everything the rewritten file names was verified, creates tag-17 directories on local targets,
    and writes it: atomically (local: temp name + rename; S3: one PUT), last, then reads it back."""

    source: StorageConfig
    target: StorageConfig
    target_roots: list[str]
    mapping: dict[str, str]

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from statekeeper.storage import GuardedFileIO, Roots, RoutingFileIO

        source_io = RoutingFileIO(self.source)
        target_io = GuardedFileIO(RoutingFileIO(self.target), Roots(self.target_roots))
        for batch in batches:
            out = [self._one(source_io, target_io, row) for row in batch.to_pylist()]
            yield pa.RecordBatch.from_pylist(out, schema=META_OUT)

    def _one(self, source_io: Any, target_io: Any, row: dict[str, Any]) -> dict[str, Any]:
        from statekeeper.format import MetadataFormatError
        from statekeeper.replicate.relocate import RelocateError, relocate
        from statekeeper.storage import ObjectNotFoundError, StorageError

        src, dst = row["snapshot_uri"], row["target_metadata_uri"]
        base = {"snapshot_uri": src, "target_metadata_uri": dst, "ok": False, "source_problem": False,
                "metadata_sha256": None, "metadata_bytes": None, "published_at": None}
        mapping = dict(self.mapping)
        mapping.update({p["source_uri"]: p["target_uri"] for p in row["external"] or []})
        held = row.get("metadata_body")
        if held is not None:
            # follow mode: the bytes its discovery parsed and took the closure from (whatever Flink did since)
            try:
                relocated = relocate(io.BytesIO(held), src, dst, mapping)
            except (MetadataFormatError, RelocateError) as exc:
                return {**base, "problem": f"{type(exc).__name__}: {exc}"}
            return self._publish(target_io, row, base, relocated)
        try:
            info = source_io.stat(src)
        except ObjectNotFoundError:
            return {**base, "source_problem": True,
                    "problem": f"{src} vanished during the copy (a running job subsumed the checkpoint?)"}
        if row["metadata_etag"] and info.etag != row["metadata_etag"]:
            return {**base, "source_problem": True,
                    "problem": f"{src} changed since it was indexed (etag {row['metadata_etag']} -> {info.etag}): "
                               "re-index, then copy"}
        try:
            with source_io.open_input(src, info=info) as stream:
                relocated = relocate(stream, src, dst, mapping)
        except ObjectNotFoundError as exc:
            return {**base, "source_problem": True, "problem": f"{src} vanished while read: {exc}"}
        except (MetadataFormatError, RelocateError) as exc:
            return {**base, "problem": f"{type(exc).__name__}: {exc}"}
        return self._publish(target_io, row, base, relocated)

    def _publish(self, target_io: Any, row: dict[str, Any], base: dict[str, Any], relocated: Any) -> dict[str, Any]:
        """Write the rewritten `_metadata` once everything it names is verified at the target."""
        from statekeeper.storage import StorageError

        dst = row["target_metadata_uri"]
        try:
            verified = set(row["verified_targets"] or [])
            unverified = sorted(set(relocated.files) - verified)
            if unverified:
                return {**base, "problem": f"the rewritten {dst} names {len(unverified)} object(s) the index's "
                                           f"references did not list, e.g. {unverified[:3]}: re-index, then copy"}
            self._managed_dirs(relocated.managed_dirs)
            current = target_io.sha256(dst)
            if current != relocated.sha256:
                target_io.write(dst, relocated.body)
                if target_io.sha256(dst) != relocated.sha256:
                    return {**base, "problem": f"{dst} does not read back as written (another writer?)"}
            # the target store's own time of the file (an earlier run's, when it already held these bytes): the
            # recovery point's other end, on the clock that stamped it
            published = target_io.stat(dst).mtime
            return {**base, "ok": True, "problem": None, "metadata_sha256": relocated.sha256,
                    "metadata_bytes": relocated.size, "published_at": published}
        except StorageError as exc:
            return {**base, "problem": f"cannot write {dst}: {type(exc).__name__}: {exc}"}
        finally:
            relocated.close()

    def _managed_dirs(self, dirs: set[str]) -> None:
        # Object stores have no directories; a local restore expects the managed directories to exist.
        import os

        from statekeeper.storage import local_path

        # relocate() has refused any directory outside the targets already
        for d in dirs:
            if d.startswith("file://"):
                os.makedirs(local_path(d), exist_ok=True)


FOLLOW_OUT = pa.schema([
    pa.field("kind", pa.string()),               # "job": one per job directory; "object": one per closure object
    pa.field("root", pa.string()), pa.field("job_dir", pa.string()), pa.field("status", pa.string()),
    pa.field("checkpoint_id", pa.int64()), pa.field("metadata_uri", pa.string()),
    pa.field("metadata_etag", pa.string()), pa.field("metadata_mtime", pa.timestamp("us", tz="UTC")),
    pa.field("problem", pa.string()),
    pa.field("uri", pa.string()), pa.field("size", pa.int64()), pa.field("etag", pa.string()),
    pa.field("metadata_body", pa.binary()),      # job rows of due checkpoints: the bytes parsed (JobFollow)
])
FOLLOW_OUT_SPARK = ("kind string, root string, job_dir string, status string, checkpoint_id long, "
                    "metadata_uri string, metadata_etag string, metadata_mtime timestamp, problem string, uri string, "
                    "size long, etag string, metadata_body binary")
_PROBLEMS_PER_JOB = 5


@dataclass
class FollowTask:
    """rows (root, job_dir, last_copied) -> FOLLOW_OUT: per job directory, what follow mode's discovery
    found (statekeeper.replicate.follow), and when a checkpoint is due, each object of its closure."""

    source: StorageConfig
    roots: list[str]

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from statekeeper.replicate.follow import follow_job
        from statekeeper.storage import RoutingFileIO

        fileio = RoutingFileIO(self.source)

        def rows() -> Iterator[dict[str, Any]]:
            for batch in batches:
                for row in batch.to_pylist():
                    found = follow_job(fileio, self.roots, row["root"], row["job_dir"], row["last_copied"])
                    c = found.completed
                    problems = [p.message for p in found.problems]
                    if len(problems) > _PROBLEMS_PER_JOB:
                        problems = [*problems[:_PROBLEMS_PER_JOB], f"... and {len(problems) - _PROBLEMS_PER_JOB} more"]
                    job = {"kind": "job", "root": found.root, "job_dir": found.job_dir, "status": found.status.value,
                           "checkpoint_id": c.checkpoint_id if c else None,
                           "metadata_uri": c.metadata_uri if c else None,
                           "metadata_etag": c.metadata.etag if c else None,
                           "metadata_mtime": c.metadata.mtime if c else None,
                           "problem": "; ".join(problems) or None}
                    yield {**job, "metadata_body": found.metadata_body}
                    for o in found.objects:
                        yield {**job, "kind": "object", "problem": None, "uri": o.uri, "size": o.size, "etag": o.etag}

        yield from _batches(rows(), FOLLOW_OUT)

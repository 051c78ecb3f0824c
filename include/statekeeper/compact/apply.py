"""Compact one snapshot in storage: write the new files, then a candidate `_metadata`, verify it as
read back, and only then install it — last, atomically.

At every instant the installed `_metadata` is the source or a verified result, never anything else:

* the moved payloads go to new objects (names `plan.py` derives from the source, so a re-run after a
  crash rewrites the same objects);
* the candidate is written under a name Flink never reads (`_metadata.statekeeper-compacting`), read
  back, parsed and verified against the source (`verify.py`);
* in place, the original is first copied to `_metadata.statekeeper-original` and that copy checked
  byte for byte; the source is stat'ed again (refused if it changed); then the verified bytes replace
  `_metadata` in one atomic write (local: temporary name + rename; S3: one PUT), which is read back.

A crash before the install leaves the source in force plus objects nothing references (the index
lists them; a re-run overwrites them, GC collects them after its grace period). A crash after it
leaves the verified result; the next run finds the backup, verifies the installed file against it
and records the compaction (`CompactionStatus.RECOVERED`). The backup is an unreferenced file: GC removes it
after its grace period, by its rules, like any other.
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from statekeeper.compact.concurrency import bounded_map
from statekeeper.compact.plan import BACKUP_NAME, CompactionPlan, Placement, plan_compaction, sibling
from statekeeper.compact.verify import CompactionVerifyError, PayloadDigests, Verified, verify_candidate
from statekeeper.errors import StatekeeperError
from statekeeper.format import read_metadata, write_metadata
from statekeeper.storage import FileInfo, ObjectNotFoundError
from statekeeper.tables.vocabulary import CompactionStatus

_SPOOL = 8 * 1024 * 1024      # a candidate `_metadata` up to this stays in memory; larger ones spill to disk
_CHUNK = 1 << 20


class CompactionError(StatekeeperError):
    """A snapshot cannot be compacted as asked (changed source, an existing differing result, ...)."""


@dataclass(frozen=True)
class SnapshotRequest:
    source_uri: str                 # the `_metadata` to compact
    expected_size: int              # as indexed
    expected_etag: str | None
    placement: Placement
    min_bytes: int
    dry_run: bool = False
    in_flight: int | None = None    # moved payloads written (and read back) at once; None: 8 on object
                                    # stores (latency-bound per object), 1 on file systems (creating files in
                                    # one directory serializes in the kernel; threads only add contention:
                                    # measured 47 s vs 78 s for 160,000 files on local disk)


@dataclass(frozen=True)
class SnapshotOutcome:
    outcome: CompactionStatus        # never REFUSED: that is decided before a snapshot is read
    source_uri: str
    result_uri: str | None = None
    backup_uri: str | None = None
    metadata_bytes_before: int | None = None
    metadata_bytes_after: int | None = None
    files_written: int = 0
    bytes_written: int = 0          # payload bytes moved out of `_metadata`
    kept_inline: int = 0
    result_sha256: str | None = None
    problem: str | None = None
    seconds: float = 0.0


class _PayloadReader(io.RawIOBase):
    """A readable stream over an iterator of byte chunks (a payload streamed from the source)."""

    def __init__(self, chunks: Iterator[bytes]):
        self._chunks = chunks
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buf:
            self._buf = next(self._chunks, b"")
            if not self._buf:
                return 0
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


def compact_snapshot(fileio: Any, request: SnapshotRequest) -> SnapshotOutcome:
    """Compact one snapshot (see the module doc). Codec, verification and storage errors about this
    snapshot become a FAILED outcome naming the object; nothing is installed then."""
    from statekeeper.format import MetadataFormatError
    from statekeeper.storage import StorageError

    began = time.monotonic()
    try:
        out = _compact(fileio, request)
    except (MetadataFormatError, CompactionVerifyError, CompactionError, StorageError) as exc:
        out = SnapshotOutcome(CompactionStatus.FAILED, request.source_uri, problem=f"{type(exc).__name__}: {exc}")
    return dataclasses.replace(out, seconds=time.monotonic() - began)


def _compact(fileio: Any, req: SnapshotRequest) -> SnapshotOutcome:
    src = req.source_uri
    info = fileio.stat(src)
    if (req.expected_etag and info.etag != req.expected_etag) or info.size != req.expected_size:
        if req.placement is Placement.IN_PLACE and not req.dry_run:
            return _recover(fileio, req, info)
        raise CompactionError(f"{src} changed since it was indexed (size {req.expected_size} -> {info.size}): "
                              "re-index, then compact")
    with fileio.open_input(src, info=info) as source:
        model = read_metadata(source, src)
        plan = plan_compaction(model, src, req.placement, min_bytes=req.min_bytes,
                               fingerprint=info.etag or str(info.size))
        base = dict(source_uri=src, result_uri=plan.result_uri, metadata_bytes_before=info.size,
                    files_written=len(plan.files), bytes_written=plan.moved_bytes, kept_inline=plan.kept_inline)
        if not plan.files:
            return SnapshotOutcome(CompactionStatus.NOTHING_TO_MOVE, **{**base, "result_uri": None, "files_written": 0})
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL) as body:
            size = write_metadata(plan.model, body, inline_source=source)
            plan = plan.written()       # the new model is in `body` now; keep only what the rest needs
            body.seek(0)
            sha = _digest(body)
            base.update(metadata_bytes_after=size, result_sha256=sha)
            if req.dry_run:
                return SnapshotOutcome(CompactionStatus.PLANNED, **base)
            if req.placement is Placement.NEW_DIRECTORY and _installed_before(fileio, model, src, source, plan, sha):
                return SnapshotOutcome(CompactionStatus.ALREADY_COMPACTED, **base)
            in_flight = req.in_flight or (1 if plan.result_uri.startswith("file://") else 8)
            digests = _write_payloads(fileio, src, info, plan, in_flight)
            new_files = plan.file_uris
            # Durable before anything names them; one flush for all (a file system's fsync each is slow).
            fileio.make_durable(list(new_files))
            plan = plan.verifying()     # only the new files' URIs are needed from here on
            fileio.write(plan.candidate_uri, body)
            _verify_written(fileio, model, src, source, plan.result_uri, plan.candidate_uri, new_files, digests,
                            in_flight)
            backup = _install(fileio, req, info, plan, body, sha)
            return SnapshotOutcome(CompactionStatus.COMPACTED, backup_uri=backup, **base)


def _installed_before(fileio: Any, model: Any, src: str, source: Any, plan: CompactionPlan, sha: str) -> bool:
    """Whether a new directory already holds this very result (a run that died after installing it),
    verified again; CompactionError when it holds anything else."""
    existing = fileio.sha256(plan.result_uri)
    if existing == sha:
        _verify_written(fileio, model, src, source, plan.result_uri, plan.result_uri, plan.file_uris)
        fileio.delete_many([plan.candidate_uri])    # left by a run that died after installing
        return True
    if existing is not None:
        raise CompactionError(f"{plan.result_uri} exists and is not the compaction of {src} this run "
                              "computes: move it away (or compact with the options that made it), "
                              "then re-run")
    return False


def _install(fileio: Any, req: SnapshotRequest, info: FileInfo, plan: CompactionPlan, body: Any, sha: str) -> str | None:
    """Write the verified `_metadata` last (in place: after backing the original up, unless the source
    changed meanwhile), check it reads back, drop the candidate. The backup's URI, if any."""
    src = req.source_uri
    backup = None
    if req.placement is Placement.IN_PLACE:
        backup = _backup(fileio, src, info)
        now = fileio.stat(src)
        if now.etag != info.etag or now.size != info.size:
            raise CompactionError(f"{src} changed while it was compacted: nothing installed; is a job "
                                  "writing this checkpoint?")
    body.seek(0)
    fileio.write(plan.result_uri, body)
    if fileio.sha256(plan.result_uri) != sha:
        raise CompactionError(f"{plan.result_uri} does not read back as written (another writer?)"
                              + (f"; the original is at {backup}" if backup else ""))
    fileio.delete_many([plan.candidate_uri])
    return backup


def _write_payloads(fileio: Any, src: str, info: FileInfo, plan: CompactionPlan,
                    in_flight: int) -> PayloadDigests:
    """Write every moved payload to its file, streamed from the source (each worker thread reads through
    its own stream, pinned to the version parsed); returns the SHA-256 of each payload as written."""
    import threading

    local = threading.local()
    streams: list[Any] = []
    lock = threading.Lock()

    def source_stream() -> Any:
        stream = getattr(local, "stream", None)
        if stream is None:
            stream = local.stream = fileio.open_input(src, info=info)
            with lock:
                streams.append(stream)
        return stream

    def one(f: Any) -> tuple[int, bytes]:
        h = hashlib.sha256()
        chunks = _hashed(f.payload.iter_chunks(source_stream(), _CHUNK), h)
        fileio.write(f.uri, io.BufferedReader(_PayloadReader(chunks), _CHUNK), durable=False)
        return f.payload.offset, h.digest()

    try:
        return PayloadDigests(bounded_map(one, plan.files, in_flight))
    finally:
        for stream in streams:
            stream.close()


def _hashed(chunks: Iterator[bytes], digest: Any) -> Iterator[bytes]:
    for chunk in chunks:
        digest.update(chunk)
        yield chunk


def _digest(body: BinaryIO) -> str:
    digest = hashlib.sha256()
    while chunk := body.read(_CHUNK):
        digest.update(chunk)
    body.seek(0)
    return digest.hexdigest()


def _verify_written(fileio: Any, model: Any, src: str, source: Any, result_uri: str, written: str,
                    new_files: frozenset[str], digests: PayloadDigests | None = None, in_flight: int = 1) -> Verified:
    """Parse what storage now holds at `written` as if installed at `result_uri`, and verify it."""
    with fileio.open_input(written) as stream:
        candidate = read_metadata(stream, result_uri)
        return verify_candidate(model, src, source, candidate, stream, result_uri, new_files, fileio.open_input,
                                digests, in_flight=in_flight)


def _backup(fileio: Any, src: str, info: FileInfo) -> str:
    """Copy the original `_metadata` beside itself and check the copy byte for byte."""
    backup = sibling(src, BACKUP_NAME)
    want = fileio.sha256(src)
    if fileio.sha256(backup) != want:
        fileio.copy(src, backup)
        if fileio.sha256(backup) != want:
            raise CompactionError(f"the backup {backup} does not match {src}: nothing installed")
    return backup


def _recover(fileio: Any, req: SnapshotRequest, info: FileInfo) -> SnapshotOutcome:
    """In place, the source differs from the index: a run may have installed the result and died before
    recording it. Then the backup is the indexed original and the installed file verifies against it."""
    src = req.source_uri
    backup = sibling(src, BACKUP_NAME)
    try:
        binfo = fileio.stat(backup)
    except ObjectNotFoundError:
        binfo = None
    # The size only rules a backup out cheaply; it never proves one in. Proof is the verification below:
    # the payload names come from the indexed version (`fingerprint`), so the installed file verifies only
    # if it was compacted from that version and carries the backup's state, byte for byte.
    if binfo is None or binfo.size != req.expected_size:
        raise CompactionError(f"{src} changed since it was indexed (size {req.expected_size} -> {info.size}) and "
                              f"no backup {backup} of the indexed original exists: re-index, then compact")
    with fileio.open_input(backup, info=binfo) as original:
        model = read_metadata(original, src)
        plan = plan_compaction(model, src, Placement.IN_PLACE, min_bytes=req.min_bytes,
                               fingerprint=req.expected_etag or str(req.expected_size))
        installed = fileio.sha256(src)
        try:
            _verify_written(fileio, model, src, original, src, src, plan.file_uris)
        except (CompactionVerifyError, ObjectNotFoundError) as exc:
            raise CompactionError(f"{src} is neither the indexed original nor its verified compaction ({exc}); "
                                  f"the original is at {backup}: copy it back to {src} if the job must restore "
                                  "from it, then re-index") from None
        fileio.delete_many([plan.candidate_uri])
        return SnapshotOutcome(CompactionStatus.RECOVERED, src, src, backup, binfo.size, info.size, len(plan.files),
                               plan.moved_bytes, plan.kept_inline, installed)

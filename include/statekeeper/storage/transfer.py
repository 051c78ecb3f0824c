"""Copy objects from one store to another: the disaster-recovery copy's data mover.

    Transfer(source_config, target_config, target_roots, settings, source_roots).run(items) -> TransferResult each
    verify_objects(items, target_config, checksum=...) -> VerifyResult each          (statekeeper.storage.verify)

Runs inside Spark tasks (one Transfer per task, many items each), so: no Spark or Airflow imports, a Transfer
pickles (clients are created on first use), and `run` holds a bounded window of items. Every item goes through
the bulk engine (statekeeper.storage.bulk): paced per target job prefix (AIMD from S3's 3,500 writes/s per prefix,
`max_per_second` as the overall limit), retried with back-off on transient errors, one result per item.

Two ways to learn what is at both ends:

* planned (the DR job's items, which carry the version the index recorded, `source_version`): nothing is
  stat'ed. What the target already holds comes from one listing page per directory and 1,000 objects
  (statekeeper.storage.listing; local targets: an lstat), and the copy is pinned to the indexed version: S3
  CopyObject with CopySourceIfMatch, a GCS rewrite with ifSourceGenerationMatch, Azure Copy Blob with If-Match,
  ranged GETs with If-Match / ifGenerationMatch when streaming, the local fingerprint (inode, mtime, size) when
  opening a local file. A source that changed since it was indexed is refused by the store (SOURCE_CHANGED), a
  vanished one is SOURCE_MISSING: the job's fallback path. So an S3 -> S3 copy in one store is one request.
* stat'ed (items without a recorded version, and any retry of an item: the target may have changed meanwhile):
  stat the source (gone: SOURCE_MISSING; not the size the index recorded: SOURCE_CHANGED) and the target, then
  copy pinned to the stat'ed version.

Then, if the target does not already hold the source's bytes (Skips, below), one of three ways:

* server_side: source and target in one store reached with one identity: S3 (same endpoint, region and access
  key) and OSS through its S3 API: CopyObject, or above `server_side_max` UploadPartCopy parts; GCS (same
  endpoint, project and credentials): a rewrite; Azure (one account, same endpoint and credentials): Copy Blob.
  No byte passes through this process, except with `checksum`: SHA-256 needs the bytes, so the source is then
  read once in full.
* local: file to file, a kernel copy (copy_file_range, else sendfile).
* stream: everything else, across schemes and identities. The source is read once, pinned to its version (a
  change mid-read is ObjectChangedError -> SOURCE_CHANGED), hashed and counted on the way, into a single PUT up
  to `part_size` or a multipart upload of `part_size` parts (S3, OSS; aborted on any failure), a local file, or
  the target FileIO's atomic write (GCS, Azure).

Targets absent when looked at are written create-only (S3 and OSS If-None-Match: *, GCS ifGenerationMatch=0,
Azure If-None-Match: *, local O_EXCL), so an object another writer created meanwhile is never replaced blindly:
the attempt is retried, stat'ed, and the new state decides.

Those preconditions are relied on only where the target store's self-test proved them (statekeeper.storage.
enforcement: the run's `Enforcement`, proven on the driver; a Transfer given none proves each target store itself
on first use). A store that ignores a create-only write or copy (moto ignores If-None-Match on CopyObject), or
whose self-test could not complete, gets an existence check of the target just before the write instead: an object
that appears between that check and the write is replaced (the window is one request). A store that ignores the
source pin of a server-side copy (CopySourceIfMatch, ifSourceGenerationMatch, Copy Blob's source If-Match; the
self-test copies within the target's bucket on the same endpoint, since the source is never written) gets the
source's version read before and after the copy: a change in between is SOURCE_CHANGED; a source rewritten and
put back to its old bytes (the same MD5 ETag) between the two reads is not seen (Flink never rewrites a file).
Streamed reads stay pinned by If-Match / ifGenerationMatch on every GET, which is not self-tested (the source
store is never written to). A target of other content is replaced (local: a
temporary name and a rename, so a reader sees the old or the new file). New local files are written in place
and made durable in batches: one durability barrier (statekeeper.storage.local.make_durable: syncfs, or an
fsync of each file and directory for a few) for up to `durable_batch` files, before their results are handed
back, so a COPIED local result is on stable storage and the job writes `_metadata` only after it.

The written size must equal the pinned source size: a local file of the wrong size is removed, a multipart
upload is aborted, and a single PUT or a GCS/Azure upload is never committed (the last bytes are handed over
only after the end of the source was confirmed). Copies whose result carries a store checksum (GCS CRC32C) must
also match the source's, where it has one.

Memory: a stream to S3 buffers one part (or the whole object up to part_size) per transfer in flight: up to
in_flight x part_size (16 x 64 MiB = 1 GiB at the defaults). Lower in_flight or part_size on small executors;
5 MiB is S3's minimum part size. A stream to Azure buffers one block (the client's 4 MiB); to GCS up to 16 MiB,
and larger objects are spooled to a local temporary file first (GcsFileIO: a resumable upload must be able to
re-send a chunk), so an executor needs in_flight x the largest object of free temporary disk.

Skips need proof that the target holds the source's bytes; a size is never proof (a stale copy from an
interrupted or foreign run, bit rot or a hand copy can have the right name and size and other bytes, and such a
copy does not restore). A same-size target is skipped only when
  (a) its current version (S3/OSS/Azure ETag, GCS generation, local inode+mtime_ns+size: FileInfo.etag, as the
      listing or stat shows it) equals `TransferItem.known_version`, the version this tool recorded when it wrote
      or verified the object (in checksum mode only together with the SHA-256 recorded then, `known_checksum`); or
  (b) both sides carry a comparable content hash and they are equal: a plain MD5 ETag (32 hex, no '-': a
      single-part upload) at an S3/OSS target against the source's plain MD5 ETag (the indexed one, on the
      planned way), else against an MD5 of the source computed by reading it; an Azure target's Content-MD5
      likewise; a GCS target's CRC32C against the source's (a GCS source), else against a CRC32C computed by
      reading the source; or, in checksum mode, SHA-256 of both.
Anything else (a local target this tool has no record of, an Azure blob without Content-MD5, multipart or SSE-KMS
ETags that do not match) is copied again, replacing the target. Unequal hashes never skip; an ETag that is not an
MD5 can only fail to match, which costs a copy, never a wrong skip.

Safety: a target must lie below one of `target_roots` (no symlink on the way below the root either) and never at
or below a `source_roots` entry, lexically or after resolving local symlinks. Violations are FAILED results,
never attempted; roots that overlap are refused when the Transfer is made.
"""
from __future__ import annotations

import hashlib
import logging
import os
import stat as stat_mod
import threading
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import StrEnum
from typing import Any, BinaryIO

from botocore.exceptions import BotoCoreError, ClientError

from statekeeper.errors import ConfigurationError, StatekeeperError
from statekeeper.storage.bulk import Answer, BulkEngine, BulkSettings, Work, log_report
from statekeeper.storage.config import StorageConfig
from statekeeper.storage.copy_steps import CHUNK as _CHUNK
from statekeeper.storage.copy_steps import ExactStream as _ExactStream
from statekeeper.storage.copy_steps import SizeMismatch as _SizeMismatch
from statekeeper.storage.copy_steps import SourceChanged as _SourceChanged
from statekeeper.storage.copy_steps import SourceGone as _SourceGone
from statekeeper.storage.copy_steps import SourceReader as _SourceReader
from statekeeper.storage.copy_steps import create_local, kernel_copy, upload_to_s3, write_local_atomic
from statekeeper.storage.enforcement import Enforcement, Guard, guard_name
from statekeeper.storage.errors import (
    NotRegularFileError,
    ObjectChangedError,
    ObjectExistsError,
    ObjectNotFoundError,
    OutsideRootError,
    RootConfigError,
    StorageError,
    SymlinkRefusedError,
    is_vendor_error,
)
from statekeeper.storage.listing import ListingLookup, Resolved
from statekeeper.storage.local import file_uri, local_path, object_type_of, symlink_below
from statekeeper.storage.model import FileInfo, ObjectType
from statekeeper.storage.pacing import S3_WRITES_PER_PREFIX, LaneReport, Pacer, PaceSettings
from statekeeper.storage.retry import Failure, RetryPolicy, ThrottleLog, judge
from statekeeper.storage.roots import GuardedFileIO, Roots, resolved_uri
from statekeeper.storage.router import RoutingFileIO, scheme_of
from statekeeper.storage.s3 import part_size_for
from statekeeper.storage.verify import VerifyItem, VerifyResult, sha256_of, verify_objects
from statekeeper.uri import is_under, normalize_uri, split_azure

log = logging.getLogger("statekeeper.storage.transfer")

_MIN_PART = 5 * 1024 * 1024          # S3's minimum size of every part but the last
_MAX_PART = 5 * 1024 ** 3            # S3's maximum part size (UploadPart and UploadPartCopy)
_POOL_SLACK = 4                      # connections beyond in_flight: verification and stat calls overlap
_LOOKUP_WINDOW = 1000                # planned items whose targets are looked up together (listing pages)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

__all__ = ["CopyMethod", "Transfer", "TransferItem", "TransferOutcome", "TransferResult", "TransferSettings",
           "VerifyItem", "VerifyResult", "verify_objects"]


class TransferOutcome(StrEnum):
    COPIED = "copied"                  # bytes written to the target in this call
    SKIPPED = "skipped"                # the target already had the object, proven by its recorded version or a content hash
    SOURCE_MISSING = "source_missing"  # the source object is gone (e.g. a running Flink job subsumed the checkpoint)
    SOURCE_CHANGED = "source_changed"  # the source differs from the expected (indexed) version, or changed while copied
    FAILED = "failed"                  # any other error (the message says which and what to do)


class CopyMethod(StrEnum):
    SERVER_SIDE = "server_side"
    STREAM = "stream"
    LOCAL = "local"
    NONE = ""                          # nothing copied in this call


@dataclass(frozen=True, slots=True)
class TransferItem:
    source: str                        # canonical URI
    target: str                        # canonical URI
    expected_size: int | None = None   # the size the index recorded; a different current source size -> SOURCE_CHANGED
    known_version: str | None = None   # the target's version (FileInfo.etag) when this tool last wrote/verified it
    known_checksum: str | None = None  # the SHA-256 recorded with that version (checksum mode), if any
    source_version: str | None = None  # the source's version the index recorded (files.etag): with expected_size,
                                       # the copy is pinned to it and nothing is stat'ed (the planned way)


@dataclass(frozen=True, slots=True)
class TransferResult:
    source: str
    target: str
    outcome: TransferOutcome
    size: int                          # bytes of the object (source size), 0 when unknown
    checksum: str | None               # hex SHA-256 of the bytes, when settings.checksum (None otherwise)
    method: str                        # "server_side" | "stream" | "local" | "" (not copied)
    message: str | None
    retries: int


@dataclass(frozen=True)
class TransferSettings:
    in_flight: int = 16                      # concurrent transfers per Transfer (threads)
    checksum: bool = False                   # SHA-256 while copying; a skip candidate's source and target are compared
    durable: bool = True                     # local targets on stable storage before their results are handed back
    part_size: int = 64 * 1024 * 1024        # multipart part size for streamed uploads and multipart copies
    server_side_max: int = 5 * 1024 ** 3     # above this, a server-side copy uses UploadPartCopy parts
    max_attempts: int = 4                    # attempts per item on transient errors
    backoff_base: float = 0.5                # seconds; exponential with full jitter between attempts
    backoff_max: float = 20.0
    max_per_second: float | None = None      # objects per second for this Transfer (a task's share of the run's)
    durable_batch: int = 2000                # local files per durability barrier

    def __post_init__(self) -> None:
        if self.in_flight < 1 or self.max_attempts < 1:
            raise ValueError(f"TransferSettings: in_flight and max_attempts must be >= 1, got {self.in_flight} "
                             f"and {self.max_attempts}")
        if not _MIN_PART <= self.part_size <= _MAX_PART:
            raise ValueError(f"TransferSettings.part_size must be in [5 MiB, 5 GiB] (S3's part limits), "
                             f"got {self.part_size}")
        if not 0 <= self.server_side_max <= _MAX_PART:
            raise ValueError(f"TransferSettings.server_side_max must be in [0, 5 GiB] (CopyObject's limit), "
                             f"got {self.server_side_max}")
        if self.backoff_base < 0 or self.backoff_max < 0:
            raise ValueError("TransferSettings: backoff_base and backoff_max must be >= 0")
        if (self.max_per_second is not None and self.max_per_second <= 0) or self.durable_batch < 1:
            raise ValueError("TransferSettings: max_per_second must be > 0 (or None) and durable_batch >= 1")


class _Refused(Exception):
    """The item must not be attempted (a target outside the target roots or inside a source root)."""


@dataclass(frozen=True, slots=True)
class _Digests:
    """Content hashes of one source version, computed on read (None: not asked for)."""

    md5: str | None
    crc32c: str | None
    sha256: str | None


_UNKNOWN: Any = object()   # a target whose state was not looked up: stat it


@dataclass(slots=True)
class _Job:
    """One item on its way: where it goes, and what is known of its target."""

    item: TransferItem
    source: str = ""
    target: str = ""
    refusal: str | None = None
    known: Any = _UNKNOWN      # FileInfo (as listed), None (absent) or _UNKNOWN
    size: int = 0              # what an attempt learnt of the source's size, for a failed item's result


# -- helpers ------------------------------------------------------------------------------------------

def _same_store(a: StorageConfig, b: StorageConfig) -> bool:
    """One S3 store reached with one identity: only then can a CopyObject read the source and ETags
    be compared (another store or account may encrypt differently, and its ETags are not MD5s)."""
    def endpoint(c: StorageConfig) -> str | None:
        return c.endpoint.rstrip("/").lower() if c.endpoint else None

    return endpoint(a) == endpoint(b) and a.region == b.region and a.access_key_id == b.access_key_id


def _url(value: str | None) -> str | None:
    return value.rstrip("/").lower() if value else None


def _same_identities(a: StorageConfig, b: StorageConfig) -> dict[str, bool]:
    """Per canonical scheme: whether `a` and `b` reach one store with one identity, so that a server-side
    copy can read the source and write the target (and a URI names one object on both sides)."""
    return {
        "file": True,
        "s3": _same_store(a, b),
        "oss": (_url(a.oss_endpoint) == _url(b.oss_endpoint) and a.oss_region == b.oss_region
                and a.oss_access_key_id == b.oss_access_key_id),
        "gs": (_url(a.gcs_endpoint) == _url(b.gcs_endpoint) and a.gcs_project == b.gcs_project
               and a.gcs_anonymous == b.gcs_anonymous and a.gcs_credentials_file == b.gcs_credentials_file
               and a.gcs_credentials_json == b.gcs_credentials_json),
        "abfss": (_url(a.azure_blob_endpoint) == _url(b.azure_blob_endpoint)
                  and a.azure_account_name == b.azure_account_name and a.azure_account_key == b.azure_account_key
                  and a.azure_sas_token == b.azure_sas_token),
    }


def server_side_possible(source: StorageConfig, target: StorageConfig, source_uri: str, target_uri: str) -> bool:
    """Whether objects below `source_uri` reach `target_uri` by a server-side copy (one store, one identity), as
    Transfer._method decides it per object."""
    schemes = (scheme_of(source_uri), scheme_of(target_uri))
    if schemes[0] != schemes[1] or schemes[0] == "file" or not _same_identities(source, target).get(schemes[0], False):
        return False
    return schemes[0] != "abfss" or _azure_account(source_uri) == _azure_account(target_uri)


def _azure_account(uri: str) -> str:
    return split_azure(uri)[1]


def _below(uri: str, root: str) -> bool:
    """`uri` is `root` or below it; both canonical (the per-item path: no re-normalizing)."""
    return uri == root or uri.startswith(root + "/")


_HEX = frozenset("0123456789abcdef")


def _plain_md5(etag: str | None) -> bool:
    # Multipart ETags are "<md5 of part md5s>-<parts>": they depend on the part size, not only the bytes.
    # Only 32 hex digits can be an MD5 (a GCS generation or a local fingerprint never is).
    return etag is not None and len(etag) == 32 and set(etag.lower()) <= _HEX


def _md5_etag(info: FileInfo) -> bool:
    """An S3/OSS object whose ETag may be the MD5 of its bytes (single-part; SSE-KMS ETags look alike
    but are no MD5: they only ever fail to match)."""
    return scheme_of(info.uri) in ("s3", "oss") and _plain_md5(info.etag)


def _s3_parts(uri: str) -> tuple[str, str]:
    """(bucket, key) of an `s3://` or `oss://` URI (both reached through the S3 API)."""
    bucket, _, key = normalize_uri(uri).partition("://")[2].partition("/")
    return bucket, key


def _client_error(exc: ClientError) -> tuple[str, int | None]:
    return (exc.response.get("Error", {}).get("Code", "") or "",
            exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode"))


def _checksums_differ(a: FileInfo, b: FileInfo) -> bool:
    """Both carry a store checksum of one algorithm (GCS CRC32C), and the checksums differ."""
    if not a.checksum or not b.checksum:
        return False
    return a.checksum.partition(":")[0] == b.checksum.partition(":")[0] and a.checksum != b.checksum


def _client_error_hint(code: str, status: int | None) -> str:
    if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch") or status == 403:
        return ("; check that the credentials in use may read the source and write the target (a server-side "
                "copy needs both with one identity)")
    if code == "NoSuchBucket":
        return "; the source or target bucket does not exist: check the target mapping and the endpoint"
    return ""


# What an attempt may raise for a storage reason (besides the GCS and Azure clients' own errors).
_EXPECTED = (_SourceGone, _SourceChanged, _SizeMismatch, StatekeeperError, ClientError, BotoCoreError, OSError)


def _lane_of(roots: Roots, uri: str) -> str:
    """The job prefix of a target: its root and the first path segment below it."""
    root = roots.root_of(uri)
    if root is None:
        return scheme_of(uri)
    rest = uri[len(root.uri.rstrip("/")) + 1:]
    head, sep, _ = rest.partition("/")
    return f"{root.uri.rstrip('/')}/{head}" if sep else root.uri


# -- the engine operation -------------------------------------------------------------------------------------


class _Copies:
    """The bulk engine's operation for a Transfer: one object per request."""

    batch_limit = 1

    def __init__(self, transfer: Transfer) -> None:
        self.transfer = transfer

    def describe(self, group: Hashable) -> str:
        return "copying"

    def judge(self, exc: BaseException) -> Failure:
        raise exc   # send() settles every storage failure itself: anything else is a programming error

    def send(self, group: Hashable, batch: Sequence[Work[_Job]]) -> list[Answer[TransferResult]]:
        return [self._one(work) for work in batch]

    def _one(self, work: Work[_Job]) -> Answer[TransferResult]:
        job, transfer = work.item, self.transfer
        if job.refusal is not None:
            return Answer.settled(transfer._result(job.item, TransferOutcome.FAILED, message=job.refusal))
        try:
            return Answer.settled(transfer._attempt(job, work.retries))
        except Exception as exc:
            if not isinstance(exc, _EXPECTED) and not is_vendor_error(exc):
                raise   # a programming error
            outcome, message, transient = transfer._judge(exc, job.source, job.target)
            if transient:
                job.known = _UNKNOWN   # the next attempt stats the target afresh: it may have changed
                failure = judge(exc)
                return Answer.again(Failure(True, failure.throttled, failure.code), message)
            return Answer.settled(transfer._result(job.item, outcome, size=job.size, message=message,
                                                   retries=work.retries))

    def give_up(self, work: Work[_Job], message: str, failure: Failure) -> TransferResult:
        attempts = work.attempts
        text = (f"{message} (gave up after {attempts} attempt{'s' if attempts > 1 else ''}; re-run the copy: objects "
                "already at the target are skipped)")
        return self.transfer._result(work.item.item, TransferOutcome.FAILED, size=work.item.size, message=text,
                                     retries=work.retries)


# -- the copier ---------------------------------------------------------------------------------------


class Transfer:
    """Copies items from the `source` store to the `target` store (None: the source's settings),
    writing only below `target_roots` and never below `source_roots`."""

    def __init__(self, source: StorageConfig, target: StorageConfig | None, target_roots: list[str],
                 settings: TransferSettings = TransferSettings(), source_roots: list[str] | None = None,
                 enforcement: Enforcement | None = None) -> None:
        """`enforcement`: what the target stores were proven to enforce (the run's, proven on the driver with the
        target's settings); None: each target store's self-test runs on first use, once for this Transfer."""
        self.source = source
        self.target = target if target is not None else source
        self.settings = settings
        self.enforcement = enforcement if enforcement is not None else Enforcement(self.target)
        self.target_roots = Roots(target_roots)
        self.source_roots = Roots(source_roots) if source_roots else None
        self._same_store = _same_store(self.source, self.target)
        self._same_identity = _same_identities(self.source, self.target)
        self._resolved_source_roots = [resolved_uri(r.uri) for r in self.source_roots or ()]
        self._check_roots_apart()
        self._lock = threading.Lock()
        self._ios: tuple[RoutingFileIO, RoutingFileIO, GuardedFileIO] | None = None
        self._pacer = Pacer(PaceSettings(overall=settings.max_per_second),
                            lane_rate=lambda lane: S3_WRITES_PER_PREFIX if lane.startswith(("s3://", "oss://"))
                            else None)
        self._throttle = ThrottleLog(log)
        self._dirs_checked: dict[str, str | None] = {}   # local target directories: made, and free of symlinks
        self._dirs_resolved: dict[str, str] = {}          # local target directories: their symlinks resolved
        self._lookups: dict[str, ListingLookup] = {}

    # Clients and pools do not pickle; a Spark task rebuilds them from the settings on first use.
    def __getstate__(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "target_roots": self.target_roots.uris,
                "settings": self.settings, "source_roots": self.source_roots.uris if self.source_roots else None,
                "enforcement": self.enforcement}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def __repr__(self) -> str:
        return (f"Transfer(source={self.source!r}, target={self.target!r}, target_roots={self.target_roots.uris!r}, "
                f"source_roots={self.source_roots.uris if self.source_roots else None!r}, settings={self.settings!r})")

    def _check_roots_apart(self) -> None:
        for target_root in self.target_roots:
            target_resolved = resolved_uri(target_root.uri)
            for source_root, source_resolved in zip(self.source_roots or (), self._resolved_source_roots, strict=True):
                if (is_under(target_root.uri, source_root.uri) or is_under(source_root.uri, target_root.uri)
                        or is_under(target_resolved, source_resolved) or is_under(source_resolved, target_resolved)):
                    raise RootConfigError(
                        f"target root {target_root.uri} overlaps source root {source_root.uri} (resolved: "
                        f"{target_resolved} and {source_resolved}): a copy must never write into, around or onto "
                        "its source; choose a target root outside every source root")

    def _fileios(self) -> tuple[RoutingFileIO, RoutingFileIO, GuardedFileIO]:
        """(source FileIO, target FileIO unguarded for raw S3 clients, target FileIO guarded), made
        once per process; the connection pools fit `in_flight` threads."""
        if self._ios is None:
            with self._lock:
                if self._ios is None:
                    def sized(config: StorageConfig) -> StorageConfig:
                        pool = max(config.max_pool_connections, self.settings.in_flight + _POOL_SLACK)
                        return config.with_overrides(max_pool_connections=pool)

                    source_io = RoutingFileIO(sized(self.source))
                    # One store and identity: one client pool serves both sides.
                    target_io = source_io if self.target == self.source else RoutingFileIO(sized(self.target))
                    for router in (source_io, target_io):
                        # RoutingFileIO makes backends on first use without a lock; threads racing there
                        # would each build a client. Made here, under ours, they are made once (no
                        # connection is opened yet; OSS only where it is configured).
                        router.backend("file:///")
                        router.backend("s3://bucket/key")
                        router.backend("gs://bucket/key")
                        router.backend("abfss://container@account.dfs.core.windows.net/key")
                        if router.config.oss_endpoint:
                            router.backend("oss://bucket/key")
                    self._ios = (source_io, target_io, GuardedFileIO(target_io, self.target_roots))
        return self._ios

    # -- public API -----------------------------------------------------------------------------

    def run(self, items: Iterable[TransferItem]) -> Iterator[TransferResult]:
        """Copy every item, `settings.in_flight` at a time; results in completion order (local copies once their
        durability barrier has passed). Per-item problems are results (FAILED and friends); only programming
        errors raise."""
        settings = BulkSettings(in_flight=self.settings.in_flight,
                                retry=RetryPolicy(self.settings.max_attempts, self.settings.backoff_base,
                                                  self.settings.backoff_max),
                                pace=self._pacer.settings, window=2 * self.settings.in_flight)
        engine = BulkEngine(settings, throttle_log=self._throttle, name="statekeeper-transfer", pacer=self._pacer)
        held: list[TransferResult] = []   # local copies waiting for their durability barrier
        for results in engine.run(_Copies(self), self._plan(items)):
            for result in results:
                if self.settings.durable and result.outcome is TransferOutcome.COPIED and \
                        result.target.startswith("file://"):
                    held.append(result)
                else:
                    yield result
            if len(held) >= self.settings.durable_batch:
                yield from self._made_durable(held)
                held = []
        if held:
            yield from self._made_durable(held)

    def copy_one(self, item: TransferItem) -> TransferResult:
        [result] = list(self.run([item]))
        return result

    def prefix_report(self) -> list[LaneReport]:
        """What each target job prefix achieved in this Transfer's runs."""
        return self._pacer.report()

    def log_prefix_report(self) -> None:
        log_report(self._pacer, "dr copies", log)

    def _made_durable(self, results: list[TransferResult]) -> Iterator[TransferResult]:
        """One durability barrier for a batch of new local files (their data, then their directories), before
        their results go out: the job writes a `_metadata` only after every object it names is COPIED."""
        uris = [r.target for r in results]
        try:
            self._fileios()[1].make_durable(uris)
        except OSError as exc:
            message = (f"cannot make the copy durable ({exc.strerror or exc}): it may not survive a power loss; "
                       "re-run the copy")
            for r in results:
                yield TransferResult(r.source, r.target, TransferOutcome.FAILED, r.size, r.checksum, r.method,
                                     message, r.retries)
            return
        yield from results

    # -- planning ---------------------------------------------------------------------------------

    def _plan(self, items: Iterable[TransferItem]) -> Iterator[Work[_Job]]:
        """Items as the engine's work: refused ones marked, planned object-store targets looked up a window at a
        time (one listing page per directory and 1,000 objects), the rest left to stat."""
        window: list[_Job] = []
        for item in items:
            job = _Job(item)
            try:
                job.source, job.target = self._check_item(item)
            except _Refused as exc:
                job.refusal = str(exc)
                yield Work(job, "refused")
                continue
            planned = item.source_version is not None and item.expected_size is not None
            if not planned or job.target.startswith("file://"):
                yield Work(job, _lane_of(self.target_roots, job.target))   # local: an lstat in the attempt
                continue
            window.append(job)
            if len(window) >= _LOOKUP_WINDOW:
                yield from self._looked_up(window)
                window = []
        if window:
            yield from self._looked_up(window)

    def _looked_up(self, jobs: list[_Job]) -> Iterator[Work[_Job]]:
        target_io = self._fileios()[1]
        by_scheme: dict[str, list[_Job]] = {}
        for job in jobs:
            by_scheme.setdefault(scheme_of(job.target), []).append(job)
        for scheme, group in by_scheme.items():
            lookup = self._lookups.get(scheme)
            if lookup is None:
                lookup = self._lookups[scheme] = ListingLookup(
                    target_io.backend(group[0].target), page_size=target_io.config.list_page_size,
                    policy=RetryPolicy(self.settings.max_attempts, self.settings.backoff_base,
                                       self.settings.backoff_max), throttle_log=self._throttle)
            found: dict[str, Resolved] = lookup.resolve(j.target for j in group)
            for job in group:
                seen = found[job.target]
                job.known = _UNKNOWN if seen.error is not None else seen.info   # unknown: the attempt stats it
                yield Work(job, _lane_of(self.target_roots, job.target))

    # -- one item -------------------------------------------------------------------------------

    def _check_item(self, item: TransferItem) -> tuple[str, str]:
        try:
            source, target = normalize_uri(item.source), normalize_uri(item.target)
        except ValueError as exc:
            raise _Refused(f"cannot copy {item.source!r} to {item.target!r}: {exc}") from None
        if source == target and self._same_identity.get(scheme_of(source), False):
            raise _Refused(f"source and target are the same object ({source}); nothing to copy")
        root = self._source_root_containing(target)
        if root is not None:
            raise _Refused(f"target {target} lies at or below the source root {root} (copying {source}): a copy never "
                           "writes into its source; map this root to a target outside every source root")
        if not any(_below(target, root) for root in self.target_roots.uris):
            raise _Refused(f"target {target} (copying {source}) lies outside the target roots "
                           f"{self.target_roots.uris}: writes go only below a target root; fix the target mapping "
                           "or add the root")
        return source, target

    def _source_root_containing(self, target: str) -> str | None:
        if self.source_roots is None:
            return None
        for root in self.source_roots.uris:
            if _below(target, root):
                return root
        if target.startswith("file://"):
            # A directory on the way that is a symlink into a source root puts the target inside it,
            # whatever it is called (also one swapped in after the Transfer was made, until the first target
            # below it is checked: directories are resolved once per Transfer, as _local_dir checks them once).
            resolved = self._resolved_local(target)
            for root, root_resolved in zip(self.source_roots.uris, self._resolved_source_roots, strict=True):
                if _below(resolved, root_resolved):
                    return f"{root} (resolved: {root_resolved})"
        return None

    def _resolved_local(self, target: str) -> str:
        """resolved_uri(target), its directory resolved once per Transfer: realpath walks every component (about six
        lstat calls a file), and a closure puts thousands of files in one directory. The file itself is lstat'ed
        each time, so a target that is a symlink is still resolved where it points."""
        directory, _, name = target.rpartition("/")
        if os.path.islink(local_path(target)):
            return resolved_uri(target)
        resolved = self._dirs_resolved.get(directory)
        if resolved is None:
            resolved = self._dirs_resolved[directory] = resolved_uri(directory)
        return f"{resolved.rstrip('/')}/{name}"

    def _attempt(self, job: _Job, retries: int) -> TransferResult:
        item, source, target = job.item, job.source, job.target
        planned = item.source_version is not None and item.expected_size is not None and retries == 0
        if planned:
            # The version the index recorded: every read or copy below is pinned to it, nothing is stat'ed.
            src = FileInfo(source, int(item.expected_size), _EPOCH, item.source_version)  # type: ignore[arg-type]
        else:
            src = self._stat_source(source)
            if item.expected_size is not None and src.size != item.expected_size:
                job.size = src.size
                return self._result(
                    item, TransferOutcome.SOURCE_CHANGED, size=src.size, retries=retries,
                    message=f"{source} is {src.size} bytes now, but the index recorded {item.expected_size}: it was "
                            "rewritten after it was indexed; re-index before copying it")
        job.size = src.size
        if planned and job.known is not _UNKNOWN:
            dst = job.known
            if dst is not None and dst.object_type is not ObjectType.FILE:
                raise NotRegularFileError(f"{target} is a {dst.object_type.value} at the target, not a file")
        elif target.startswith("file://") and planned:
            dst = self._lstat_target(target)
        else:
            dst = self._stat_target(target)
        known_checksum = None
        if dst is not None and dst.size == src.size:
            same, known_checksum = self._same_content(item, src, dst)
            if same:
                return self._result(item, TransferOutcome.SKIPPED, size=src.size, checksum=known_checksum,
                                    retries=retries)
        method = self._method(source, target)
        create_only = dst is None
        remote = not target.startswith("file://")
        if create_only and remote:
            guard = Guard.CREATE_ONLY_COPY if method is CopyMethod.SERVER_SIDE else Guard.CREATE_ONLY_WRITE
            if not self._enforced(target, guard):
                self._still_absent(target, guard)
        recheck = method is CopyMethod.SERVER_SIDE and remote and not self._enforced(target, Guard.PINNED_COPY)
        if recheck:
            self._source_unchanged(src, "before")
        if method is CopyMethod.SERVER_SIDE and target.startswith(("s3://", "oss://")):
            checksum = self._copy_server_side(src, target, known_checksum, create_only=create_only,
                                              size_check=not planned)
        elif method is CopyMethod.SERVER_SIDE:
            checksum = self._copy_with_fileio(src, target, known_checksum, create_only=create_only)
        elif method is CopyMethod.LOCAL:
            checksum = self._copy_to_local(src, target, kernel=not self.settings.checksum, create_only=create_only)
        elif target.startswith("file://"):
            checksum = self._copy_to_local(src, target, kernel=False, create_only=create_only)
        elif target.startswith(("s3://", "oss://")):
            checksum = self._stream_to_s3(src, target, create_only=create_only)
        else:
            checksum = self._stream_to_fileio(src, target, create_only=create_only)
        if recheck:
            self._source_unchanged(src, "after")
        return self._result(item, TransferOutcome.COPIED, size=src.size, checksum=checksum, method=method,
                            retries=retries)

    # -- where the target store does not enforce a precondition ----------------------------------

    def _enforced(self, target: str, guard: Guard) -> bool:
        root = self.target_roots.root_of(target)
        return root is not None and self.enforcement.enforced(root.uri, guard)

    def _still_absent(self, target: str, guard: Guard) -> None:
        """The target store does not enforce the create-only write or copy: look the target up just before it; one
        that appeared since it was listed is not replaced blindly (the retry stats it and decides)."""
        if self._stat_target(target) is not None:
            raise ObjectExistsError(f"{target} exists (looked up just before a create-only write, because the store "
                                    f"does not enforce {guard_name(scheme_of(target), guard)})")

    def _source_unchanged(self, src: FileInfo, when: str) -> None:
        """The store does not enforce the source pin of a server-side copy: the source must be the pinned version
        `when` ("before", "after") the copy."""
        now = self._stat_source(src.uri)
        if now.size != src.size or (src.etag is not None and now.etag != src.etag):
            name = guard_name(scheme_of(src.uri), Guard.PINNED_COPY)
            raise _SourceChanged(f"{src.uri} is not the version pinned for the copy {when} it (version {src.etag}, "
                                 f"{src.size} bytes -> {now.etag}, {now.size} bytes; re-checked because the store does "
                                 f"not enforce {name}): nothing of it is published")

    def _method(self, source: str, target: str) -> CopyMethod:
        schemes = (scheme_of(source), scheme_of(target))
        if schemes == ("file", "file"):
            return CopyMethod.LOCAL
        if schemes[0] != schemes[1] or not self._same_identity.get(schemes[0], False):
            return CopyMethod.STREAM
        if schemes[0] == "abfss" and _azure_account(source) != _azure_account(target):
            return CopyMethod.STREAM   # Copy Blob across accounts would need a SAS for the source
        return CopyMethod.SERVER_SIDE

    def _stat_source(self, source: str) -> FileInfo:
        try:
            return self._fileios()[0].stat(source)
        except NotRegularFileError:
            raise   # a symlink or special file where a file is expected: FAILED, not "gone"
        except ObjectNotFoundError as exc:
            raise _SourceGone(f"{source} does not exist (a running job may have subsumed its checkpoint); "
                              "nothing was copied") from exc

    def _stat_target(self, target: str) -> FileInfo | None:
        # Through the guard: a target outside the roots or behind a symlink below a root fails here,
        # before anything is written.
        try:
            return self._fileios()[2].stat(target)
        except NotRegularFileError:
            raise
        except ObjectNotFoundError:
            return None

    def _lstat_target(self, target: str) -> FileInfo | None:
        """A local target as the planned way sees it: its directory checked once for symlinks below the root
        (and made), the target itself lstat'ed."""
        path = local_path(target)
        self._local_dir(target, os.path.dirname(path))
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return None
        if not stat_mod.S_ISREG(st.st_mode):
            raise NotRegularFileError(f"{target} is a {object_type_of(st.st_mode).value}, not a regular file; "
                                      "Statekeeper does not follow symlinks or open special files inside roots "
                                      "(replace it with the real file, or remove it)")
        return FileInfo(file_uri(path), st.st_size, datetime.fromtimestamp(st.st_mtime_ns / 1e9, tz=timezone.utc),
                        f"{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}")

    def _local_dir(self, target: str, directory: str) -> None:
        """Once per directory: no symlink on the way below the target root (SymlinkRefusedError), and it exists."""
        with self._lock:
            if directory in self._dirs_checked:
                refusal = self._dirs_checked[directory]
                if refusal is not None:
                    raise SymlinkRefusedError(refusal)
                return
        root = self.target_roots.require(target)
        link = symlink_below(local_path(root.uri), directory)
        refusal = None
        if link is not None:
            refusal = (f"{target}: {file_uri(link)} is a symlink inside root {root.uri}; Statekeeper never reads, "
                       "writes or deletes through symlinks (it could lead outside the root): replace the link with "
                       "the real directory or file, or remove it")
        else:
            os.makedirs(directory, exist_ok=True)
        with self._lock:
            self._dirs_checked[directory] = refusal
        if refusal is not None:
            raise SymlinkRefusedError(refusal)

    def _same_content(self, item: TransferItem, src: FileInfo, dst: FileInfo) -> tuple[bool, str | None]:
        """Whether a same-size target is proven to hold the source's bytes (the module docstring's rule):
        (same, the source's SHA-256 where it was computed or recorded)."""
        checksum = self.settings.checksum
        if item.known_version and dst.etag == item.known_version and (item.known_checksum or not checksum):
            return True, item.known_checksum if checksum else None
        if _checksums_differ(src, dst):
            return False, None
        target_md5 = _md5_etag(dst)
        if target_md5 and _md5_etag(src):
            if src.etag == dst.etag:
                return True, None if not checksum else self._hash_source(src)
            if not checksum:
                # Unequal: other bytes, or an ETag that is no MD5 (SSE-KMS, another store): copy, never guess.
                return False, None
        elif src.checksum and dst.checksum and src.checksum == dst.checksum:
            return True, None if not checksum else self._hash_source(src)
        target_crc = dst.checksum if dst.checksum and dst.checksum.startswith("crc32c:") else None
        # Azure's Content-MD5 (md5:<hex>) against the source's MD5: its S3 plain-MD5 ETag, or computed.
        target_md5_sum = dst.checksum[4:] if dst.checksum and dst.checksum.startswith("md5:") else None
        if target_md5_sum and _md5_etag(src) and not checksum:
            return src.etag == target_md5_sum, None
        if (checksum or (target_md5 and not _md5_etag(src)) or (target_crc and not src.checksum)
                or (target_md5_sum and not (src.checksum or "").startswith("md5:"))):
            # One read of the source answers every comparison the target offers.
            digests = self._source_digests(src, md5=bool(target_md5 or target_md5_sum), crc32c=bool(target_crc))
            if target_md5 and digests.md5 == dst.etag:
                return True, digests.sha256
            if target_md5_sum and digests.md5 == target_md5_sum:
                return True, digests.sha256
            if target_crc and digests.crc32c == target_crc:
                return True, digests.sha256
            if checksum:
                return sha256_of(self._fileios()[2], dst) == digests.sha256, digests.sha256
            return False, None
        return False, None

    def _source_digests(self, src: FileInfo, *, md5: bool, crc32c: bool) -> _Digests:
        """MD5 / CRC32C (GCS's base64 form) / SHA-256 (checksum mode) of the pinned source version, in one read."""
        import base64

        md5_hasher = hashlib.md5(usedforsecurity=False) if md5 else None
        crc_hasher = None
        if crc32c:
            import google_crc32c

            crc_hasher = google_crc32c.Checksum()
        stream, reader = self._open_source(src, hashed=self.settings.checksum)
        with stream:
            while data := reader.read(_CHUNK):
                if md5_hasher is not None:
                    md5_hasher.update(data)
                if crc_hasher is not None:
                    crc_hasher.update(data)
        return _Digests(md5=md5_hasher.hexdigest() if md5_hasher is not None else None,
                        crc32c=f"crc32c:{base64.b64encode(crc_hasher.digest()).decode()}" if crc_hasher else None,
                        sha256=reader.checksum)

    def _open_source(self, src: FileInfo, hashed: bool) -> tuple[BinaryIO, _SourceReader]:
        try:
            stream = self._fileios()[0].open_input(src.uri, info=src)
        except ObjectChangedError as exc:
            raise _SourceChanged(f"{src.uri} changed since its version {src.etag} was recorded: {exc}") from exc
        except NotRegularFileError:
            raise
        except ObjectNotFoundError as exc:
            raise _SourceGone(f"{src.uri} vanished before it was read (a running job may have subsumed its "
                              f"checkpoint): {exc}; nothing was copied") from exc
        return stream, _SourceReader(stream, src.uri, src.size, hashlib.sha256() if hashed else None)

    def _hash_source(self, src: FileInfo) -> str:
        stream, reader = self._open_source(src, hashed=True)
        with stream:
            while reader.read(_CHUNK):
                pass
        return reader.checksum  # type: ignore[return-value]

    # -- the three ways ---------------------------------------------------------------------------

    def _copy_to_local(self, src: FileInfo, target: str, *, kernel: bool, create_only: bool) -> str | None:
        stream, reader = self._open_source(src, hashed=self.settings.checksum)
        path = local_path(target)

        def fill(fd: int) -> None:
            if kernel:
                kernel_copy(stream.fileno(), fd, src.size)   # the stream is unread: its fd is at offset 0
                return
            with open(fd, "wb", buffering=_CHUNK, closefd=False) as out:   # a buffered write never comes short
                while data := reader.read(_CHUNK):
                    out.write(data)

        with stream:
            try:
                if create_only:
                    # New files are written in place, create-only, and made durable in batches (run()).
                    self._local_dir(target, os.path.dirname(path))
                    try:
                        create_local(path, src.size, fill)
                    except FileExistsError as exc:
                        raise ObjectExistsError(f"{target} appeared while it was being copied") from exc
                else:
                    # Replacing a file: a temporary name and a rename, so a reader sees the old or the new one.
                    write_local_atomic(path, src.size, fill, durable=self.settings.durable)
            except OSError as exc:
                raise StorageError(f"cannot copy {src.uri} to {target}: {exc.strerror or exc}") from exc
        return reader.checksum

    def _stream_to_s3(self, src: FileInfo, target: str, *, create_only: bool) -> str | None:
        client = self._s3_client(target)
        bucket, key = _s3_parts(target)
        part = part_size_for(src.size, self.settings.part_size)
        stream, reader = self._open_source(src, hashed=self.settings.checksum)
        with stream:
            try:
                upload_to_s3(client, bucket, key, reader, src.size, part, create_only=create_only)
            except ClientError as exc:
                code, status = _client_error(exc)
                if create_only and (code == "PreconditionFailed" or status == 412):
                    raise ObjectExistsError(f"{target} appeared while it was being copied") from exc
                raise
        return reader.checksum

    def _stream_to_fileio(self, src: FileInfo, target: str, *, create_only: bool) -> str | None:
        """Stream the source into the target FileIO's atomic write (GCS, Azure). Create-only when the target
        was absent: an object that appeared since (another copier) is not replaced blindly; the
        ObjectExistsError is retried, and the next attempt's stat decides (skip, or replace)."""
        stream, reader = self._open_source(src, hashed=self.settings.checksum)
        with stream:
            written = self._fileios()[2].write(target, _ExactStream(reader, src.size), if_absent=create_only)
        self._check_written(src, written, "upload")
        return reader.checksum

    def _copy_with_fileio(self, src: FileInfo, target: str, known_checksum: str | None, *,
                          create_only: bool) -> str | None:
        """Server-side copy through the target store's FileIO (GCS rewrite, Azure Copy Blob), pinned to the
        source version (and create-only where the target was absent)."""
        checksum = known_checksum
        if self.settings.checksum and checksum is None:
            checksum = self._hash_source(src)   # first: the copy below is pinned to the same version
        backend = self._fileios()[1].backend(target)
        try:
            written = backend.copy(src.uri, target, info=src, if_absent=create_only)  # type: ignore[call-arg]
        except ObjectExistsError:
            raise
        except (ObjectChangedError, ObjectNotFoundError) as exc:
            # A precondition on a source that is gone may answer 412 or 404 (stores differ): one more stat says
            # which it is, and whether a 404 was about the source at all (or the target's bucket).
            if self._source_gone(src.uri):
                raise _SourceGone(f"{src.uri} does not exist any more (a running job may have subsumed its "
                                  "checkpoint); nothing was copied") from exc
            if isinstance(exc, ObjectChangedError):
                raise _SourceChanged(f"{src.uri} changed since it was stat'ed (version {src.etag} no longer "
                                     "current); the copy was refused by the store") from exc
            raise
        self._check_written(src, written, "server-side copy")
        return checksum

    def _source_gone(self, uri: str) -> bool:
        try:
            self._fileios()[0].stat(uri)
        except NotRegularFileError:
            return False
        except ObjectNotFoundError:
            return True
        return False

    @staticmethod
    def _check_written(src: FileInfo, written: FileInfo, how: str) -> None:
        if written.size != src.size:
            raise _SizeMismatch(f"the {how} of {src.uri} ({src.size} bytes) left {written.size} bytes at "
                                f"{written.uri}; re-run the copy (a target of another size is overwritten)")
        if _checksums_differ(src, written):
            raise _SizeMismatch(f"the {how} of {src.uri} left other bytes at {written.uri} ({written.checksum}, "
                                f"the source has {src.checksum}); re-run the copy (the target is overwritten)")

    def _copy_server_side(self, src: FileInfo, target: str, known_checksum: str | None, *, create_only: bool,
                          size_check: bool) -> str | None:
        """CopyObject (UploadPartCopy parts above server_side_max) through the target's S3 FileIO, pinned to the
        source's ETag, create-only where the target was absent: one request."""
        # Hash first: a source that vanishes meanwhile costs nothing at the target, and the copy below
        # is pinned to the same ETag, so the checksum is of the bytes copied.
        checksum = known_checksum
        if self.settings.checksum and checksum is None:
            checksum = self._hash_source(src)
        backend = self._fileios()[1].backend(target)
        try:
            written = backend.copy(src.uri, target, info=src, if_absent=create_only,  # type: ignore[call-arg]
                                   single_max=self.settings.server_side_max, part_size=self.settings.part_size)
        except ObjectChangedError as exc:
            raise _SourceChanged(f"{src.uri} changed since its version was recorded (ETag {src.etag} no longer "
                                 "current); the copy was refused by the store") from exc
        except ObjectNotFoundError as exc:
            raise _SourceGone(f"{src.uri} does not exist any more (a running job may have subsumed its "
                              "checkpoint); nothing was copied") from exc
        if _plain_md5(src.etag) and written.etag == src.etag:
            # The new object's ETag is the MD5 of the pinned source version's bytes (one store, one identity, a
            # single-part source): the copy is that version byte for byte, so it has its size.
            return checksum
        if size_check:
            # Any other ETag (multipart source, SSE-KMS, a store that ignored CopySourceIfMatch and copied a newer
            # version) gets a size check here. The planned way leaves it to the verification at the target that
            # follows every copy (from a listing, not a request per object).
            found = self._fileios()[2].stat(target).size
            if found != src.size:
                raise _SizeMismatch(f"the server-side copy of {src.uri} ({src.size} bytes) left {found} bytes at "
                                    f"{target}; re-run the copy (a target of another size is overwritten)")
        return checksum

    def _s3_client(self, target: str) -> Any:
        return self._fileios()[1].backend(target).client  # type: ignore[attr-defined]

    # -- results --------------------------------------------------------------------------------

    def _judge(self, exc: BaseException, source: str, target: str) -> tuple[TransferOutcome, str, bool]:
        """(outcome, message, worth retrying) of an attempt that raised."""
        if isinstance(exc, _SourceGone):
            return TransferOutcome.SOURCE_MISSING, str(exc), False
        if isinstance(exc, _SourceChanged):
            return TransferOutcome.SOURCE_CHANGED, str(exc), False
        if isinstance(exc, _SizeMismatch):
            return TransferOutcome.FAILED, str(exc), False
        if isinstance(exc, (ConfigurationError, OutsideRootError, NotRegularFileError)):
            return TransferOutcome.FAILED, f"cannot copy {source} to {target}: {exc}", False
        if isinstance(exc, ObjectExistsError):
            # A create-only write met an object another writer made after the target was looked at: the next
            # attempt stats it again and skips it (same content) or replaces it.
            return (TransferOutcome.FAILED, f"cannot copy {source} to {target}: {target} appeared while it was being "
                                            f"copied ({exc})", True)
        transient = judge(exc).retriable
        if isinstance(exc, ClientError):
            code, status = _client_error(exc)
            hint = _client_error_hint(code, status)
            return TransferOutcome.FAILED, f"cannot copy {source} to {target}: {code or status}: {exc}{hint}", transient
        return TransferOutcome.FAILED, f"cannot copy {source} to {target}: {exc}", transient

    @staticmethod
    def _result(item: TransferItem, outcome: TransferOutcome, *, size: int = 0, checksum: str | None = None,
                method: CopyMethod = CopyMethod.NONE, message: str | None = None, retries: int = 0) -> TransferResult:
        return TransferResult(item.source, item.target, outcome, size, checksum, method.value, message, retries)

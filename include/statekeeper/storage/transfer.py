"""Copy objects from one store to another: the disaster-recovery copy's data mover.

    Transfer(source_config, target_config, target_roots, settings, source_roots).run(items) -> TransferResult each
    verify_objects(items, target_config, checksum=...) -> VerifyResult each

Runs inside Spark tasks (one Transfer per task, many items each), so: no Spark or Airflow imports, a
Transfer pickles (clients are created on first use), and `run` holds a bounded window of items.

Per item: stat the source (gone: SOURCE_MISSING; not the size the index recorded: SOURCE_CHANGED), stat
the target (same size and proven to hold the source's bytes: SKIPPED, see "Skips" below), then copy one
of three ways:

* server_side: source and target in one store reached with one identity, every copy pinned to the
  stat'ed source version, so a source rewritten meanwhile fails the copy (SOURCE_CHANGED) instead of
  copying a different version:
  - S3 (same endpoint, region and access key), and OSS through its S3 API (same OSS endpoint, region and
    key): CopyObject, or above `server_side_max` UploadPartCopy parts, with CopySourceIfMatch;
  - GCS (same endpoint, project and credentials; any buckets they reach): a rewrite with
    ifSourceGenerationMatch (GcsFileIO.copy);
  - Azure (one account, same endpoint and credentials): Copy Blob with the source's If-Match
    (AzureFileIO.copy).
  No byte passes through this process, except with `checksum`: SHA-256 needs the bytes, so the source is
  then read once in full (a download per object: server-side copies lose most of their advantage;
  checksum mode costs one full read of everything copied, whichever way).
* local: file to file. A kernel copy (copy_file_range, else sendfile) into a temp file beside the target,
  fsync (settings.durable), rename; with `checksum` a read/hash/write loop instead.
* stream: everything else, across schemes and identities. The source is read once through its FileIO,
  ranged and pinned to its stat'ed version (a change mid-read is ObjectChangedError -> SOURCE_CHANGED),
  hashed and counted on the way, into a single PUT up to `part_size` or a multipart upload of
  `part_size` parts (S3, OSS; aborted on any failure), a local temp file, or the target FileIO's atomic
  write (GCS, Azure): create-only (`ifGenerationMatch=0`, `If-None-Match: *`) when the target was absent
  when stat'ed, so an object another writer created meanwhile is never replaced blindly (the attempt
  is retried and the new stat decides); a replace where a target of other content was found, as for S3.

The written size must equal the stat'ed source size: a local temp file of the wrong size is never
renamed into place, a multipart upload is aborted, and a single PUT or a GCS/Azure upload is never
committed (the last bytes are handed over only after the end of the source was confirmed). Copies whose
result carries a store checksum (GCS CRC32C) must also match the source's, where it has one.

Memory: a stream to S3 buffers one part (or the whole object up to part_size) per transfer in flight:
up to in_flight x part_size (16 x 64 MiB = 1 GiB at the defaults). Lower in_flight or part_size on
small executors; 5 MiB is S3's minimum part size. A stream to Azure buffers one block (the client's
4 MiB); to GCS up to 16 MiB, and larger objects are spooled to a local temporary file first (GcsFileIO:
a resumable upload must be able to re-send a chunk), so an executor needs in_flight x the largest
object of free temporary disk.

Skips need proof that the target holds the source's bytes; a size is never proof (a stale copy from an
interrupted or foreign run, bit rot or a hand copy can have the right name and size and other bytes, and
such a copy does not restore). A same-size target is skipped only when
  (a) its current version (S3/OSS/Azure ETag, GCS generation, local inode+mtime_ns+size: FileInfo.etag)
      equals `TransferItem.known_version`, the version this tool recorded when it wrote or verified the
      object (in checksum mode only together with the SHA-256 recorded then, `known_checksum`); or
  (b) both sides carry a comparable content hash and they are equal: a plain MD5 ETag (32 hex, no '-':
      a single-part upload) at an S3/OSS target against the source's plain MD5 ETag, else against an MD5
      of the source computed by reading it; an Azure target's Content-MD5 likewise; a GCS target's CRC32C
      against the source's (a GCS source), else against a CRC32C computed by reading the source; or, in
      checksum mode, SHA-256 of both.
Anything else (a local target this tool has no record of, an Azure blob without Content-MD5, multipart or
SSE-KMS ETags that do not match) is copied again, replacing the target. Unequal hashes never skip; an ETag that is not an MD5 can
only fail to match, which costs a copy, never a wrong skip.

Safety: a target must lie below one of `target_roots` (GuardedFileIO: also no symlink on the way below
the root) and never at or below a `source_roots` entry, lexically or after resolving local symlinks.
Violations are FAILED results, never attempted; roots that overlap are refused when the Transfer is made.

Local targets are fsynced before the rename but their directory is not (as LocalFileIO.write): after a
power loss a renamed file may be missing, which verification after the copy does not detect.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, BinaryIO, TypeVar

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    ParamValidationError,
    PartialCredentialsError,
)

from statekeeper.errors import ConfigurationError, StatekeeperError
from statekeeper.storage.config import StorageConfig
from statekeeper.storage.errors import (
    NotRegularFileError,
    ObjectChangedError,
    ObjectExistsError,
    ObjectNotFoundError,
    OutsideRootError,
    RootConfigError,
    StorageError,
    is_vendor_error,
    vendor_transient,
)
from statekeeper.storage.local import file_uri, local_path
from statekeeper.storage.model import FileInfo
from statekeeper.storage.roots import GuardedFileIO, Roots, resolved_uri
from statekeeper.storage.router import RoutingFileIO, scheme_of
from statekeeper.uri import is_under, normalize_uri, split_azure

log = logging.getLogger("statekeeper.storage.transfer")

_MIN_PART = 5 * 1024 * 1024          # S3's minimum size of every part but the last
_MAX_PART = 5 * 1024 ** 3            # S3's maximum part size (UploadPart and UploadPartCopy)
_MAX_PARTS = 10_000                  # S3's maximum number of parts per upload
_CHUNK = 4 * 1024 * 1024             # read size when streaming and hashing (= StorageConfig's read-ahead)
_KERNEL_CHUNK = 256 * 1024 * 1024    # bytes per copy_file_range/sendfile call
_POOL_SLACK = 4                      # connections beyond in_flight: verification and stat calls overlap

# S3 error codes that mean "try again later"; any 5xx, 408 and 429 count too.
_RETRIABLE_CODES = frozenset({
    "SlowDown", "Throttling", "ThrottlingException", "ThrottledException", "RequestLimitExceeded",
    "RequestThrottled", "TooManyRequestsException", "InternalError", "ServiceUnavailable", "RequestTimeout",
    "RequestTimeTooSkewed", "NoSuchUpload",
})
# Local errors that a retry cannot fix.
_PERMANENT_ERRNOS = frozenset({
    errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS, errno.EISDIR, errno.ENOTDIR,
    errno.ENAMETOOLONG, errno.ELOOP, errno.EFBIG,
})
# copy_file_range cannot serve this pair of files (old kernel, cross-device, file system without it).
_NO_KERNEL_COPY = frozenset({errno.ENOSYS, errno.EXDEV, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EPERM})


class TransferOutcome(StrEnum):
    COPIED = "copied"                  # bytes written to the target in this call
    SKIPPED = "skipped"                # the target already had the object, proven by its recorded version or a content hash
    SOURCE_MISSING = "source_missing"  # the source object is gone (e.g. a running Flink job subsumed the checkpoint)
    SOURCE_CHANGED = "source_changed"  # the source differs from the expected (indexed) size, or changed while copied
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
    durable: bool = True                     # fsync local targets before the rename
    part_size: int = 64 * 1024 * 1024        # multipart part size for streamed uploads and multipart copies
    server_side_max: int = 5 * 1024 ** 3     # above this, a server-side copy uses UploadPartCopy parts
    max_attempts: int = 4                    # attempts per item on transient errors
    backoff_base: float = 0.5                # seconds; exponential with full jitter between attempts
    backoff_max: float = 20.0

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


@dataclass(frozen=True, slots=True)
class VerifyItem:
    target: str
    size: int                          # expected exact size
    checksum: str | None = None        # expected SHA-256 (checked when verify_objects(checksum=True))
    version: str | None = None         # expected version (re-verification: the one recorded when it was verified)


@dataclass(frozen=True, slots=True)
class VerifyResult:
    target: str
    ok: bool
    size: int | None                   # found size (None if missing)
    message: str | None
    version: str | None = None         # found version (FileInfo.etag), recorded so later runs can prove identity


# -- internal outcomes of one attempt ----------------------------------------------------------------

class _SourceGone(Exception):
    """The source vanished (stat, read or server-side copy): SOURCE_MISSING."""


class _SourceChanged(Exception):
    """The source is no longer the stat'ed version: SOURCE_CHANGED."""


class _Refused(Exception):
    """The item must not be attempted (a target outside the target roots or inside a source root)."""


class _SizeMismatch(Exception):
    """Bytes written differ from the stat'ed source size."""


@dataclass(frozen=True, slots=True)
class _Digests:
    """Content hashes of one source version, computed on read (None: not asked for)."""

    md5: str | None
    crc32c: str | None
    sha256: str | None


@dataclass(slots=True)
class _Seen:
    """What an attempt learnt before it failed, for the result of a failed item."""

    size: int = 0


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


def _part_size_for(size: int, part_size: int) -> int:
    """`part_size`, raised where needed so that `size` fits in S3's 10,000 parts (1 MiB steps)."""
    needed = -(-size // _MAX_PARTS)
    mib = 1024 * 1024
    return min(_MAX_PART, max(part_size, -(-needed // mib) * mib))


def _s3_parts(uri: str) -> tuple[str, str]:
    """(bucket, key) of an `s3://` or `oss://` URI (both reached through the S3 API)."""
    bucket, _, key = normalize_uri(uri).partition("://")[2].partition("/")
    return bucket, key


def _client_error(exc: ClientError) -> tuple[str, int | None]:
    return (exc.response.get("Error", {}).get("Code", "") or "",
            exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode"))


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        # `raise ... from None` hides the context on purpose (e.g. the FileNotFoundError behind a
        # not-found error): it must not decide whether to retry.
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)


def _is_transient(exc: BaseException) -> bool:
    """Whether trying again may help: throttling, 5xx, connection trouble, I/O hiccups (NFS). Access
    denied, a missing bucket, a full disk or bad parameters stay as they are, so they fail at once."""
    for link in _chain(exc):
        judged = vendor_transient(link)   # GCS and Azure clients: throttling, 5xx, no answer
        if judged is not None:
            return judged
        if isinstance(link, ClientError):
            code, status = _client_error(link)
            return (code in _RETRIABLE_CODES or status in (408, 429)
                    or (status is not None and status >= 500))
        if isinstance(link, (NoCredentialsError, PartialCredentialsError, ParamValidationError)):
            return False
        if isinstance(link, BotoCoreError):
            return True   # connection refused/reset, timeouts, truncated bodies
        if isinstance(link, OSError) and link.errno is not None:
            return link.errno not in _PERMANENT_ERRNOS
    return isinstance(exc, StorageError) and not isinstance(exc, ConfigurationError)


class _SourceReader:
    """The source stream, read once: bytes are counted and hashed on the way, reading past or
    stopping short of the stat'ed size raises _SizeMismatch, and the source's own trouble (gone,
    rewritten) becomes the item's outcome instead of a failure of the copy."""

    def __init__(self, stream: BinaryIO, uri: str, size: int, hasher: Any | None) -> None:
        self._stream = stream
        self._uri = uri
        self._size = size
        self._hasher = hasher
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        try:
            data = self._stream.read(size)
        except ObjectChangedError as exc:
            raise _SourceChanged(f"{self._uri} changed while being copied: {exc}") from exc
        except NotRegularFileError:
            raise
        except ObjectNotFoundError as exc:
            raise _SourceGone(f"{self._uri} vanished while being copied: {exc}") from exc
        self.count += len(data)
        if self.count > self._size or (not data and size != 0 and self.count != self._size):
            raise _SizeMismatch(
                f"read {'more than ' if self.count > self._size else ''}{self.count} bytes from {self._uri}, "
                f"which was {self._size} bytes when stat'ed: it changed while being copied; nothing was made "
                "visible at the target; re-run the copy")
        if self._hasher is not None and data:
            self._hasher.update(data)
        return data

    def read_exact(self, size: int) -> bytes:
        parts: list[bytes] = []
        got = 0
        while got < size:
            data = self.read(min(size - got, _MAX_PART))
            parts.append(data)
            got += len(data)   # a short read raised _SizeMismatch at EOF already
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def finish(self) -> None:
        """Confirm the end of the source (one more byte would be a mismatch)."""
        self.read(1)

    @property
    def checksum(self) -> str | None:
        return self._hasher.hexdigest() if self._hasher is not None else None


class _ExactStream:
    """What a FileIO's `write` reads when streaming a source to GCS or Azure: exactly the stat'ed size, and
    the last bytes only after the end of the source was confirmed, so an upload of a source that grew or
    shrank fails before it is committed (the stores make an object visible when its upload completes)."""

    def __init__(self, reader: _SourceReader, size: int) -> None:
        self._reader = reader
        self._size = size
        self._done = 0
        self._finished = False

    def read(self, size: int = -1) -> bytes:
        remaining = self._size - self._done
        if remaining <= 0:
            if not self._finished:      # an empty source: nothing was handed over yet
                self._reader.finish()
                self._finished = True
            return b""
        want = remaining if size is None or size < 0 else min(size, remaining)
        if want == 0:
            return b""
        data = self._reader.read_exact(want)
        self._done += len(data)
        if self._done == self._size:
            self._reader.finish()       # one more byte would be a mismatch: raised before the last bytes go
            self._finished = True
        return data

    def readable(self) -> bool:
        return True


def _write_local(path: str, size: int, fill: Callable[[int], None], *, durable: bool) -> None:
    """Create `path` atomically: `fill(fd)` writes a temp file beside it, which is checked for the
    expected size, fsynced, and renamed over the target; on any failure it is removed, so a reader
    sees the old file or the whole new one, never a partial or wrong-sized one."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666)
    try:
        try:
            fill(fd)
            written = os.fstat(fd).st_size
            if written != size:
                raise _SizeMismatch(f"wrote {written} bytes for {file_uri(path)}, but the source was {size} bytes "
                                    "when stat'ed: it changed while being copied; the target was not replaced; "
                                    "re-run the copy")
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


class _NoKernelCopy(Exception):
    """This kernel copy cannot serve this pair of files; nothing was copied."""


def _kernel_copy(src_fd: int, dst_fd: int, size: int) -> None:
    """Copy from the source's position to its end inside the kernel: copy_file_range (server-side on
    NFS 4.2, reflinks where the file system has them), else sendfile, else a read/write loop."""
    for copier in (os.copy_file_range, _sendfile):
        try:
            _kernel_loop(copier, src_fd, dst_fd, size)
            return
        except _NoKernelCopy:
            continue
    while data := os.read(src_fd, _CHUNK):
        _write_all(dst_fd, data)


def _sendfile(src_fd: int, dst_fd: int, count: int) -> int:
    return os.sendfile(dst_fd, src_fd, None, count)


def _kernel_loop(copier: Callable[[int, int, int], int], src_fd: int, dst_fd: int, size: int) -> None:
    copied = 0
    try:
        while n := copier(src_fd, dst_fd, _KERNEL_CHUNK):
            copied += n
    except OSError as exc:
        if copied or exc.errno not in _NO_KERNEL_COPY:
            raise
        raise _NoKernelCopy() from exc
    if copied == 0 and size > 0:
        # Some file systems (procfs-like, some FUSE) report 0 copied for files that have bytes.
        raise _NoKernelCopy()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _sha256_of(fio: Any, info: FileInfo) -> str:
    """SHA-256 of one version of an object (pinned to `info`), read in chunks."""
    hasher = hashlib.sha256()
    with fio.open_input(info.uri, info=info) as stream:
        while data := stream.read(_CHUNK):
            hasher.update(data)
    return hasher.hexdigest()


T = TypeVar("T")
R = TypeVar("R")


def _bounded(fn: Callable[[T], R], items: Iterable[T], in_flight: int, name: str) -> Iterator[R]:
    """fn(item) for every item on `in_flight` threads, results as they finish. At most 2 x in_flight
    items are taken from `items` ahead of the results, so a long generator is never materialized.
    Closing the iterator early cancels what has not started and waits for what has."""
    pool = ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix=name)
    pending: set[Future[R]] = set()
    try:
        for item in items:
            pending.add(pool.submit(fn, item))
            if len(pending) >= 2 * in_flight:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    yield future.result()
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _backoff(attempt: int, base: float, cap: float) -> float:
    # Full jitter: tasks that failed together spread out instead of retrying in lockstep.
    return random.uniform(0, min(cap, base * (2 ** attempt)))


# -- the copier ---------------------------------------------------------------------------------------

class Transfer:
    """Copies items from the `source` store to the `target` store (None: the source's settings),
    writing only below `target_roots` and never below `source_roots`."""

    def __init__(self, source: StorageConfig, target: StorageConfig | None, target_roots: list[str],
                 settings: TransferSettings = TransferSettings(), source_roots: list[str] | None = None) -> None:
        self.source = source
        self.target = target if target is not None else source
        self.settings = settings
        self.target_roots = Roots(target_roots)
        self.source_roots = Roots(source_roots) if source_roots else None
        self._same_store = _same_store(self.source, self.target)
        self._same_identity = _same_identities(self.source, self.target)
        self._resolved_source_roots = [resolved_uri(r.uri) for r in self.source_roots or ()]
        self._check_roots_apart()
        self._lock = threading.Lock()
        self._ios: tuple[RoutingFileIO, RoutingFileIO, GuardedFileIO] | None = None

    # Clients and pools do not pickle; a Spark task rebuilds them from the settings on first use.
    def __getstate__(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "target_roots": self.target_roots.uris,
                "settings": self.settings, "source_roots": self.source_roots.uris if self.source_roots else None}

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
        """Copy every item, `settings.in_flight` at a time; results in completion order. Per-item
        problems are results (FAILED and friends); only programming errors raise."""
        return _bounded(self.copy_one, items, self.settings.in_flight, "statekeeper-transfer")

    def copy_one(self, item: TransferItem) -> TransferResult:
        try:
            source, target = self._check_item(item)
        except _Refused as exc:
            return self._result(item, TransferOutcome.FAILED, message=str(exc))
        seen = _Seen()
        attempt = 0
        while True:
            try:
                return self._attempt(item, source, target, seen, attempt)
            except Exception as exc:
                if not isinstance(exc, _EXPECTED) and not is_vendor_error(exc):
                    raise   # a programming error
                outcome, message, transient = self._judge(exc, source, target)
            if not transient or attempt + 1 >= self.settings.max_attempts:
                if transient:
                    message += (f" (gave up after {attempt + 1} attempt{'s' if attempt else ''}; re-run the copy: "
                                "objects already at the target are skipped)")
                return self._result(item, outcome, size=seen.size, message=message, retries=attempt)
            delay = _backoff(attempt, self.settings.backoff_base, self.settings.backoff_max)
            log.warning("copying %s to %s failed (%s); attempt %d of %d in %.2fs", source, target, message,
                        attempt + 2, self.settings.max_attempts, delay)
            time.sleep(delay)
            attempt += 1

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
            # whatever it is called (also one swapped in after the Transfer was made).
            resolved = resolved_uri(target)
            for root, root_resolved in zip(self.source_roots.uris, self._resolved_source_roots, strict=True):
                if _below(resolved, root_resolved):
                    return f"{root} (resolved: {root_resolved})"
        return None

    def _attempt(self, item: TransferItem, source: str, target: str, seen: _Seen, attempt: int) -> TransferResult:
        src = self._stat_source(source)
        seen.size = src.size
        if item.expected_size is not None and src.size != item.expected_size:
            return self._result(
                item, TransferOutcome.SOURCE_CHANGED, size=src.size, retries=attempt,
                message=f"{source} is {src.size} bytes now, but the index recorded {item.expected_size}: it was "
                        "rewritten after it was indexed; re-index before copying it")
        dst = self._stat_target(target)
        known_checksum = None
        if dst is not None and dst.size == src.size:
            same, known_checksum = self._same_content(item, src, dst)
            if same:
                return self._result(item, TransferOutcome.SKIPPED, size=src.size, checksum=known_checksum,
                                    retries=attempt)
        method = self._method(source, target)
        if method is CopyMethod.SERVER_SIDE and target.startswith(("s3://", "oss://")):
            checksum = self._copy_server_side(src, target, known_checksum)
        elif method is CopyMethod.SERVER_SIDE:
            checksum = self._copy_with_fileio(src, target, known_checksum)
        elif method is CopyMethod.LOCAL:
            checksum = self._copy_to_local(src, target, kernel=not self.settings.checksum)
        elif target.startswith("file://"):
            checksum = self._copy_to_local(src, target, kernel=False)
        elif target.startswith(("s3://", "oss://")):
            checksum = self._stream_to_s3(src, target)
        else:
            checksum = self._stream_to_fileio(src, target, create_only=dst is None)
        return self._result(item, TransferOutcome.COPIED, size=src.size, checksum=checksum, method=method,
                            retries=attempt)

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
                return _sha256_of(self._fileios()[2], dst) == digests.sha256, digests.sha256
            return False, None
        return False, None

    def _source_digests(self, src: FileInfo, *, md5: bool, crc32c: bool) -> _Digests:
        """MD5 / CRC32C (GCS's base64 form) / SHA-256 (checksum mode) of the stat'ed source version, in one read."""
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
            raise _SourceChanged(f"{src.uri} changed since it was stat'ed: {exc}") from exc
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

    def _copy_to_local(self, src: FileInfo, target: str, *, kernel: bool) -> str | None:
        stream, reader = self._open_source(src, hashed=self.settings.checksum)
        path = local_path(target)

        def fill(fd: int) -> None:
            if kernel:
                _kernel_copy(stream.fileno(), fd, src.size)   # the stream is unread: its fd is at offset 0
                return
            with open(fd, "wb", buffering=_CHUNK, closefd=False) as out:   # a buffered write never comes short
                while data := reader.read(_CHUNK):
                    out.write(data)

        with stream:
            try:
                _write_local(path, src.size, fill, durable=self.settings.durable)
            except OSError as exc:
                raise StorageError(f"cannot copy {src.uri} to {target}: {exc.strerror or exc}") from exc
        return reader.checksum

    def _stream_to_s3(self, src: FileInfo, target: str) -> str | None:
        client = self._s3_client(target)
        bucket, key = _s3_parts(target)
        part = _part_size_for(src.size, self.settings.part_size)
        stream, reader = self._open_source(src, hashed=self.settings.checksum)
        with stream:
            if src.size <= part:
                body = reader.read_exact(src.size)
                reader.finish()   # before the PUT: a grown source must not be written at all
                client.put_object(Bucket=bucket, Key=key, Body=body)
            else:
                self._upload_parts(client, bucket, key, reader, src.size, part)
        return reader.checksum

    @staticmethod
    def _upload_parts(client: Any, bucket: str, key: str, reader: _SourceReader, size: int, part: int) -> None:
        upload_id = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        try:
            parts = []
            for number, start in enumerate(range(0, size, part), start=1):
                body = reader.read_exact(min(part, size - start))
                etag = client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number,
                                          Body=body)["ETag"]
                parts.append({"ETag": etag, "PartNumber": number})
            reader.finish()
            client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id,
                                             MultipartUpload={"Parts": parts})
        except BaseException:
            _abort(client, bucket, key, upload_id)
            raise

    def _stream_to_fileio(self, src: FileInfo, target: str, *, create_only: bool) -> str | None:
        """Stream the source into the target FileIO's atomic write (GCS, Azure). Create-only when the target
        was absent when stat'ed: an object that appeared since (another copier) is not replaced blindly; the
        ObjectExistsError is retried, and the next attempt's stat decides (skip, or replace)."""
        stream, reader = self._open_source(src, hashed=self.settings.checksum)
        with stream:
            written = self._fileios()[2].write(target, _ExactStream(reader, src.size), if_absent=create_only)
        self._check_written(src, written, "upload")
        return reader.checksum

    def _copy_with_fileio(self, src: FileInfo, target: str, known_checksum: str | None) -> str | None:
        """Server-side copy through the target store's FileIO (GCS rewrite, Azure Copy Blob), pinned to the
        stat'ed source version."""
        checksum = known_checksum
        if self.settings.checksum and checksum is None:
            checksum = self._hash_source(src)   # first: the copy below is pinned to the same version
        backend = self._fileios()[1].backend(target)
        try:
            written = backend.copy(src.uri, target, info=src)  # type: ignore[call-arg]
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

    def _copy_server_side(self, src: FileInfo, target: str, known_checksum: str | None) -> str | None:
        # Hash first: a source that vanishes meanwhile costs nothing at the target, and the copy below
        # is pinned to the same ETag, so the checksum is of the bytes copied.
        checksum = known_checksum
        if self.settings.checksum and checksum is None:
            checksum = self._hash_source(src)
        client = self._s3_client(target)
        src_bucket, src_key = _s3_parts(src.uri)
        bucket, key = _s3_parts(target)
        copy_source = {"Bucket": src_bucket, "Key": src_key}
        if_match = {"CopySourceIfMatch": f'"{src.etag}"'} if src.etag else {}
        copied_etag = None
        try:
            if src.size <= self.settings.server_side_max:
                response = client.copy_object(CopySource=copy_source, Bucket=bucket, Key=key, **if_match)
                copied_etag = (response.get("CopyObjectResult") or {}).get("ETag")
            else:
                self._copy_parts(client, copy_source, bucket, key, src.size, if_match)
        except ClientError as exc:
            code, status = _client_error(exc)
            if code == "PreconditionFailed" or status == 412:
                raise _SourceChanged(f"{src.uri} changed since it was stat'ed (ETag {src.etag} no longer current); "
                                     "the copy was refused by the store") from exc
            if code in ("NoSuchKey", "NotFound") or (status == 404 and code not in ("NoSuchBucket", "NoSuchUpload")):
                raise _SourceGone(f"{src.uri} does not exist any more (a running job may have subsumed its "
                                  "checkpoint); nothing was copied") from exc
            raise
        if _plain_md5(src.etag) and copied_etag and copied_etag.strip('"') == src.etag:
            # The new object's ETag is the MD5 of the stat'ed source version's bytes (one store, one
            # identity, a single-part source): the copy is that version byte for byte, so it has its size.
            # Saves a HEAD per object; any other ETag (multipart source, SSE-KMS, a store that ignored
            # CopySourceIfMatch and copied a newer version) still gets the size check below.
            return checksum
        written = self._fileios()[2].stat(target).size
        if written != src.size:
            raise _SizeMismatch(f"the server-side copy of {src.uri} ({src.size} bytes) left {written} bytes at "
                                f"{target}; re-run the copy (a target of another size is overwritten)")
        return checksum

    def _copy_parts(self, client: Any, copy_source: dict[str, str], bucket: str, key: str, size: int,
                    if_match: dict[str, str]) -> None:
        part = _part_size_for(size, self.settings.part_size)
        upload_id = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        try:
            parts = []
            for number, start in enumerate(range(0, size, part), start=1):
                end = min(size, start + part) - 1
                response = client.upload_part_copy(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number,
                                                   CopySource=copy_source, CopySourceRange=f"bytes={start}-{end}",
                                                   **if_match)
                parts.append({"ETag": response["CopyPartResult"]["ETag"], "PartNumber": number})
            client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id,
                                             MultipartUpload={"Parts": parts})
        except BaseException:
            _abort(client, bucket, key, upload_id)
            raise

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
            # A create-only upload met an object another writer made after the stat: the next attempt
            # stats it again and skips it (same content) or replaces it.
            return (TransferOutcome.FAILED, f"cannot copy {source} to {target}: {target} appeared while it was being "
                                            f"copied ({exc})", True)
        if isinstance(exc, ClientError):
            code, status = _client_error(exc)
            hint = _client_error_hint(code, status)
            return (TransferOutcome.FAILED, f"cannot copy {source} to {target}: {code or status}: {exc}{hint}",
                    _is_transient(exc))
        return TransferOutcome.FAILED, f"cannot copy {source} to {target}: {exc}", _is_transient(exc)

    @staticmethod
    def _result(item: TransferItem, outcome: TransferOutcome, *, size: int = 0, checksum: str | None = None,
                method: CopyMethod = CopyMethod.NONE, message: str | None = None, retries: int = 0) -> TransferResult:
        return TransferResult(item.source, item.target, outcome, size, checksum, method.value, message, retries)


def _checksums_differ(a: FileInfo, b: FileInfo) -> bool:
    """Both carry a store checksum of one algorithm (GCS CRC32C), and the checksums differ."""
    if not a.checksum or not b.checksum:
        return False
    return a.checksum.partition(":")[0] == b.checksum.partition(":")[0] and a.checksum != b.checksum


# What an attempt may raise for a storage reason (besides the GCS and Azure clients' own errors).
_EXPECTED = (_SourceGone, _SourceChanged, _SizeMismatch, StatekeeperError, ClientError, BotoCoreError, OSError)


def _abort(client: Any, bucket: str, key: str, upload_id: str) -> None:
    try:
        client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
    except (ClientError, BotoCoreError) as exc:
        # The original error matters more; a lifecycle rule for incomplete uploads reaps the parts.
        log.warning("could not abort multipart upload %s of s3://%s/%s (%s); its parts stay billed until an "
                    "AbortIncompleteMultipartUpload lifecycle rule removes them", upload_id, bucket, key, exc)


def _client_error_hint(code: str, status: int | None) -> str:
    if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch") or status == 403:
        return ("; check that the credentials in use may read the source and write the target (a server-side "
                "copy needs both with one identity)")
    if code == "NoSuchBucket":
        return "; the source or target bucket does not exist: check the target mapping and the endpoint"
    return ""


# -- verification -------------------------------------------------------------------------------------

def verify_objects(items: Iterable[VerifyItem], target: StorageConfig, *, checksum: bool,
                   in_flight: int = 16, max_attempts: int = 4) -> Iterator[VerifyResult]:
    """Check that every item exists at the target with its exact size and, with `checksum` and an
    expected checksum, SHA-256 (which reads the whole object). Concurrent, bounded like Transfer.run;
    results in completion order. Transient storage errors are retried; what stays unreadable is a
    failed result saying so, never an exception."""
    if in_flight < 1 or max_attempts < 1:
        raise ValueError(f"verify_objects: in_flight and max_attempts must be >= 1, got {in_flight} and {max_attempts}")
    pool = max(target.max_pool_connections, in_flight + _POOL_SLACK)
    fio = RoutingFileIO(target.with_overrides(max_pool_connections=pool))

    def one(item: VerifyItem) -> VerifyResult:
        for attempt in range(max_attempts):
            try:
                return _verify_one(fio, item, checksum)
            except Exception as exc:
                if not isinstance(exc, (StatekeeperError, ClientError, BotoCoreError, OSError)) \
                        and not is_vendor_error(exc):
                    raise   # a programming error
                if not _is_transient(exc) or attempt + 1 >= max_attempts:
                    return VerifyResult(item.target, False, None,
                                        f"could not verify {item.target}: {exc}; re-run the verification")
                time.sleep(_backoff(attempt, 0.5, 20.0))
        raise AssertionError("unreachable")

    return _bounded(one, items, in_flight, "statekeeper-verify")


def _verify_one(fio: RoutingFileIO, item: VerifyItem, checksum: bool) -> VerifyResult:
    try:
        info = fio.stat(item.target)
    except NotRegularFileError as exc:
        return VerifyResult(item.target, False, None, f"not a regular file at the target: {exc}")
    except ObjectNotFoundError:
        return VerifyResult(item.target, False, None, "missing at the target")
    if info.size != item.size:
        return VerifyResult(item.target, False, info.size, f"size {info.size} at the target, expected {item.size}",
                            info.etag)
    if item.version and info.etag != item.version and not (checksum and item.checksum):
        # Without a digest to compare, a new version is other bytes until proven otherwise (same size or not).
        return VerifyResult(item.target, False, info.size,
                            f"{item.target} changed at the target since it was verified (version {item.version}, now "
                            f"{info.etag}): its bytes may no longer be the source's; re-run the DR copy, which "
                            "replaces it", info.etag)
    if checksum and item.checksum:
        try:
            found = _sha256_of(fio, info)
        except ObjectNotFoundError:
            return VerifyResult(item.target, False, None, "missing at the target (vanished while being read)")
        if found != item.checksum.lower():
            return VerifyResult(item.target, False, info.size,
                                f"checksum mismatch at the target: SHA-256 {found}, expected {item.checksum}; "
                                "the target bytes differ from the source's: re-run the DR copy, which replaces it",
                                info.etag)
    return VerifyResult(item.target, True, info.size, None, info.etag)

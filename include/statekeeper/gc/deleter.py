"""Re-check and delete one partition's planned files (runs inside a Spark task; no Spark imports).

    Deleter(storage, roots, settings, on_progress).run(items) -> one DeleteResult per item

Safety first: every URI passes the roots guard (outside the roots, or through a symlink below a
root: FAILED, never sent to storage), and an object is deleted only if it still is the version the
plan saw (same size, etag and mtime to the second); otherwise it is ALREADY_GONE or CHANGED_SKIPPED.
Items of a lower `delete_order` are finished before any item of a higher one starts.

S3: the re-check lists each parent "directory" from just before its first candidate key to its last
(one request per 1,000 keys) and falls back to HEAD where the candidates are sparse; verified keys
go out in DeleteObjects batches, `requests_in_flight` requests at a time, under a token-bucket rate
limit, with exponential back-off and full jitter on throttling and connection errors. botocore's own
retries are off so that every retry is counted here (`DeleteResult.retries`, `on_progress`).
OSS (`oss://`) takes the same path through its S3-compatible API (StorageConfig.oss_s3_config), with a
client of its own: an OSS bucket is never confused with an S3 bucket of the same name.

GCS and Azure: the same re-check (listing pages of each parent "directory", from the first candidate
on GCS; a single candidate or sparse candidates by a metadata read), and then a delete that is itself
conditional on the planned version: GCS `ifGenerationMatch=<planned generation>` in JSON batch requests
of up to 100 calls, Azure `If-Match: <planned ETag>` in Blob Batch requests of up to 256 (or, on an
account that refuses Blob Batch, single Delete Blob requests with the same If-Match). An object
rewritten between the re-check and the delete is therefore kept by the store itself (412: CHANGED_SKIPPED,
or ALREADY_GONE when a follow-up read finds it gone). A plan row without a version id (etag) cannot be
pinned and is FAILED, never deleted unconditionally. Same rate limit, back-off and retry counting; the
clients' own retries are off.

Every object-store URI must be spelled exactly as the listing spells it (canonical): a URI that
normalizes to another string (an alias scheme, a `wasbs://` spelling, a trailing slash) is FAILED.
Local/NFS: a bounded thread pool does lstat re-check + unlink; emptied `chk-<N>` directories go.
"""
from __future__ import annotations

import errno
import logging
import os
import random
import re
import stat as stat_mod
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from statekeeper.storage.config import StorageConfig
from statekeeper.storage.errors import (
    OutsideRootError,
    StorageConfigError,
    StorageError,
    vendor_status,
    vendor_transient,
)
from statekeeper.storage.local import file_uri, local_path, object_type_of, symlink_below
from statekeeper.storage.model import RETRIABLE_HTTP_STATUS, ConditionalDelete, ConditionalOutcome
from statekeeper.storage.roots import Root, Roots
from statekeeper.tables.vocabulary import GcOutcome
from statekeeper.uri import normalize_uri

log = logging.getLogger("statekeeper.gc.deleter")


@dataclass(frozen=True, slots=True)
class PlannedDelete:
    """One file of a persisted plan, as the index listed it."""

    uri: str               # the exact listed object (files.uri): deleted as is, never re-spelled
    size: int
    mtime: datetime        # timezone-aware UTC
    etag: str | None
    delete_order: int = 1  # 0: `_metadata` of expired snapshots, deleted before anything else


@dataclass(frozen=True, slots=True)
class DeleteResult:
    uri: str
    outcome: GcOutcome
    message: str | None
    retries: int
    attempted_at: datetime


@dataclass(frozen=True)
class DeleteSettings:
    max_deletes_per_second: float | None = None   # this task's share of the run's global limit; None: unlimited
    batch_size: int = 1000                        # keys per delete request (<= 1000; GCS uses <= 100, Azure <= 256)
    requests_in_flight: int = 4                   # object stores: concurrent delete / re-check requests per task
    local_threads: int = 16                       # local/NFS: concurrent unlink/lstat per task
    max_attempts: int = 8                         # per request/key, throttling and connection errors
    backoff_base: float = 0.2                     # seconds; exponential with full jitter
    backoff_max: float = 20.0

    def __post_init__(self) -> None:
        if not 1 <= self.batch_size <= 1000:
            raise ValueError(f"DeleteSettings.batch_size must be in [1, 1000] (S3 DeleteObjects' limit), got {self.batch_size}")
        if self.requests_in_flight < 1 or self.local_threads < 1 or self.max_attempts < 1:
            raise ValueError("DeleteSettings: requests_in_flight, local_threads and max_attempts must be >= 1")
        if self.max_deletes_per_second is not None and self.max_deletes_per_second <= 0:
            raise ValueError("DeleteSettings.max_deletes_per_second must be > 0, or None for no limit")


ProgressCallback = Callable[[int, int, int], None]

# S3 error codes (and HTTP statuses) that mean "try again later", per key or per request.
RETRIABLE_CODES = frozenset({
    "SlowDown", "Throttling", "ThrottlingException", "ThrottledException", "RequestLimitExceeded",
    "RequestThrottled", "TooManyRequestsException", "InternalError", "ServiceUnavailable", "503", "500",
    "RequestTimeout", "RequestTimeTooSkewed",
})
RETRIABLE_STATUS = frozenset({500, 502, 503, 504})
_CHK_DIR = re.compile(r"chk-\d+")
_LIST_FALLBACK_FACTOR = 4    # a listing page scanning more than 4x the remaining candidates: HEAD the rest
_GCS_BATCH_MAX = 100         # calls per GCS JSON batch request
_AZURE_BATCH_MAX = 256       # sub-requests per Azure Blob Batch request
_LOCAL_CHUNK = 2000          # local items per progress report
_EPISODE_GAP_S = 30.0        # throttling retries closer together than this are one episode (one WARNING)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _same_second(a: datetime, b: datetime) -> bool:
    # The index and S3 listings keep whole seconds at best; the etag carries the finer identity.
    return int(a.timestamp()) == int(b.timestamp())


def _strip_etag(etag: str | None) -> str | None:
    return etag.strip('"') if etag else None


def _differences(item: PlannedDelete, size: int, etag: str | None, mtime: datetime | None) -> list[str]:
    diffs = []
    if size != item.size:
        diffs.append(f"size {item.size} -> {size}")
    if item.etag is not None and etag != item.etag:
        diffs.append(f"etag {item.etag} -> {etag}")
    if mtime is not None and not _same_second(item.mtime, mtime):
        diffs.append(f"mtime {item.mtime.isoformat()} -> {mtime.astimezone(timezone.utc).isoformat()}")
    return diffs


def _changed(item: PlannedDelete, diffs: list[str]) -> DeleteResult:
    return DeleteResult(item.uri, GcOutcome.CHANGED_SKIPPED,
                        f"{item.uri} changed since it was planned ({', '.join(diffs)}); not deleted "
                        "(the next index run and GC plan will see the new version)", 0, _now())


def _gone(item: PlannedDelete, retries: int = 0) -> DeleteResult:
    return DeleteResult(item.uri, GcOutcome.ALREADY_GONE, f"{item.uri} was already gone", retries, _now())


def _failed(item: PlannedDelete, message: str, retries: int = 0) -> DeleteResult:
    return DeleteResult(item.uri, GcOutcome.FAILED, message, retries, _now())


class _RateLimiter:
    """Token bucket of `rate` keys/s holding at most one second's worth: callers asking for more
    than is available wait (in turn) until the bucket has refilled."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.capacity = rate
        self._tokens = self.capacity
        self._stamp = time.monotonic()
        self._lock = threading.Lock()

    def acquire(self, n: int) -> None:
        with self._lock:  # one waiter at a time: first come, first served
            now = time.monotonic()
            self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            self._tokens -= n
            wait_s = -self._tokens / self.rate if self._tokens < 0 else 0.0
            if wait_s > 0:
                time.sleep(wait_s)


class _Throttle:
    """Back-off bookkeeping shared by the Deleter's threads: one WARNING per episode of throttling
    (retries with no gap longer than `_EPISODE_GAP_S` between them), not one per key or request.
    Requests in flight keep succeeding in between, so success cannot end an episode."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_hit: float | None = None
        self.episodes = 0

    def hit(self, what: str, reason: str, delay: float) -> None:
        now = time.monotonic()
        with self._lock:
            new = self._last_hit is None or now - self._last_hit > _EPISODE_GAP_S
            self._last_hit = now
            if new:
                self.episodes += 1
        if new:
            log.warning("the object store is throttling or unreachable (%s on %s); backing off with jitter (first "
                        "delay %.2fs) and retrying up to max_attempts per request; further retries in this episode "
                        "are not logged", reason, what, delay)


def _classify(exc: BaseException) -> tuple[bool, str]:
    """(retriable, code) of an exception raised by a boto3, google-cloud-storage or azure-storage-blob call
    (or a StorageError raised from one: the cause decides)."""
    from botocore.exceptions import ClientError, ConnectionError as BotoConnectionError, HTTPClientError

    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "") or ""
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return (code in RETRIABLE_CODES or status in RETRIABLE_STATUS), (code or str(status or "Error"))
    if isinstance(exc, (BotoConnectionError, HTTPClientError)):
        return True, type(exc).__name__
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        status = vendor_status(link)
        if status is not None:
            code = getattr(link, "error_code", None) or status
            return status in RETRIABLE_HTTP_STATUS, str(getattr(code, "value", code))
        if vendor_transient(link) or isinstance(link, (ConnectionError, TimeoutError)):
            return True, type(link).__name__
        if isinstance(link, StorageConfigError):
            break   # settings or credentials: trying again cannot help
        link = link.__cause__ or link.__context__
    return False, type(exc).__name__


# -- S3 work units --------------------------------------------------------------------------------


@dataclass(slots=True)
class _Key:
    key: str
    items: list[PlannedDelete]      # the same key planned twice still gets two results
    retries: int = 0


@dataclass(slots=True)
class _PrefixScan:
    """Candidates of one bucket "directory", re-checked in key order by listing pages."""

    bucket: str
    prefix: str                     # "" or ends with "/"
    keys: list[_Key]                # sorted by key
    position: int = 0               # keys[:position] are resolved
    start_after: str = ""           # first page: list from just before the first candidate
    token: str | None = None        # later pages: S3's continuation token


@dataclass(slots=True)
class _Outcome:
    """What one work unit produced, handed back to the coordinating thread."""

    results: list[DeleteResult] = field(default_factory=list)
    verified: list[tuple[str, _Key]] = field(default_factory=list)   # (bucket, key) ready to delete
    heads: list[tuple[str, _Key]] = field(default_factory=list)      # to re-check by HEAD
    scan: _PrefixScan | None = None                                  # listing continues here
    retries: int = 0
    bytes_done: int = 0


@dataclass(frozen=True)
class _Ops:
    """One object store's work units, for the coordinating loop (`Deleter._run_batched`)."""

    scheme: str                                          # for messages and thread names
    batch: int                                           # keys per delete request
    list_page: Callable[[_PrefixScan], _Outcome]         # re-check one listing page of a prefix scan
    head: Callable[[str, _Key], _Outcome]                # re-check one key by a metadata read
    delete: Callable[[str, list[_Key]], _Outcome]        # delete verified keys of one bucket/container
    uri: Callable[[str, str], str]                       # (bucket/container, key) -> URI, for messages


class Deleter:
    """Re-check and delete planned files of one Spark partition. Picklable: clients, pools and
    locks are created lazily in the process that runs it.

    `on_progress(files, bytes, retries)` receives increments (feed them to Spark accumulators):
    items finished with any outcome, bytes actually deleted, and retries (requests or keys retried).
    It is called from the thread iterating `run`, after each batch/chunk.
    """

    def __init__(self, storage: StorageConfig, roots: Sequence[str], settings: DeleteSettings = DeleteSettings(),
                 on_progress: ProgressCallback | None = None) -> None:
        self.storage = storage
        self.roots = list(roots)
        self.settings = settings
        self.on_progress = on_progress
        self._roots = Roots(self.roots)   # validates now, on the driver, not in every task
        self._reset()

    def _reset(self) -> None:
        self._client: Any = None
        self._oss_client: Any = None
        self._stores: dict[str, _VersionedStore] = {}
        self._lock = threading.Lock()
        self._throttle = _Throttle()
        rate = self.settings.max_deletes_per_second
        self._limiter = _RateLimiter(rate) if rate else None
        # A batch never exceeds one second's worth of the rate limit, so a low limit spreads
        # small batches evenly instead of sending 1,000 keys at once and then waiting.
        self._batch_size = max(1, min(self.settings.batch_size, int(rate))) if rate else self.settings.batch_size

    def __getstate__(self) -> dict[str, Any]:
        return {"storage": self.storage, "roots": self.roots, "settings": self.settings,
                "on_progress": self.on_progress}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.storage = state["storage"]
        self.roots = state["roots"]
        self.settings = state["settings"]
        self.on_progress = state["on_progress"]
        self._roots = Roots(self.roots)
        self._reset()

    def __repr__(self) -> str:
        return f"Deleter({self.storage!r}, {self.roots!r}, {self.settings!r})"

    @property
    def client(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    from statekeeper.storage.s3 import make_s3_client

                    # max_attempts=1: botocore must not retry behind our back, every retry is counted here.
                    self._client = make_s3_client(self.storage, max_attempts=1,
                                                  max_pool_connections=self.settings.requests_in_flight + 2)
        return self._client

    def _s3_client(self, scheme: str) -> Any:
        """The raw boto3 client for `s3` (the S3 settings) or `oss` (OSS's S3-compatible endpoint)."""
        if scheme == "s3":
            return self.client
        if self._oss_client is None:
            with self._lock:
                if self._oss_client is None:
                    from statekeeper.storage.s3 import make_s3_client

                    self._oss_client = make_s3_client(self.storage.oss_s3_config(), max_attempts=1,
                                                      max_pool_connections=self.settings.requests_in_flight + 2)
        return self._oss_client

    def _store(self, scheme: str) -> _VersionedStore:
        found = self._stores.get(scheme)
        if found is None:
            with self._lock:
                found = self._stores.get(scheme)
                if found is None:
                    found = self._stores[scheme] = (_GcsStore if scheme == "gs" else _AzureStore)(
                        self.storage, self.settings.requests_in_flight)
        return found

    # -- driver ---------------------------------------------------------------------------------

    def run(self, items: Iterable[PlannedDelete]) -> Iterator[DeleteResult]:
        """One result per item, order by order: every item of a lower `delete_order` is re-checked
        and deleted (or skipped) before any item of a higher one is touched."""
        by_order: dict[int, list[PlannedDelete]] = {}
        for item in items:
            by_order.setdefault(item.delete_order, []).append(item)
        for order in sorted(by_order):
            yield from self._run_group(by_order[order])

    def _progress(self, files: int, size: int, retries: int) -> None:
        if self.on_progress is not None and (files or size or retries):
            self.on_progress(files, size, retries)

    def _run_group(self, items: list[PlannedDelete]) -> Iterator[DeleteResult]:
        local: list[tuple[PlannedDelete, Root]] = []
        s3: list[tuple[PlannedDelete, str, str]] = []
        oss: list[tuple[PlannedDelete, str, str]] = []
        versioned: dict[str, list[tuple[PlannedDelete, str, str]]] = {"gs": [], "abfss": []}
        refused: list[DeleteResult] = []
        for item in items:
            try:
                norm = normalize_uri(item.uri)
                root = self._roots.require(norm)
            except OutsideRootError:
                refused.append(_failed(item, f"{item.uri} lies outside the configured roots "
                                             f"({', '.join(self._roots.uris)}); not deleted"))
                continue
            except ValueError as exc:
                refused.append(_failed(item, f"{item.uri} is not a valid URI ({exc}); not deleted"))
                continue
            if norm == root.uri:
                refused.append(_failed(item, f"{item.uri} is the root {root.uri} itself, not a file; not deleted"))
            elif norm.startswith("file://"):
                local.append((item, root))
            elif norm.startswith("s3://"):
                bucket, _, key = norm[len("s3://"):].partition("/")
                # The key must be the listed one, byte for byte: a spelling that normalizes to
                # another key (`dir/` -> `dir`) would delete an object nobody planned.
                if item.uri.partition("://")[2] != f"{bucket}/{key}":
                    refused.append(_failed(item, f"{item.uri} is not spelled as the index lists S3 objects "
                                                 f"(it would address s3://{bucket}/{key}); not deleted"))
                else:
                    s3.append((item, bucket, key))
            elif norm != item.uri:
                # Listings spell every object canonically; another spelling (`wasbs://`, `GS://`, a trailing
                # `/`) is not the listed object, so it is refused, not re-spelled and deleted.
                refused.append(_failed(item, f"{item.uri} is not spelled as the index lists objects (it would "
                                             f"address {norm}); not deleted"))
            elif norm.startswith("oss://"):
                bucket, _, key = norm[len("oss://"):].partition("/")
                oss.append((item, bucket, key))
            elif norm.startswith(("gs://", "abfss://")):
                scheme = norm.partition(":")[0]
                store_cls = _GcsStore if scheme == "gs" else _AzureStore
                problem = store_cls.version_problem(item.etag)
                if problem is not None:
                    refused.append(_failed(item, f"{item.uri}: {problem}, so the delete cannot be made conditional on "
                                                 "the planned version; not deleted (re-index and re-plan)"))
                else:
                    container, key = store_cls.split(norm)
                    versioned[scheme].append((item, container, key))
            else:
                refused.append(_failed(item, f"{item.uri}: no deleter for this URI scheme (file://, s3://, oss://, "
                                             "gs:// and abfss:// are supported); not deleted"))
        if refused:
            self._progress(len(refused), 0, 0)
            yield from refused
        if local:
            yield from self._run_local(local)
        if s3:
            yield from self._run_s3(s3)
        if oss:
            yield from self._run_s3(oss, "oss")
        for scheme, group in versioned.items():
            if group:
                yield from self._run_versioned(group, scheme)

    # -- local / NFS ----------------------------------------------------------------------------

    def _run_local(self, items: list[tuple[PlannedDelete, Root]]) -> Iterator[DeleteResult]:
        # Parent directories proven free of symlinks below their root, for this group only: a
        # check before the operation leaves a window either way (see GuardedFileIO), and one
        # component walk per directory instead of per file keeps NFS round trips down.
        checked: dict[str, str | None] = {}
        touched_dirs: set[tuple[str, str]] = set()
        with ThreadPoolExecutor(max_workers=self.settings.local_threads,
                                thread_name_prefix="statekeeper-gc-unlink") as pool:
            # Rate-limited: chunks of a quarter second's worth, so deletes trickle instead of bursting.
            rate = self.settings.max_deletes_per_second
            step = _LOCAL_CHUNK if rate is None else max(1, min(_LOCAL_CHUNK, int(rate / 4)))
            for start in range(0, len(items), step):
                chunk = items[start:start + step]
                if self._limiter is not None:   # --max-deletes-per-second holds for NFS too
                    self._limiter.acquire(len(chunk))
                results = list(pool.map(lambda pair: self._delete_local_safely(pair[0], pair[1], checked), chunk))
                for (item, root), result in zip(chunk, results, strict=True):
                    if result.outcome.done:
                        touched_dirs.add((root.uri, os.path.dirname(local_path(item.uri))))
                self._progress(len(results), sum(i.size for (i, _), r in zip(chunk, results, strict=True)
                                                 if r.outcome is GcOutcome.DELETED), 0)
                yield from results
        for root_uri, directory in sorted(touched_dirs):
            self._remove_empty_chk_dir(root_uri, directory, checked)

    def _symlink_message(self, root: Root, directory: str, checked: dict[str, str | None]) -> str | None:
        if directory in checked:
            return checked[directory]
        message = None
        try:
            link = symlink_below(local_path(root.uri), directory)
        except StorageError as exc:
            message = str(exc)
        else:
            if link is not None:
                message = (f"{file_uri(link)} is a symlink inside root {root.uri}; Statekeeper never deletes through "
                           "symlinks (it could lead outside the root): replace the link with the real directory")
        checked[directory] = message
        return message

    def _delete_local_safely(self, item: PlannedDelete, root: Root, checked: dict[str, str | None]) -> DeleteResult:
        try:
            return self._delete_local(item, root, checked)
        except Exception as exc:  # noqa: BLE001 - a bug on one item must not stop the others
            log.exception("unexpected error deleting %s", item.uri)
            return _failed(item, f"cannot delete {item.uri}: unexpected {type(exc).__name__}: {exc}; not deleted "
                                 "(please report this)")

    def _delete_local(self, item: PlannedDelete, root: Root, checked: dict[str, str | None]) -> DeleteResult:
        try:
            path = local_path(item.uri)
        except StorageError as exc:
            return _failed(item, f"{exc}; not deleted")
        refusal = self._symlink_message(root, os.path.dirname(path), checked)
        if refusal is not None:
            return _failed(item, f"{item.uri}: {refusal}; not deleted")
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return _gone(item)
        except NotADirectoryError:
            return _gone(item)   # a parent became a file: the planned object cannot be there
        except OSError as exc:
            return _failed(item, f"cannot stat {item.uri}: {errno.errorcode.get(exc.errno or 0, 'EIO')} "
                                 f"({exc.strerror or exc}); not deleted")
        if not stat_mod.S_ISREG(st.st_mode):
            kind = object_type_of(st.st_mode).value
            return DeleteResult(item.uri, GcOutcome.CHANGED_SKIPPED,
                                f"{item.uri} is now a {kind}, not the planned regular file; not deleted "
                                "(Statekeeper never deletes or follows non-regular objects)", 0, _now())
        # Same spelling as storage.local._info, so it compares with the etag the index stored.
        etag = f"{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}"
        mtime = datetime.fromtimestamp(st.st_mtime_ns / 1e9, tz=timezone.utc)
        diffs = _differences(item, st.st_size, etag, mtime)
        if diffs:
            return _changed(item, diffs)
        try:
            os.unlink(path)
        except FileNotFoundError:
            return _gone(item)
        except OSError as exc:
            return _failed(item, f"cannot delete {item.uri}: {errno.errorcode.get(exc.errno or 0, 'EIO')} "
                                 f"({exc.strerror or exc}); fix the permissions or mount and re-run GC")
        return DeleteResult(item.uri, GcOutcome.DELETED, None, 0, _now())

    def _remove_empty_chk_dir(self, root_uri: str, directory: str, checked: dict[str, str | None]) -> None:
        """rmdir a `chk-<N>` directory left empty (never recursive, never the root, `shared`,
        `taskowned` or a job directory: only names Flink gives checkpoint directories)."""
        root_path = local_path(root_uri).rstrip("/")
        # <root>/<job>/chk-N: a chk-N directly in the root would be a job directory, not a checkpoint.
        if not directory.startswith(root_path + "/") or os.path.dirname(directory) == root_path:
            return
        if not _CHK_DIR.fullmatch(os.path.basename(directory)):
            return
        if checked.get(directory) is not None:
            return
        try:
            if stat_mod.S_ISLNK(os.lstat(directory).st_mode):
                return
            os.rmdir(directory)
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                log.warning("could not remove the empty checkpoint directory %s: %s (harmless; remove it by hand "
                            "or let the next GC run retry)", directory, exc.strerror or exc)

    # -- S3 -------------------------------------------------------------------------------------

    def _run_s3(self, items: list[tuple[PlannedDelete, str, str]], scheme: str = "s3") -> Iterator[DeleteResult]:
        ops = _Ops(scheme, self._batch_size,
                   lambda scan: self._list_page(scan, scheme),
                   lambda bucket, key: self._head(bucket, key, scheme),
                   lambda bucket, keys: self._delete_batch(bucket, keys, scheme),
                   lambda bucket, key: f"{scheme}://{bucket}/{key}")
        return self._run_batched(items, ops)

    def _run_batched(self, items: list[tuple[PlannedDelete, str, str]], ops: _Ops) -> Iterator[DeleteResult]:
        """Re-check and delete (container, key) items with `ops`: listing pages and HEADs resolve keys,
        verified keys go out in batches; `requests_in_flight` units at a time."""
        # Group by bucket and parent "directory"; the same key twice shares one check and delete.
        groups: dict[tuple[str, str], dict[str, _Key]] = {}
        for item, bucket, key in items:
            prefix = key[:key.rfind("/") + 1]
            keys = groups.setdefault((bucket, prefix), {})
            entry = keys.get(key)
            if entry is None:
                keys[key] = _Key(key, [item])
            else:
                entry.items.append(item)
        scans: deque[_PrefixScan] = deque()
        heads: deque[tuple[str, _Key]] = deque()
        for (bucket, prefix), keys in sorted(groups.items()):
            ordered = [keys[k] for k in sorted(keys)]
            if len(ordered) == 1:
                heads.append((bucket, ordered[0]))   # one HEAD is cheaper than one LIST
            else:
                # StartAfter is exclusive: the first key minus its last character sorts just before it
                # (a few neighbours may be listed too; they are ignored).
                scans.append(_PrefixScan(bucket, prefix, ordered, 0, max(prefix, ordered[0].key[:-1])))
        ready: dict[str, list[_Key]] = {}     # bucket -> verified keys waiting for a batch
        total = len(items)
        done = 0
        in_flight: set[Future[_Outcome]] = set()
        # What each unit covers, so an unexpected exception in one fails only its own keys.
        units: dict[Future[_Outcome], tuple[bool, str, list[_Key]]] = {}

        def submit(is_check: bool, bucket: str, keys: list[_Key], fn: Callable[..., _Outcome], *args: Any) -> None:
            future = pool.submit(fn, *args)
            units[future] = (is_check, bucket, keys)
            in_flight.add(future)

        limit = self.settings.requests_in_flight
        batch = ops.batch
        checks_in_flight = 0

        with ThreadPoolExecutor(max_workers=limit, thread_name_prefix=f"statekeeper-gc-{ops.scheme}") as pool:
            while done < total:
                # Deletes first (keeps the re-check -> delete window short), then re-checks, then
                # partial batches once nothing is left to re-check.
                while len(in_flight) < limit:
                    full = next((b for b, keys in ready.items() if len(keys) >= batch), None)
                    if full is not None:
                        keys, ready[full] = ready[full][:batch], ready[full][batch:]
                        submit(False, full, keys, ops.delete, full, keys)
                    elif scans:
                        scan = scans.popleft()
                        submit(True, scan.bucket, scan.keys[scan.position:], ops.list_page, scan)
                        checks_in_flight += 1
                    elif heads:
                        bucket, key = heads.popleft()
                        submit(True, bucket, [key], ops.head, bucket, key)
                        checks_in_flight += 1
                    elif checks_in_flight == 0 and any(ready.values()):
                        bucket = next(b for b, keys in ready.items() if keys)
                        keys, ready[bucket] = ready[bucket][:batch], ready[bucket][batch:]
                        submit(False, bucket, keys, ops.delete, bucket, keys)
                    else:
                        break
                if not in_flight:
                    raise RuntimeError(f"{ops.scheme} deleter stalled with {total - done} of {total} items unresolved")
                finished, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
                for future in finished:
                    is_check, bucket, unit_keys = units.pop(future)
                    checks_in_flight -= is_check
                    try:
                        outcome = future.result()   # work units report storage errors as results
                    except Exception as exc:  # noqa: BLE001 - a bug in one unit must not stop the others
                        log.exception("unexpected error re-checking/deleting %d key(s) in %s", len(unit_keys),
                                      ops.uri(bucket, ""))
                        outcome = _Outcome(results=[
                            _failed(item, f"cannot {'re-check' if is_check else 'delete'} {ops.uri(bucket, k.key)}: "
                                          f"unexpected {type(exc).__name__}: {exc}; not deleted (please report this)",
                                    k.retries)
                            for k in unit_keys for item in k.items])
                    if outcome.scan is not None:
                        scans.appendleft(outcome.scan)   # keep paging this prefix before opening others
                    heads.extend(outcome.heads)
                    for bucket, key in outcome.verified:
                        ready.setdefault(bucket, []).append(key)
                    done += len(outcome.results)
                    self._progress(len(outcome.results), outcome.bytes_done, outcome.retries)
                    yield from outcome.results

    def _call(self, what: str, fn: Callable[[], Any]) -> tuple[Any, int, str | None]:
        """Run one request with back-off: (response or None, retries, error message or None)."""
        retries = 0
        attempt = 1
        while True:
            try:
                response = fn()
            except Exception as exc:  # noqa: BLE001 - classified below; anything else is a failure of this unit
                retriable, code = _classify(exc)
                if not retriable or attempt >= self.settings.max_attempts:
                    suffix = f" after {attempt} attempt(s)" if retriable else ""
                    return None, retries, f"{code}: {exc}{suffix}"
                delay = self._backoff(attempt)
                self._throttle.hit(what, code, delay)
                time.sleep(delay)
                retries += 1
                attempt += 1
                continue
            return response, retries, None

    def _backoff(self, attempt: int) -> float:
        # Full jitter: uniform in [0, min(max, base * 2^(attempt-1))] spreads retrying tasks apart.
        cap = min(self.settings.backoff_max, self.settings.backoff_base * (2 ** (attempt - 1)))
        return random.uniform(0, cap)

    def _verify(self, bucket: str, key: _Key, size: int | None, etag: str | None, mtime: datetime | None,
                out: _Outcome) -> None:
        """Sort one re-checked key into the outcome: absent (size None), changed or verified."""
        if size is None:
            for item in key.items:
                out.results.append(_gone(item, key.retries))
            return
        if mtime is not None and mtime.tzinfo is None:
            mtime = mtime.replace(tzinfo=timezone.utc)
        changed = [(item, _differences(item, size, etag, mtime)) for item in key.items]
        if all(not diffs for _, diffs in changed):
            out.verified.append((bucket, key))
            return
        # Two plan rows for one key that disagree: nothing about this object can be trusted.
        for item, diffs in changed:
            result = _changed(item, diffs or ["another plan row for the same key differs"])
            out.results.append(DeleteResult(result.uri, result.outcome, result.message, key.retries, result.attempted_at))

    def _list_page(self, scan: _PrefixScan, scheme: str = "s3") -> _Outcome:
        out = _Outcome()
        kwargs: dict[str, Any] = {"Bucket": scan.bucket, "Prefix": scan.prefix, "Delimiter": "/",
                                  "MaxKeys": self.storage.list_page_size}
        if scan.token:
            kwargs["ContinuationToken"] = scan.token
        else:
            kwargs["StartAfter"] = scan.start_after
        response, retries, error = self._call(f"listing {scheme}://{scan.bucket}/{scan.prefix}",
                                              lambda: self._s3_client(scheme).list_objects_v2(**kwargs))
        out.retries += retries
        if error is not None:
            return self._heads_instead(scan, retries, out)
        contents = response.get("Contents", ())
        prefixes = response.get("CommonPrefixes", ())
        listed = {obj["Key"]: obj for obj in contents}
        # The page covers every key up to its last entry; a common prefix ("sub/") stands for all
        # keys below it, none of which is a candidate (candidates are direct children).
        ends = [contents[-1]["Key"]] if contents else []
        if prefixes:
            ends.append(prefixes[-1]["Prefix"])
        bound = max(ends, default=None)
        token = response.get("NextContinuationToken") if response.get("IsTruncated") else None

        def verify(key: _Key) -> None:
            obj = listed.get(key.key)
            if obj is None:
                self._verify(scan.bucket, key, None, None, None, out)
            else:
                self._verify(scan.bucket, key, int(obj["Size"]), _strip_etag(obj.get("ETag")),
                             obj.get("LastModified"), out)

        return self._settle_page(scan, out, retries, bound, token, len(contents) + len(prefixes), verify)

    @staticmethod
    def _heads_instead(scan: _PrefixScan, retries: int, out: _Outcome) -> _Outcome:
        """The listing keeps failing: re-check each remaining key by a metadata read instead (with its own
        retries)."""
        for key in scan.keys[scan.position:]:
            key.retries += retries
            out.heads.append((scan.bucket, key))
        return out

    @staticmethod
    def _settle_page(scan: _PrefixScan, out: _Outcome, retries: int, bound: str | None, token: str | None,
                     scanned: int, verify: Callable[[_Key], None]) -> _Outcome:
        """Re-check the candidates one listing page covers: every key up to `bound` (the page's last entry)
        when more pages follow (`token`), all of them otherwise. The rest go on with the next page, or by
        metadata reads when the candidates are sparse (listing would mostly scan other objects)."""
        remaining = len(scan.keys) - scan.position
        position = scan.position
        while position < len(scan.keys):
            key = scan.keys[position]
            if token and (bound is None or key.key > bound):
                break   # beyond this page: a later page decides
            key.retries += retries
            verify(key)
            position += 1
        if position >= len(scan.keys):
            return out
        if scanned > _LIST_FALLBACK_FACTOR * remaining:
            out.heads.extend((scan.bucket, key) for key in scan.keys[position:])
            return out
        out.scan = _PrefixScan(scan.bucket, scan.prefix, scan.keys, position, scan.start_after, token)
        return out

    def _head(self, bucket: str, key: _Key, scheme: str = "s3") -> _Outcome:
        from botocore.exceptions import ClientError

        out = _Outcome()
        uri = f"{scheme}://{bucket}/{key.key}"
        absent = False

        def head() -> Any:
            nonlocal absent
            try:
                return self._s3_client(scheme).head_object(Bucket=bucket, Key=key.key)
            except ClientError as exc:
                status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                if status == 404 or exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                    absent = True
                    return None
                raise

        response, retries, error = self._call(f"HEAD {uri}", head)
        out.retries += retries
        key.retries += retries
        if error is not None:
            for item in key.items:
                out.results.append(_failed(item, f"cannot re-check {uri} before deleting ({error}); not deleted",
                                           key.retries))
        elif absent:
            self._verify(bucket, key, None, None, None, out)
        else:
            self._verify(bucket, key, int(response["ContentLength"]), _strip_etag(response.get("ETag")),
                         response.get("LastModified"), out)
        return out

    # -- GCS and Azure: deletes conditional on the planned version ------------------------------

    def _run_versioned(self, items: list[tuple[PlannedDelete, str, str]], scheme: str) -> Iterator[DeleteResult]:
        store = self._store(scheme)
        try:
            store.ready({container for _, container, _ in items})
        except (StorageError, ValueError) as exc:   # credentials, an account without them
            results = [_failed(item, f"cannot delete {item.uri}: {exc}; not deleted") for item, _, _ in items]
            self._progress(len(results), 0, 0)
            yield from results
            return
        ops = _Ops(scheme, min(self._batch_size, store.batch_max),
                   lambda scan: self._versioned_page(store, scan),
                   lambda container, key: self._versioned_head(store, container, key),
                   lambda container, keys: self._versioned_delete(store, container, keys),
                   store.uri)
        yield from self._run_batched(items, ops)

    def _verify_seen(self, container: str, key: _Key, seen: _Seen | None, out: _Outcome, uri: str) -> None:
        if seen is not None and not seen.regular:
            for item in key.items:
                out.results.append(DeleteResult(item.uri, GcOutcome.CHANGED_SKIPPED,
                                                f"{uri} is now a directory (hierarchical namespace), not the planned "
                                                "file; not deleted", key.retries, _now()))
            return
        if seen is None:
            self._verify(container, key, None, None, None, out)
        else:
            self._verify(container, key, seen.size, seen.etag, seen.mtime, out)

    def _versioned_page(self, store: _VersionedStore, scan: _PrefixScan) -> _Outcome:
        out = _Outcome()
        # The first page starts at the first candidate (GCS startOffset is inclusive; Azure lists the
        # "directory" from its start); later pages continue with the store's token.
        start = scan.keys[scan.position].key if scan.token is None else None
        response, retries, error = self._call(
            f"listing {store.uri(scan.bucket, scan.prefix)}",
            lambda: store.list_page(scan.bucket, scan.prefix, start, scan.token, self.storage.list_page_size))
        out.retries += retries
        if error is not None:
            return self._heads_instead(scan, retries, out)
        seen, bound, scanned, token = response
        return self._settle_page(
            scan, out, retries, bound, token, scanned,
            lambda key: self._verify_seen(scan.bucket, key, seen.get(key.key), out, store.uri(scan.bucket, key.key)))

    def _versioned_head(self, store: _VersionedStore, container: str, key: _Key) -> _Outcome:
        out = _Outcome()
        uri = store.uri(container, key.key)
        seen, retries, error = self._call(f"reading the metadata of {uri}", lambda: store.stat(container, key.key))
        out.retries += retries
        key.retries += retries
        if error is not None:
            for item in key.items:
                out.results.append(_failed(item, f"cannot re-check {uri} before deleting ({error}); not deleted",
                                           key.retries))
        else:
            self._verify_seen(container, key, seen, out, uri)
        return out

    def _versioned_delete(self, store: _VersionedStore, container: str, keys: list[_Key]) -> _Outcome:
        """Delete verified keys, each conditional on its planned version (all items of a key agree on it:
        `_verify` let it through). Answers: deleted, missing (ALREADY_GONE), refused because another
        version is live (read once more: ALREADY_GONE or CHANGED_SKIPPED), retriable (retried with
        back-off, counted), or failed."""
        refused: dict[str, ConditionalDelete] = {}

        def send(batch: list[_Key]) -> list[ConditionalDelete]:
            answers = store.delete(container, [(k.key, str(k.items[0].etag)) for k in batch])
            if len(answers) != len(batch):
                raise StorageError(f"{len(answers)} answers for {len(batch)} conditional deletes")
            return answers

        def judge(k: _Key, answer: ConditionalDelete, out: _Outcome) -> tuple[str, str] | None:
            if answer.outcome is ConditionalOutcome.FAILED and answer.retriable:
                code = answer.code or str(answer.status)
                return code, f"{code}: {answer.message}"
            if answer.outcome is ConditionalOutcome.DELETED:
                _deleted(k, out)
            elif answer.outcome is ConditionalOutcome.MISSING:
                for item in k.items:
                    out.results.append(_gone(item, k.retries))
            elif answer.outcome is ConditionalOutcome.CHANGED:
                refused[k.key] = answer
            else:
                for item in k.items:
                    out.results.append(_failed(item, f"cannot delete {answer.uri}: {answer.code}: {answer.message}; "
                                                     "not deleted: check the permissions and re-run GC", k.retries))
            return None

        out = self._delete_with_retries(keys, f"conditional batch delete in {store.uri(container, '')}", send, judge,
                                        lambda k: store.uri(container, k.key))
        for k in keys:
            if k.key in refused:
                self._after_refusal(store, container, k, refused[k.key], out)
        return out

    def _after_refusal(self, store: _VersionedStore, container: str, key: _Key, answer: ConditionalDelete,
                       out: _Outcome) -> None:
        """The store refused a delete pinned to the planned version: the object changed (or vanished) after
        the re-check. One more metadata read tells which; either way nothing was deleted."""
        uri = store.uri(container, key.key)
        seen, retries, error = self._call(f"reading the metadata of {uri}", lambda: store.stat(container, key.key))
        out.retries += retries
        key.retries += retries
        if error is None and seen is None:
            for item in key.items:
                out.results.append(_gone(item, key.retries))
            return
        for item in key.items:
            now = "" if seen is None else (", ".join(_differences(item, seen.size, seen.etag, seen.mtime))
                                           or "no difference visible now")
            out.results.append(DeleteResult(
                item.uri, GcOutcome.CHANGED_SKIPPED,
                f"{uri} changed between the re-check and the delete: the store refused the delete conditional on the "
                f"planned version {item.etag} ({answer.status} {answer.code}{'; ' + now if now else ''}); not deleted "
                "(the next index run and GC plan will see the new version)", key.retries, _now()))

    # -- S3 deletes -------------------------------------------------------------------------------

    def _delete_batch(self, bucket: str, keys: list[_Key], scheme: str = "s3") -> _Outcome:
        def send(batch: list[_Key]) -> list[dict[str, Any] | None]:
            response = self._s3_client(scheme).delete_objects(
                Bucket=bucket, Delete={"Objects": [{"Key": k.key} for k in batch], "Quiet": True})
            errors = {e.get("Key"): e for e in response.get("Errors", ())}
            return [errors.get(k.key) for k in batch]

        def judge(k: _Key, err: dict[str, Any] | None, out: _Outcome) -> tuple[str, str] | None:
            if err is None:
                _deleted(k, out)
                return None
            code = err.get("Code", "Error")
            message = f"{code}: {err.get('Message', '')}"
            if code in RETRIABLE_CODES:
                return code, message
            for item in k.items:
                out.results.append(_failed(item, f"cannot delete {scheme}://{bucket}/{k.key}: {message}; "
                                                 "check the bucket policy / permissions and re-run GC", k.retries))
            return None

        return self._delete_with_retries(keys, f"DeleteObjects on {scheme}://{bucket}", send, judge,
                                         lambda k: f"{scheme}://{bucket}/{k.key}")

    # -- the retry loop both delete paths share -----------------------------------------------------

    def _delete_with_retries(self, keys: list[_Key], what: str, send: Callable[[list[_Key]], list[Any]],
                             judge: Callable[[_Key, Any, _Outcome], tuple[str, str] | None],
                             uri_of: Callable[[_Key], str]) -> _Outcome:
        """Send the pending keys as one request per attempt until each is settled or the attempts run out.
        `send(batch)` answers per key, in order (an exception fails the whole request: retried when
        transient); `judge(key, answer, out)` settles a key (its results appended to `out`) and returns
        None, or returns (code, message) to keep it pending for the next attempt. Retries are counted when
        they happen: one per request after a failed request, else one per pending key."""
        out = _Outcome()
        pending = {k.key: k for k in keys}
        last_error: dict[str, str] = {}
        last_code = ""
        request_failed = False   # the previous attempt failed as a whole (vs. per key)
        attempt = 0
        while pending and attempt < self.settings.max_attempts:
            attempt += 1
            if attempt > 1:
                out.retries += 1 if request_failed else len(pending)
                for k in pending.values():
                    k.retries += 1
                delay = self._backoff(attempt - 1)
                self._throttle.hit(what, last_code, delay)
                time.sleep(delay)
            if self._limiter is not None:
                self._limiter.acquire(len(pending))
            batch = list(pending.values())
            try:
                answers = send(batch)
            except Exception as exc:  # noqa: BLE001 - classified below
                retriable, last_code = _classify(exc)
                for k in batch:
                    last_error[k.key] = f"{last_code}: {exc}"
                if not retriable:
                    break
                request_failed = True
                continue
            request_failed = False
            for k, answer in zip(batch, answers, strict=True):
                retry = judge(k, answer, out)
                if retry is None:
                    del pending[k.key]
                else:
                    last_code, last_error[k.key] = retry
        for k in pending.values():
            message = last_error.get(k.key, "no attempt made")
            for item in k.items:
                out.results.append(_failed(item, f"cannot delete {uri_of(k)} after {attempt} attempt(s): {message}; "
                                                 "not deleted, re-run GC later", k.retries))
        return out


def _deleted(k: _Key, out: _Outcome) -> None:
    for item in k.items:
        out.results.append(DeleteResult(item.uri, GcOutcome.DELETED, None, k.retries, _now()))
        out.bytes_done += item.size


# -- GCS and Azure through their vendor clients ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Seen:
    """One object as a re-check saw it."""

    size: int
    etag: str | None
    mtime: datetime | None
    regular: bool = True          # False: an Azure hierarchical-namespace directory entry


class _VersionedStore:
    """A store whose deletes can be pinned to a version (GCS generation, Azure ETag), reached through its
    FileIO and vendor client with the client's own retries off: the deleter retries and counts.
    Containers are strings (`gs` bucket name, Azure `abfss://container@account.dfs.<suffix>`)."""

    scheme = ""
    batch_max = 1

    def __init__(self, storage: StorageConfig, pool: int) -> None:
        self.storage = storage
        self.pool = pool
        self.fileio: Any = None

    @staticmethod
    def version_problem(etag: str | None) -> str | None:
        raise NotImplementedError

    @staticmethod
    def split(uri: str) -> tuple[str, str]:
        raise NotImplementedError

    def uri(self, container: str, key: str) -> str:
        raise NotImplementedError

    def ready(self, containers: set[str]) -> None:
        """Make the clients now (StorageError on missing or unusable credentials)."""

    def list_page(self, container: str, prefix: str, start: str | None, token: str | None,
                  page_size: int) -> tuple[dict[str, _Seen], str | None, int, str | None]:
        """One listing page of the direct children of `prefix` ("" or ending in "/"): (objects by key,
        the greatest name or sub-prefix on the page, names on the page, token of the next page or None)."""
        raise NotImplementedError

    def stat(self, container: str, key: str) -> _Seen | None:
        raise NotImplementedError

    def delete(self, container: str, pairs: list[tuple[str, str]]) -> list[ConditionalDelete]:
        return self.fileio.delete_if_unchanged([(self.uri(container, key), etag) for key, etag in pairs])


class _GcsStore(_VersionedStore):
    scheme = "gs"
    batch_max = _GCS_BATCH_MAX

    @staticmethod
    def version_problem(etag: str | None) -> str | None:
        if not etag:
            return "the plan has no GCS generation for it"
        if not etag.isdigit() or int(etag) <= 0:
            return f"its planned etag {etag!r} is not a GCS generation"
        return None

    @staticmethod
    def split(uri: str) -> tuple[str, str]:
        bucket, _, key = uri[len("gs://"):].partition("/")
        return bucket, key

    def uri(self, container: str, key: str) -> str:
        return f"gs://{container}/{key}" if key else f"gs://{container}"

    def ready(self, containers: set[str]) -> None:
        from statekeeper.storage.gcs import GcsFileIO

        if self.fileio is None:
            fileio = GcsFileIO(self.storage)
            fileio.client   # noqa: B018 - credentials are checked here, once
            self.fileio = fileio

    def list_page(self, container: str, prefix: str, start: str | None, token: str | None,
                  page_size: int) -> tuple[dict[str, _Seen], str | None, int, str | None]:
        iterator = self.fileio.client.list_blobs(container, prefix=prefix or None, delimiter="/",
                                                 start_offset=start or None, page_size=page_size,
                                                 page_token=token, retry=None)
        page = next(iterator.pages, None)
        seen: dict[str, _Seen] = {}
        names: list[str] = []
        if page is not None:
            for blob in page:
                names.append(blob.name)
                if not blob.name.endswith("/"):   # "folder" placeholders are never planned
                    seen[blob.name] = self._seen(blob)
            names.extend(page.prefixes)
        return seen, max(names, default=None), len(names), iterator.next_page_token

    def stat(self, container: str, key: str) -> _Seen | None:
        blob = self.fileio.client.bucket(container).get_blob(key, retry=None)
        return None if blob is None else self._seen(blob)

    @staticmethod
    def _seen(blob: Any) -> _Seen:
        return _Seen(int(blob.size or 0), str(blob.generation) if blob.generation is not None else None, blob.updated)


class _AzureStore(_VersionedStore):
    scheme = "abfss"
    batch_max = _AZURE_BATCH_MAX

    @staticmethod
    def version_problem(etag: str | None) -> str | None:
        return None if etag and etag.strip('"') else "the plan has no Azure ETag for it"

    @staticmethod
    def split(uri: str) -> tuple[str, str]:
        from statekeeper.storage.azure import AzureLocation

        loc = AzureLocation(uri)
        return loc.base, loc.path

    def uri(self, container: str, key: str) -> str:
        return f"{container}/{key}" if key else container

    def ready(self, containers: set[str]) -> None:
        from statekeeper.storage.azure import AzureFileIO, AzureLocation

        if self.fileio is None:
            # max_attempts=1: the client's retry policy is off (retry_total=0), every retry is counted here.
            self.fileio = AzureFileIO(self.storage.with_overrides(max_attempts=1))
        for container in sorted(containers):
            self.fileio.service(AzureLocation(container))   # one account's credentials, checked once

    def _loc(self, container: str, key: str) -> Any:
        from statekeeper.storage.azure import AzureLocation

        return AzureLocation(self.uri(container, key))

    def list_page(self, container: str, prefix: str, start: str | None, token: str | None,
                  page_size: int) -> tuple[dict[str, _Seen], str | None, int, str | None]:
        from statekeeper.storage.azure import _etag, _is_folder

        # Blob listings have no start key: the first page starts at the "directory"'s first name.
        pages = self.fileio._container(self._loc(container, "")).walk_blobs(
            name_starts_with=prefix or None, include=["metadata"], delimiter="/",
            results_per_page=page_size).by_page(continuation_token=token)
        page = next(pages, None)
        seen: dict[str, _Seen] = {}
        names: list[str] = []
        for item in page or ():
            names.append(item.name)
            if hasattr(item, "size") and not item.name.endswith("/"):   # not a BlobPrefix
                seen[item.name] = _Seen(int(item.size), _etag(item.etag), item.last_modified, not _is_folder(item))
        return seen, max(names, default=None), len(names), pages.continuation_token or None

    def stat(self, container: str, key: str) -> _Seen | None:
        from azure.core.exceptions import ResourceNotFoundError

        from statekeeper.storage.azure import _etag, _is_folder

        try:
            props = self.fileio._blob(self._loc(container, key)).get_blob_properties()
        except ResourceNotFoundError:
            return None
        return _Seen(int(props.size), _etag(props.etag), props.last_modified, not _is_folder(props))

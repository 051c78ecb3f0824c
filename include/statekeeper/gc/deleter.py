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
from statekeeper.storage.errors import OutsideRootError, StorageError
from statekeeper.storage.local import file_uri, local_path, object_type_of, symlink_below
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
    batch_size: int = 1000                        # S3 DeleteObjects keys per request (<= 1000)
    requests_in_flight: int = 4                   # S3: concurrent DeleteObjects / re-check requests per task
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
            log.warning("S3 is throttling or unreachable (%s on %s); backing off with jitter (first delay %.2fs) and "
                        "retrying up to max_attempts per request; further retries in this episode are not logged",
                        reason, what, delay)


def _classify(exc: BaseException) -> tuple[bool, str]:
    """(retriable, code) of an exception raised by a boto3 call."""
    from botocore.exceptions import ClientError, ConnectionError as BotoConnectionError, HTTPClientError

    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "") or ""
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return (code in RETRIABLE_CODES or status in RETRIABLE_STATUS), (code or str(status or "Error"))
    if isinstance(exc, (BotoConnectionError, HTTPClientError)):
        return True, type(exc).__name__
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
            else:
                refused.append(_failed(item, f"{item.uri}: no deleter for this URI scheme (file:// and s3:// "
                                             "are supported); not deleted"))
        if refused:
            self._progress(len(refused), 0, 0)
            yield from refused
        if local:
            yield from self._run_local(local)
        if s3:
            yield from self._run_s3(s3)

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

    def _run_s3(self, items: list[tuple[PlannedDelete, str, str]]) -> Iterator[DeleteResult]:
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
        batch = self._batch_size
        checks_in_flight = 0

        with ThreadPoolExecutor(max_workers=limit, thread_name_prefix="statekeeper-gc-s3") as pool:
            while done < total:
                # Deletes first (keeps the re-check -> delete window short), then re-checks, then
                # partial batches once nothing is left to re-check.
                while len(in_flight) < limit:
                    full = next((b for b, keys in ready.items() if len(keys) >= batch), None)
                    if full is not None:
                        keys, ready[full] = ready[full][:batch], ready[full][batch:]
                        submit(False, full, keys, self._delete_batch, full, keys)
                    elif scans:
                        scan = scans.popleft()
                        submit(True, scan.bucket, scan.keys[scan.position:], self._list_page, scan)
                        checks_in_flight += 1
                    elif heads:
                        bucket, key = heads.popleft()
                        submit(True, bucket, [key], self._head, bucket, key)
                        checks_in_flight += 1
                    elif checks_in_flight == 0 and any(ready.values()):
                        bucket = next(b for b, keys in ready.items() if keys)
                        keys, ready[bucket] = ready[bucket][:batch], ready[bucket][batch:]
                        submit(False, bucket, keys, self._delete_batch, bucket, keys)
                    else:
                        break
                if not in_flight:
                    raise RuntimeError(f"S3 deleter stalled with {total - done} of {total} items unresolved")
                finished, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
                for future in finished:
                    is_check, bucket, unit_keys = units.pop(future)
                    checks_in_flight -= is_check
                    try:
                        outcome = future.result()   # work units report S3 errors as results
                    except Exception as exc:  # noqa: BLE001 - a bug in one unit must not stop the others
                        log.exception("unexpected error re-checking/deleting %d key(s) in s3://%s", len(unit_keys), bucket)
                        outcome = _Outcome(results=[
                            _failed(item, f"cannot {'re-check' if is_check else 'delete'} s3://{bucket}/{k.key}: "
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

    def _list_page(self, scan: _PrefixScan) -> _Outcome:
        out = _Outcome()
        remaining = len(scan.keys) - scan.position
        kwargs: dict[str, Any] = {"Bucket": scan.bucket, "Prefix": scan.prefix, "Delimiter": "/",
                                  "MaxKeys": self.storage.list_page_size}
        if scan.token:
            kwargs["ContinuationToken"] = scan.token
        else:
            kwargs["StartAfter"] = scan.start_after
        response, retries, error = self._call(f"listing s3://{scan.bucket}/{scan.prefix}",
                                              lambda: self.client.list_objects_v2(**kwargs))
        out.retries += retries
        if error is not None:
            # The listing keeps failing: re-check each key by HEAD instead (with its own retries).
            for key in scan.keys[scan.position:]:
                key.retries += retries
                out.heads.append((scan.bucket, key))
            return out
        contents = response.get("Contents", ())
        prefixes = response.get("CommonPrefixes", ())
        listed = {obj["Key"]: obj for obj in contents}
        # The page covers every key up to its last entry; a common prefix ("sub/") stands for all
        # keys below it, none of which is a candidate (candidates are direct children).
        ends = [contents[-1]["Key"]] if contents else []
        if prefixes:
            ends.append(prefixes[-1]["Prefix"])
        bound = max(ends, default=None)
        truncated = bool(response.get("IsTruncated")) and bool(response.get("NextContinuationToken"))
        position = scan.position
        while position < len(scan.keys):
            key = scan.keys[position]
            if truncated and (bound is None or key.key > bound):
                break   # beyond this page: a later page decides
            key.retries += retries
            obj = listed.get(key.key)
            if obj is None:
                self._verify(scan.bucket, key, None, None, None, out)
            else:
                self._verify(scan.bucket, key, int(obj["Size"]), _strip_etag(obj.get("ETag")),
                             obj.get("LastModified"), out)
            position += 1
        if position >= len(scan.keys):
            return out
        if len(contents) + len(prefixes) > _LIST_FALLBACK_FACTOR * remaining:
            # Sparse candidates: listing would mostly scan other objects; HEAD the rest.
            out.heads.extend((scan.bucket, key) for key in scan.keys[position:])
            return out
        out.scan = _PrefixScan(scan.bucket, scan.prefix, scan.keys, position, scan.start_after,
                               response["NextContinuationToken"])
        return out

    def _head(self, bucket: str, key: _Key) -> _Outcome:
        from botocore.exceptions import ClientError

        out = _Outcome()
        uri = f"s3://{bucket}/{key.key}"
        absent = False

        def head() -> Any:
            nonlocal absent
            try:
                return self.client.head_object(Bucket=bucket, Key=key.key)
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

    def _delete_batch(self, bucket: str, keys: list[_Key]) -> _Outcome:
        out = _Outcome()
        pending = {k.key: k for k in keys}
        last_error: dict[str, str] = {}
        last_code = ""
        request_failed = False   # the previous attempt failed as a whole (vs. per key)
        attempt = 0
        while pending and attempt < self.settings.max_attempts:
            attempt += 1
            if attempt > 1:
                # Counted here, when the retry really happens: one per request, or one per key.
                out.retries += 1 if request_failed else len(pending)
                for k in pending.values():
                    k.retries += 1
                delay = self._backoff(attempt - 1)
                self._throttle.hit(f"DeleteObjects on s3://{bucket}", last_code, delay)
                time.sleep(delay)
            if self._limiter is not None:
                self._limiter.acquire(len(pending))
            batch = list(pending.values())
            try:
                response = self.client.delete_objects(
                    Bucket=bucket, Delete={"Objects": [{"Key": k.key} for k in batch], "Quiet": True})
            except Exception as exc:  # noqa: BLE001 - classified below
                retriable, last_code = _classify(exc)
                for k in batch:
                    last_error[k.key] = f"{last_code}: {exc}"
                if not retriable:
                    break
                request_failed = True
                continue
            request_failed = False
            errors = {e.get("Key"): e for e in response.get("Errors", ())}
            for k in batch:
                err = errors.get(k.key)
                if err is None:
                    del pending[k.key]
                    for item in k.items:
                        out.results.append(DeleteResult(item.uri, GcOutcome.DELETED, None, k.retries, _now()))
                        out.bytes_done += item.size
                    continue
                code = err.get("Code", "Error")
                last_error[k.key] = f"{code}: {err.get('Message', '')}"
                if code in RETRIABLE_CODES:
                    last_code = code   # stays pending: retried with the next attempt
                    continue
                del pending[k.key]
                for item in k.items:
                    out.results.append(_failed(item, f"cannot delete s3://{bucket}/{k.key}: {last_error[k.key]}; "
                                                     "check the bucket policy / permissions and re-run GC", k.retries))
        for k in pending.values():
            message = last_error.get(k.key, "no attempt made")
            for item in k.items:
                out.results.append(_failed(item, f"cannot delete s3://{bucket}/{k.key} after {attempt} attempt(s): "
                                                 f"{message}; not deleted, re-run GC later", k.retries))
        return out

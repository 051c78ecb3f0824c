"""Delete one partition's planned files, each only while it is the version the plan saw (runs inside a Spark
task; no Spark imports).

    Deleter(storage, roots, settings, on_progress).run(items) -> one DeleteResult per item

Safety first: every URI passes the roots guard (outside the roots, or through a symlink below a root: FAILED,
never sent to storage) and must be spelled exactly as the listing spells it (canonical: `wasbs://`, `GS://`, a
trailing `/` name another object and are FAILED). Items of a lower `delete_order` are finished before any item of
a higher one starts.

How "still the planned version" is made sure of (statekeeper.storage.model.DeleteRecheck, per store):

* object stores whose self-test proved that they refuse a delete pinned to another version
  (statekeeper.storage.enforcement, Guard.CONDITIONAL_DELETE: proven once per store and run on the driver and handed
  to the tasks in an `Enforcement`; a Deleter given none proves each store itself on first use): the delete itself
  is conditional on the planned version, with no request before it. S3 and OSS: DeleteObjects of up to 1,000 keys, each with
  its planned ETag; GCS: batches of up to 100 deletes with `ifGenerationMatch`; Azure: Blob Batch of up to 256
  with `If-Match` (single conditional deletes on an account that refuses Blob Batch). The store keeps an object
  rewritten since it was planned (CHANGED_SKIPPED; one metadata read then says how it changed, or that it is
  gone: ALREADY_GONE), answers a missing one as such (ALREADY_GONE), and a throttled key is sent again. A plan
  row without a version (etag) cannot be pinned: FAILED, never deleted unconditionally.
* object stores whose self-test found the precondition ignored, or could not complete (unknown: fail closed), and
  every store configured `listing` (StorageConfig.delete_recheck / oss_delete_recheck: then nothing is tested):
  each parent "directory" is listed again just before its keys are deleted (statekeeper.storage.listing: one
  page per 1,000 keys, metadata reads where candidates are sparse) and size, version and mtime (to the second)
  compared with the plan; what matches is deleted (S3, OSS: plain
  DeleteObjects; GCS and Azure: still conditional). An object replaced between the listing and the delete on
  such a store is deleted: the window is kept to a few batches.
* local and NFS: lstat against the planned size, mtime and fingerprint (inode, mtime in ns, size), then unlink,
  never through a symlink; emptied `chk-<N>` directories go afterwards.

All of it runs on one bulk engine (statekeeper.storage.bulk): batches grouped by bucket or container, paced per
job prefix (AIMD from S3's 3,500 writes/s per prefix; `max_deletes_per_second` as the overall limit), retried
with back-off on throttling and connection errors (the store's per-key answers too), every retry counted
(`DeleteResult.retries`, `on_progress`). The clients' own retries are off for these requests: a key throttled
inside a 200 answer is only retried here, and pacing needs every throttling answer. `prefix_report()` says
what each job prefix achieved.
"""
from __future__ import annotations

import errno
import logging
import os
import re
import stat as stat_mod
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from statekeeper.storage.bulk import Answer, BulkEngine, BulkSettings, Work, log_report
from statekeeper.storage.config import StorageConfig
from statekeeper.storage.enforcement import Enforcement, Guard
from statekeeper.storage.errors import StorageError
from statekeeper.storage.listing import ListingLookup, Resolved
from statekeeper.storage.local import file_uri, local_path, object_type_of, symlink_below
from statekeeper.storage.model import ConditionalDelete, ConditionalOutcome, DeleteRecheck, FileInfo, ObjectType
from statekeeper.storage.pacing import S3_WRITES_PER_PREFIX, LaneReport, Pacer, PaceSettings
from statekeeper.storage.retry import Failure, RetryPolicy, ThrottleLog, call, is_storage_failure, judge, judge_code
from statekeeper.storage.roots import Root, Roots
from statekeeper.tables.vocabulary import GcOutcome
from statekeeper.uri import normalize_uri

log = logging.getLogger("statekeeper.gc.deleter")


# Not frozen, like DeleteResult: a task makes one of each per planned key, and a frozen dataclass's __init__ costs
# four times a plain one's (0.78 against 0.17 us for five fields), a tenth of the deleter's CPU per key.
@dataclass(slots=True)
class PlannedDelete:
    """One file of a persisted plan, as the index listed it."""

    uri: str               # the exact listed object (files.uri): deleted as is, never re-spelled
    size: int
    mtime: datetime        # timezone-aware UTC
    etag: str | None
    delete_order: int = 1  # 0: `_metadata` of expired snapshots, deleted before anything else


@dataclass(slots=True)
class DeleteResult:
    uri: str
    outcome: GcOutcome
    message: str | None
    retries: int
    attempted_at: datetime


@dataclass(frozen=True)
class DeleteSettings:
    max_deletes_per_second: float | None = None   # this task's share of the run's global limit; None: unlimited
    tasks_at_once: int = 1                        # tasks deleting keys of the same prefixes at the same time: each
                                                  # starts a prefix at this share of the store's rate per prefix
    batch_size: int = 1000                        # keys per delete request (<= 1000; GCS uses <= 100, Azure <= 256)
    requests_in_flight: int = 4                   # object stores: concurrent delete / re-check requests per task
    local_threads: int = 16                       # local/NFS: concurrent lstat + unlink workers per task
    max_attempts: int = 8                         # per request/key, throttling and connection errors
    backoff_base: float = 0.2                     # seconds; exponential with full jitter
    backoff_max: float = 20.0

    def __post_init__(self) -> None:
        if not 1 <= self.batch_size <= 1000:
            raise ValueError(f"DeleteSettings.batch_size must be in [1, 1000] (S3 DeleteObjects' limit), got {self.batch_size}")
        if min(self.requests_in_flight, self.local_threads, self.max_attempts, self.tasks_at_once) < 1:
            raise ValueError("DeleteSettings: requests_in_flight, local_threads, max_attempts and tasks_at_once must "
                             "be >= 1")
        if self.max_deletes_per_second is not None and self.max_deletes_per_second <= 0:
            raise ValueError("DeleteSettings.max_deletes_per_second must be > 0, or None for no limit")

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(self.max_attempts, self.backoff_base, self.backoff_max)


ProgressCallback = Callable[[int, int, int], None]

_CHK_DIR = re.compile(r"chk-\d+")
_BATCH_MAX = {"s3": 1000, "oss": 1000, "gs": 100, "abfss": 256}   # each store's limit per batch request
_LOCAL_BATCH = 256       # local items per worker call (one lstat + unlink each)
_LISTING_CHUNK = 1000    # listing mode: keys re-checked ahead of their deletes
_UNCHECKED: Any = object()


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _same_second(a: datetime, b: datetime) -> bool:
    # The index and S3 listings keep whole seconds at best; the etag carries the finer identity.
    return int(a.timestamp()) == int(b.timestamp())


def _differences(item: PlannedDelete, size: int, etag: str | None, mtime: datetime | None) -> list[str]:
    diffs = []
    if size != item.size:
        diffs.append(f"size {item.size} -> {size}")
    if item.etag is not None and etag != item.etag:
        diffs.append(f"etag {item.etag} -> {etag}")
    if mtime is not None and not _same_second(item.mtime, mtime):
        diffs.append(f"mtime {item.mtime.isoformat()} -> {mtime.astimezone(timezone.utc).isoformat()}")
    return diffs


def _result(item: PlannedDelete, outcome: GcOutcome, message: str | None, retries: int = 0,
            at: datetime | None = None) -> DeleteResult:
    return DeleteResult(item.uri, outcome, message, retries, at or _now())


def _changed(item: PlannedDelete, diffs: list[str], retries: int = 0) -> DeleteResult:
    return _result(item, GcOutcome.CHANGED_SKIPPED,
                   f"{item.uri} changed since it was planned ({', '.join(diffs)}); not deleted (the next index run "
                   "and GC plan will see the new version)", retries)


def _gone(item: PlannedDelete, retries: int = 0) -> DeleteResult:
    return _result(item, GcOutcome.ALREADY_GONE, f"{item.uri} was already gone", retries)


def _failed(item: PlannedDelete, message: str, retries: int = 0) -> DeleteResult:
    return _result(item, GcOutcome.FAILED, message, retries)


@dataclass(slots=True)
class _Key:
    """One object to delete; the same URI planned twice still gets two results."""

    uri: str
    items: list[PlannedDelete]
    container: str                  # what may share a request: a bucket, an Azure container
    lane: str                       # the job prefix it is paced by

    @property
    def version(self) -> str | None:
        return self.items[0].etag


def _lane_of(root: Root, norm: str) -> str:
    """The job prefix of a URI below `root`: the root and the first path segment below it."""
    rest = norm[len(root.uri.rstrip("/")) + 1:]
    head, sep, _ = rest.partition("/")
    return f"{root.uri.rstrip('/')}/{head}" if sep else root.uri


# -- object stores: one engine operation per store and mode ---------------------------------------------------


class _StoreDeletes:
    """The engine operation deleting `_Key`s of one object store: conditional on the planned version, or (S3/OSS
    in listing mode) after the re-check. Results: a list of DeleteResult per key."""

    def __init__(self, backend: Any, scheme: str, batch_limit: int, conditional: bool, rechecked: bool,
                 policy: RetryPolicy, throttle_log: ThrottleLog) -> None:
        self.backend = backend
        self.scheme = scheme
        self.batch_limit = batch_limit
        self.conditional = conditional
        self.rechecked = rechecked      # a listing re-check came first (messages say so)
        self.policy = policy
        self.throttle_log = throttle_log

    def describe(self, group: Hashable) -> str:
        verb = "conditional batch delete" if self.conditional else "DeleteObjects"
        return f"{verb} in {group}"

    def judge(self, exc: BaseException) -> Failure:
        if not is_storage_failure(exc):
            # Not a storage failure at all: a bug. It fails only this batch's keys, loudly.
            log.error("unexpected error deleting in %s", self.scheme, exc_info=exc)
            return Failure(False, False, f"unexpected {type(exc).__name__} (please report this)")
        return judge(exc)

    def send(self, group: Hashable, batch: Sequence[Work[_Key]]) -> list[Answer[list[DeleteResult]]]:
        keys = [w.item for w in batch]
        if self.conditional:
            answers = self.backend.delete_if_unchanged([(k.uri, str(k.version)) for k in keys])
        else:
            answers = self.backend.delete_batch([k.uri for k in keys])
        if len(answers) != len(keys):
            raise StorageError(f"{len(answers)} answers for {len(keys)} deletes in {group}")
        answered = _now()   # the request's answer is when its keys were deleted (a clock read per key cost more)
        out: list[Answer[list[DeleteResult]]] = []
        deleted, done = ConditionalOutcome.DELETED, GcOutcome.DELETED
        for work, answer in zip(batch, answers, strict=True):
            if answer.outcome is deleted:   # the usual answer, inline: this loop runs once per key of a GC run
                items = work.item.items
                out.append(Answer([DeleteResult(items[0].uri, done, None, work.retries, answered)] if len(items) == 1
                                  else [DeleteResult(i.uri, done, None, work.retries, answered) for i in items]))
            else:
                out.append(self._judge_answer(work, answer, answered))
        return out

    def _judge_answer(self, work: Work[_Key], answer: ConditionalDelete,
                      answered: datetime) -> Answer[list[DeleteResult]]:
        """Every answer but DELETED, which `send` judges inline."""
        key = work.item
        if answer.outcome is ConditionalOutcome.MISSING:
            return Answer.settled([_gone(i, work.retries) for i in key.items])
        if answer.outcome is ConditionalOutcome.CHANGED:
            results, retries = self._after_refusal(work, answer)
            return Answer.settled(results, retries)
        judged = judge_code(answer.code, answer.status)
        if answer.retriable:
            failure = Failure(True, judged.throttled, answer.code or str(answer.status))
            return Answer.again(failure, f"{failure.code}: {answer.message}")
        return Answer.settled([_failed(i, f"cannot delete {answer.uri}: {answer.code}: {answer.message}; not deleted: "
                                          "check the bucket policy / permissions and re-run GC", work.retries)
                               for i in key.items])

    def _after_refusal(self, work: Work[_Key], answer: ConditionalDelete) -> tuple[list[DeleteResult], int]:
        """The store refused a delete pinned to the planned version: the object changed (or vanished) since. One
        metadata read tells which, for the message; either way nothing was deleted."""
        key = work.item
        seen = answer.current
        retries = 0
        gone = False
        if seen is None:
            absent = False

            def stat() -> FileInfo | None:
                nonlocal absent
                from statekeeper.storage.errors import NotRegularFileError, ObjectNotFoundError

                try:
                    return self.backend.stat(key.uri)
                except NotRegularFileError:
                    return None
                except ObjectNotFoundError:
                    absent = True
                    return None

            called = call(stat, what=f"reading the metadata of {key.uri}", policy=self.policy,
                          throttle_log=self.throttle_log)
            retries = called.retries
            seen, gone = called.value, absent and called.error is None
        total = work.retries + retries
        if gone:
            return [_gone(i, total) for i in key.items], retries
        when = "between the re-check and the delete" if self.rechecked else "since it was planned"
        out = []
        for item in key.items:
            now = "" if seen is None else (", ".join(_differences(item, seen.size, seen.etag, seen.mtime))
                                           or "no difference visible now")
            out.append(_result(item, GcOutcome.CHANGED_SKIPPED,
                               f"{key.uri} changed {when}: the store refused the delete conditional on the planned "
                               f"version {item.etag} ({answer.status} {answer.code}{'; ' + now if now else ''}); not "
                               "deleted (the next index run and GC plan will see the new version)", total))
        return out, retries

    def give_up(self, work: Work[_Key], message: str, failure: Failure) -> list[DeleteResult]:
        tries = f" after {work.attempts} attempt(s)" if failure.retriable else ""
        return [_failed(i, f"cannot delete {work.item.uri}{tries}: {message}; not deleted, re-run GC later",
                        work.retries) for i in work.item.items]


# -- local and NFS --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _LocalItem:
    item: PlannedDelete
    root: Root
    path: str          # the local path of item.uri
    lane: str


class _LocalDeletes:
    """The engine operation for local files: lstat against the plan, then unlink; chunks of files per worker."""

    def __init__(self, batch_limit: int) -> None:
        self.batch_limit = batch_limit
        # Parent directories proven free of symlinks below their root, for this run only: a check before the
        # operation leaves a window either way (see GuardedFileIO), and one component walk per directory instead
        # of per file keeps NFS round trips down.
        self.checked: dict[str, str | None] = {}
        self.lock = threading.Lock()
        self.touched: set[tuple[str, str]] = set()

    def describe(self, group: Hashable) -> str:
        return "unlink on local disk"

    def judge(self, exc: BaseException) -> Failure:
        log.error("unexpected error deleting local files", exc_info=exc)
        return Failure(False, False, f"unexpected {type(exc).__name__} (please report this)")

    def send(self, group: Hashable, batch: Sequence[Work[_LocalItem]]) -> list[Answer[list[DeleteResult]]]:
        out = []
        for work in batch:
            item, root = work.item.item, work.item.root
            try:
                result = self._delete(item, root, work.item.path)
            except Exception as exc:  # noqa: BLE001 - a bug on one item must not stop the others
                log.exception("unexpected error deleting %s", item.uri)
                result = _failed(item, f"cannot delete {item.uri}: unexpected {type(exc).__name__}: {exc}; not "
                                       "deleted (please report this)")
            if result.outcome.done:
                with self.lock:
                    self.touched.add((root.uri, os.path.dirname(work.item.path)))
            out.append(Answer.settled([result]))
        return out

    def give_up(self, work: Work[_LocalItem], message: str, failure: Failure) -> list[DeleteResult]:
        return [_failed(work.item.item, f"cannot delete {work.item.item.uri}: {message}; not deleted")]

    def _symlink_message(self, root: Root, directory: str) -> str | None:
        # A dict read is atomic; only the first check of a directory takes the lock (to record it).
        found = self.checked.get(directory, _UNCHECKED)
        if found is not _UNCHECKED:
            return found
        message = None
        try:
            link = symlink_below(local_path(root.uri), directory)
        except StorageError as exc:
            message = str(exc)
        else:
            if link is not None:
                message = (f"{file_uri(link)} is a symlink inside root {root.uri}; Statekeeper never deletes through "
                           "symlinks (it could lead outside the root): replace the link with the real directory")
        with self.lock:
            self.checked[directory] = message
        return message

    def _delete(self, item: PlannedDelete, root: Root, path: str) -> DeleteResult:
        refusal = self._symlink_message(root, path.rpartition("/")[0] or "/")
        if refusal is not None:
            return _failed(item, f"{item.uri}: {refusal}; not deleted")
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return _gone(item)   # (a parent became a file: the planned object cannot be there)
        except OSError as exc:
            return _failed(item, f"cannot stat {item.uri}: {errno.errorcode.get(exc.errno or 0, 'EIO')} "
                                 f"({exc.strerror or exc}); not deleted")
        if not stat_mod.S_ISREG(st.st_mode):
            kind = object_type_of(st.st_mode).value
            return _result(item, GcOutcome.CHANGED_SKIPPED,
                           f"{item.uri} is now a {kind}, not the planned regular file; not deleted (Statekeeper never "
                           "deletes or follows non-regular objects)")
        # Same spelling as storage.local._info, so it compares with the etag the index stored.
        etag = f"{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}"
        # The usual case decided without building a datetime per file (the same three comparisons); anything
        # else gets _differences' verdict and message.
        if not (etag == item.etag and st.st_size == item.size
                and int(item.mtime.timestamp()) == st.st_mtime_ns // 1_000_000_000):
            diffs = _differences(item, st.st_size, etag,
                                 datetime.fromtimestamp(st.st_mtime_ns / 1e9, tz=timezone.utc))
            if diffs:
                return _changed(item, diffs)
        try:
            os.unlink(path)
        except FileNotFoundError:
            return _gone(item)
        except OSError as exc:
            return _failed(item, f"cannot delete {item.uri}: {errno.errorcode.get(exc.errno or 0, 'EIO')} "
                                 f"({exc.strerror or exc}); fix the permissions or mount and re-run GC")
        return _result(item, GcOutcome.DELETED, None)

    def remove_empty_chk_dirs(self) -> None:
        for root_uri, directory in sorted(self.touched):
            self._remove_empty_chk_dir(root_uri, directory)

    def _remove_empty_chk_dir(self, root_uri: str, directory: str) -> None:
        """rmdir a `chk-<N>` directory left empty (never recursive, never the root, `shared`, `taskowned` or a
        job directory: only names Flink gives checkpoint directories)."""
        root_path = local_path(root_uri).rstrip("/")
        # <root>/<job>/chk-N: a chk-N directly in the root would be a job directory, not a checkpoint.
        if not directory.startswith(root_path + "/") or os.path.dirname(directory) == root_path:
            return
        if not _CHK_DIR.fullmatch(os.path.basename(directory)) or self.checked.get(directory) is not None:
            return
        try:
            if stat_mod.S_ISLNK(os.lstat(directory).st_mode):
                return
            os.rmdir(directory)
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                log.warning("could not remove the empty checkpoint directory %s: %s (harmless; remove it by hand "
                            "or let the next GC run retry)", directory, exc.strerror or exc)


# -- routing --------------------------------------------------------------------------------------------------


@dataclass
class _Routed:
    refused: list[DeleteResult] = field(default_factory=list)
    local: list[_LocalItem] = field(default_factory=list)
    # (scheme, how the planned version is held) -> uri -> key
    stores: dict[tuple[str, DeleteRecheck], dict[str, _Key]] = field(default_factory=dict)


def configured_recheck(storage: StorageConfig, scheme: str) -> DeleteRecheck:
    """The configured re-check of a canonical object-store scheme (OSS has a setting of its own): `listing` is the
    operator's word that the store is not to be trusted; `precondition` asks for the precondition where the store's
    self-test proves it."""
    return DeleteRecheck(storage.oss_delete_recheck if scheme == "oss" else storage.delete_recheck)


def recheck_mode(storage: StorageConfig, enforcement: Enforcement, root: str) -> DeleteRecheck:
    """How the deletes below the object-store root `root` hold the planned version: PRECONDITION only where the
    configuration allows it and the store's self-test proved that it refuses a delete pinned to another version;
    anything else (ignored, unknown, configured `listing`) re-checks by listing."""
    scheme = root.partition(":")[0]
    if configured_recheck(storage, scheme) is DeleteRecheck.LISTING:
        return DeleteRecheck.LISTING
    return DeleteRecheck.PRECONDITION if enforcement.enforced(root, Guard.CONDITIONAL_DELETE) else DeleteRecheck.LISTING


def deletes_conditionally(scheme: str, mode: DeleteRecheck) -> bool:
    """Whether deletes on a canonical object-store scheme are conditional on the planned version: with
    PRECONDITION, and on GCS and Azure also after a listing re-check (a pinned delete costs nothing more there).
    Such deletes need the plan's version."""
    return scheme in ("gs", "abfss") or mode is DeleteRecheck.PRECONDITION


def _version_problem(scheme: str, etag: str | None) -> str | None:
    if scheme == "gs":
        if not etag:
            return "the plan has no GCS generation for it"
        if not etag.isdigit() or int(etag) <= 0:
            return f"its planned etag {etag!r} is not a GCS generation"
        return None
    if not etag or not etag.strip('"'):
        return "the plan has no Azure ETag for it" if scheme == "abfss" else "the plan has no ETag for it"
    return None


def _container(scheme: str, norm: str) -> str:
    if scheme == "abfss":
        from statekeeper.storage.azure import AzureLocation

        return AzureLocation(norm).base
    return f"{scheme}://{norm.partition('://')[2].partition('/')[0]}"


class Deleter:
    """Delete planned files of one Spark partition. Picklable: clients, pools and locks are created lazily in the
    process that runs it.

    `on_progress(files, bytes, retries)` receives increments (feed them to Spark accumulators): items finished
    with any outcome, bytes actually deleted, and retries (requests or keys retried). It is called from the
    thread iterating `run`, after each request.
    """

    def __init__(self, storage: StorageConfig, roots: Sequence[str], settings: DeleteSettings = DeleteSettings(),
                 on_progress: ProgressCallback | None = None, enforcement: Enforcement | None = None) -> None:
        """`enforcement`: what the stores of the roots were proven to enforce (the run's, proven on the driver);
        None: each store's self-test runs on first use, once for this Deleter."""
        self.storage = storage
        self.roots = list(roots)
        self.settings = settings
        self.on_progress = on_progress
        self.enforcement = enforcement if enforcement is not None else Enforcement(storage)
        self._roots = Roots(self.roots)   # validates now, on the driver, not in every task
        self._reset()

    def _reset(self) -> None:
        self._client: Any = None                 # the FileIO router, made on first use (its clients don't pickle)
        self._stores: dict[str, Any] = {}        # scheme -> backend checked ready
        self._lock = threading.Lock()
        self._throttle = ThrottleLog(log)
        # One pacer for the task: the overall limit (this task's share of --max-deletes-per-second) spans every
        # store; S3 and OSS job prefixes start at this task's share of S3's documented rate (the tasks running at
        # once delete keys of the same prefixes), the others unpaced until throttled.
        s3_rate = S3_WRITES_PER_PREFIX / self.settings.tasks_at_once
        self._pacer = Pacer(PaceSettings(overall=self.settings.max_deletes_per_second),
                            lane_rate=lambda lane: s3_rate if lane.startswith(("s3://", "oss://")) else None)

    def __getstate__(self) -> dict[str, Any]:
        return {"storage": self.storage, "roots": self.roots, "settings": self.settings,
                "on_progress": self.on_progress, "enforcement": self.enforcement}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.storage = state["storage"]
        self.roots = state["roots"]
        self.settings = state["settings"]
        self.on_progress = state["on_progress"]
        self.enforcement = state["enforcement"]
        self._roots = Roots(self.roots)
        self._reset()

    def __repr__(self) -> str:
        return f"Deleter({self.storage!r}, {self.roots!r}, {self.settings!r})"

    def recheck(self, root: str) -> DeleteRecheck:
        """How deletes below the object-store root `root` hold the planned version (recheck_mode)."""
        return recheck_mode(self.storage, self.enforcement, root)

    # -- clients and engines ------------------------------------------------------------------------------

    def _backend(self, scheme: str) -> Any:
        """The FileIO of `scheme` with the clients' own retries off (max_attempts=1): the engine retries, paces and
        counts every retry."""
        found = self._stores.get(scheme)
        if found is None:
            with self._lock:
                found = self._stores.get(scheme)
                if found is None:
                    if self._client is None:
                        from statekeeper.storage.router import RoutingFileIO

                        pool = self.settings.requests_in_flight + 2
                        self._client = RoutingFileIO(self.storage.with_overrides(
                            max_attempts=1, max_pool_connections=max(self.storage.max_pool_connections, pool)))
                    found = self._stores[scheme] = self._client.backend(f"{scheme}://probe/x" if scheme != "abfss"
                                                                        else "abfss://c@a.dfs.core.windows.net/x")
        return found

    def _engine(self, kind: str, in_flight: int, window: int | None = None) -> BulkEngine:
        settings = BulkSettings(in_flight=in_flight, retry=self.settings.retry, pace=self._pacer.settings,
                                window=window)
        return BulkEngine(settings, on_retry=lambda n: self._progress(0, 0, n), throttle_log=self._throttle,
                          name=f"statekeeper-gc-{kind}", pacer=self._pacer)

    def prefix_report(self) -> list[LaneReport]:
        """What each job prefix achieved in this deleter's runs (items, requests, throttling, pace)."""
        return self._pacer.report()

    # -- driver ---------------------------------------------------------------------------------------------

    def run(self, items: Iterable[PlannedDelete]) -> Iterator[DeleteResult]:
        """One result per item, order by order: every item of a lower `delete_order` is re-checked and deleted (or
        skipped) before any item of a higher one is touched."""
        by_order: dict[int, list[PlannedDelete]] = {}
        for item in items:
            by_order.setdefault(item.delete_order, []).append(item)
        for order in sorted(by_order):
            yield from self._run_group(by_order[order])

    def _progress(self, files: int, size: int, retries: int) -> None:
        if self.on_progress is not None and (files or size or retries):
            self.on_progress(files, size, retries)

    def _emit(self, results: list[DeleteResult]) -> list[DeleteResult]:
        sizes, deleted = self._sizes, GcOutcome.DELETED
        self._progress(len(results), sum(sizes.get(r.uri, 0) for r in results if r.outcome is deleted), 0)
        return results

    def _run_group(self, items: list[PlannedDelete]) -> Iterator[DeleteResult]:
        routed = self._route(items)
        self._sizes = {i.uri: i.size for i in items}
        if routed.refused:
            yield from self._emit(routed.refused)
        if routed.local:
            yield from self._run_local(routed.local)
        for (scheme, mode), keys in routed.stores.items():
            if keys:
                yield from self._run_store(scheme, mode, list(keys.values()))

    def _route(self, items: list[PlannedDelete]) -> _Routed:
        routed = _Routed()
        # Canonical roots and their prefixes and containers, so that each URI is normalized once (a plan holds
        # millions, spelled canonically: normalize_uri answers those without taking them apart).
        prefixes = [(root, root.uri.rstrip("/") + "/") for root in self._roots]
        containers = {root.uri: _container(scheme, root.uri) for root in self._roots
                      if (scheme := root.uri.partition(":")[0]) in _BATCH_MAX}
        modes: dict[str, DeleteRecheck] = {}   # per root with items: proven (or looked up) once
        for item in items:
            try:
                norm = normalize_uri(item.uri)
            except ValueError as exc:
                routed.refused.append(_failed(item, f"{item.uri} is not a valid URI ({exc}); not deleted"))
                continue
            root = None
            for candidate, prefix in prefixes:
                if norm.startswith(prefix) or norm == candidate.uri:
                    root = candidate
                    break
            if root is None:
                routed.refused.append(_failed(item, f"{item.uri} lies outside the configured roots "
                                                    f"({', '.join(self._roots.uris)}); not deleted"))
                continue
            scheme = norm.partition(":")[0]
            if norm == root.uri:
                routed.refused.append(_failed(item, f"{item.uri} is the root {root.uri} itself, not a file; not "
                                                    "deleted"))
            elif scheme == "file":
                try:
                    path = local_path(norm)
                except StorageError as exc:
                    routed.refused.append(_failed(item, f"{exc}; not deleted"))
                    continue
                routed.local.append(_LocalItem(item, root, path, _lane_of(root, norm)))
            elif norm != item.uri and scheme == "s3" and item.uri.partition("://")[2] != norm.partition("://")[2]:
                # The key must be the listed one, byte for byte: a spelling that normalizes to another key
                # (`dir/` -> `dir`) would delete an object nobody planned.
                routed.refused.append(_failed(item, f"{item.uri} is not spelled as the index lists S3 objects (it "
                                                    f"would address {norm}); not deleted"))
            elif norm != item.uri and scheme != "s3":
                # Listings spell every object canonically; another spelling (`wasbs://`, `GS://`, a trailing `/`)
                # is not the listed object, so it is refused, not re-spelled and deleted.
                routed.refused.append(_failed(item, f"{item.uri} is not spelled as the index lists objects (it would "
                                                    f"address {norm}); not deleted"))
            elif scheme not in _BATCH_MAX:
                routed.refused.append(_failed(item, f"{item.uri}: no deleter for this URI scheme (file://, s3://, "
                                                    "oss://, gs:// and abfss:// are supported); not deleted"))
            else:
                # S3 (s3a/s3n/s3p) aliases with the listed key are deleted under the canonical spelling, as before.
                mode = modes.get(root.uri)
                if mode is None:
                    mode = modes[root.uri] = self.recheck(root.uri)
                self._add_key(routed, item, norm, scheme, containers[root.uri], root, mode)
        return routed

    @staticmethod
    def _add_key(routed: _Routed, item: PlannedDelete, norm: str, scheme: str, container: str, root: Root,
                 mode: DeleteRecheck) -> None:
        problem = _version_problem(scheme, item.etag) if deletes_conditionally(scheme, mode) else None
        if problem is not None:
            routed.refused.append(_failed(item, f"{item.uri}: {problem}, so the delete cannot be made conditional on "
                                                "the planned version; not deleted (re-index and re-plan)"))
            return
        keys = routed.stores.setdefault((scheme, mode), {})
        found = keys.get(norm)
        if found is None:
            keys[norm] = _Key(norm, [item], container, _lane_of(root, norm))
        else:
            found.items.append(item)

    # -- local ----------------------------------------------------------------------------------------------

    def _run_local(self, items: list[_LocalItem]) -> Iterator[DeleteResult]:
        rate = self.settings.max_deletes_per_second
        # Rate-limited: chunks of a quarter second's worth, so deletes trickle instead of bursting.
        batch = _LOCAL_BATCH if rate is None else max(1, min(_LOCAL_BATCH, int(rate / 4)))
        op = _LocalDeletes(batch)
        engine = self._engine("local", self.settings.local_threads)
        works = (Work(i, i.lane) for i in items)
        for answered in engine.run(op, works):
            yield from self._emit([r for results in answered for r in results])
        op.remove_empty_chk_dirs()

    # -- object stores --------------------------------------------------------------------------------------

    def _run_store(self, scheme: str, mode: DeleteRecheck, keys: list[_Key]) -> Iterator[DeleteResult]:
        try:
            backend = self._backend(scheme)
            if scheme == "abfss":
                from statekeeper.storage.azure import AzureLocation

                for container in sorted({k.container for k in keys}):
                    backend.service(AzureLocation(container))   # one account's credentials, checked once
            elif scheme == "gs":
                backend.client   # noqa: B018 - credentials are checked here, once
        except (StorageError, ValueError) as exc:   # credentials, an account without them
            yield from self._emit([_failed(i, f"cannot delete {i.uri}: {exc}; not deleted")
                                   for k in keys for i in k.items])
            return
        conditional = deletes_conditionally(scheme, mode)
        op = _StoreDeletes(backend, scheme, min(self.settings.batch_size, _BATCH_MAX[scheme]), conditional,
                           rechecked=mode is DeleteRecheck.LISTING, policy=self.settings.retry,
                           throttle_log=self._throttle)
        keys.sort(key=lambda k: k.uri)
        settled: list[DeleteResult] = []
        if mode is DeleteRecheck.LISTING:
            works: Iterator[Work[_Key]] = self._rechecked(backend, keys, settled)
            # Few batches ahead of the listing: on a store that ignores preconditions an object replaced between
            # its re-check and its delete is deleted, so that window stays short.
            engine = self._engine(scheme, self.settings.requests_in_flight, window=2 * op.batch_limit)
        else:
            works = (Work(k, k.lane, k.container) for k in keys)
            engine = self._engine(scheme, self.settings.requests_in_flight)
        for answered in engine.run(op, works):
            if settled:
                yield from self._emit(settled)
                settled.clear()
            yield from self._emit([r for results in answered for r in results])
        if settled:
            yield from self._emit(settled)
        log_report(engine.pacer, "gc deletes", log)

    def _rechecked(self, backend: Any, keys: list[_Key], settled: list[DeleteResult]) -> Iterator[Work[_Key]]:
        """Listing mode: re-check keys a chunk at a time, just ahead of their deletes; what changed or is gone is
        settled here (into `settled`), what still matches the plan goes on to be deleted."""
        lookup = ListingLookup(backend, page_size=self.storage.list_page_size, policy=self.settings.retry,
                               throttle_log=self._throttle, on_retry=lambda n: self._progress(0, 0, n))
        for start in range(0, len(keys), _LISTING_CHUNK):
            chunk = keys[start:start + _LISTING_CHUNK]
            found = lookup.resolve(k.uri for k in chunk)
            for key in chunk:
                verdict = self._verdict(key, found[key.uri])
                if verdict is None:
                    yield Work(key, key.lane, key.container, retries=found[key.uri].retries)
                else:
                    settled.extend(verdict)

    @staticmethod
    def _verdict(key: _Key, seen: Resolved) -> list[DeleteResult] | None:
        """None: the listed object is the planned version (delete it); else the results that settle it."""
        if seen.error is not None:
            return [_failed(i, f"cannot re-check {key.uri} before deleting ({seen.error}); not deleted", seen.retries)
                    for i in key.items]
        info = seen.info
        if info is None:
            return [_gone(i, seen.retries) for i in key.items]
        if info.object_type is not ObjectType.FILE:
            return [_result(i, GcOutcome.CHANGED_SKIPPED, f"{key.uri} is now a directory (hierarchical namespace), "
                                                          "not the planned file; not deleted", seen.retries)
                    for i in key.items]
        changed = [(item, _differences(item, info.size, info.etag, info.mtime)) for item in key.items]
        if all(not diffs for _, diffs in changed):
            return None
        # Two plan rows for one key that disagree: nothing about this object can be trusted.
        return [_changed(item, diffs or ["another plan row for the same key differs"], seen.retries)
                for item, diffs in changed]

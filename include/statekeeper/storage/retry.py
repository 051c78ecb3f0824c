"""When a storage failure is worth another attempt, and how long to wait first: the one judgement every mover uses.

    judge(exc) -> Failure(retriable, throttled, code)       # an exception of boto3, the GCS or Azure client, os
    judge_code(code, status) -> Failure                     # one key's answer inside a batch response
    backoff(attempt, base, cap) -> seconds                  # full jitter
    call(fn, what=..., policy=..., on_retry=...) -> Called  # one request with back-off, retries counted

The GC deleter and the DR mover used to carry three "retriable" sets that disagreed on 408 and 429; this module
replaces them. Retriable: throttling (S3 `SlowDown` and its relatives, HTTP 429, 503), server errors (5xx but 501
and 505), request timeouts (408, `RequestTimeout`), a conditional request that lost a race with another writer
(409 `ConditionalRequestConflict`: the retry is conditional too), no answer at all (connection refused or reset,
timeouts, truncated bodies), and local I/O errors that are not permanent (NFS hiccups). Never retried: access
denied, a missing bucket or container, bad parameters or credentials, a full or read-only disk, and the answers
that mean something (not found, changed, exists): the caller decides on those.

`throttled` marks the failures that mean "the store wants fewer requests" (429, 503, `SlowDown`...): the pacer
(statekeeper.storage.pacing) slows the prefix down on them; other retriable failures only wait and retry.
"""
from __future__ import annotations

import errno
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from statekeeper.errors import ConfigurationError
from statekeeper.storage.errors import (
    ObjectChangedError,
    ObjectExistsError,
    ObjectNotFoundError,
    OutsideRootError,
    StorageConfigError,
    StorageError,
    is_vendor_error,
    vendor_status,
    vendor_transient,
)

log = logging.getLogger("statekeeper.storage.retry")

# Error codes (S3, and GCS/Azure reasons) that mean "fewer requests, please".
THROTTLE_CODES = frozenset({
    "SlowDown", "Throttling", "ThrottlingException", "ThrottledException", "RequestLimitExceeded",
    "RequestThrottled", "TooManyRequestsException", "TooManyRequests", "rateLimitExceeded",
    "userRateLimitExceeded", "ServerBusy",
})
# Other codes that mean "try again": server trouble, a slow request, a clock skew the SDK re-signs, a conditional
# request that raced another writer, and NoSuchUpload (a multipart upload retried after its completion was lost).
TRANSIENT_CODES = frozenset({
    "InternalError", "ServiceUnavailable", "RequestTimeout", "RequestTimeTooSkewed", "ConditionalRequestConflict",
    "OperationTimedOut", "InternalServerError", "backendError", "NoSuchUpload",
})
THROTTLE_STATUS = frozenset({429, 503})
# Local errors that a retry cannot fix.
PERMANENT_ERRNOS = frozenset({
    errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS, errno.EISDIR, errno.ENOTDIR,
    errno.ENAMETOOLONG, errno.ELOOP, errno.EFBIG,
})
_EPISODE_GAP_S = 30.0   # throttling retries closer together than this are one episode (one WARNING)


@dataclass(frozen=True, slots=True)
class Failure:
    """How to treat one failed request or key."""

    retriable: bool
    throttled: bool
    code: str


def retriable_status(status: int | None) -> bool:
    if status is None:
        return False
    return status in (408, 429) or (500 <= status < 600 and status not in (501, 505))


def judge_code(code: str, status: int | None = None) -> Failure:
    """A failure known by its error code and/or HTTP status (a per-key answer of a batch, a ClientError)."""
    code = code or ""
    if not status and code.isdigit():
        status = int(code)   # botocore names a bodyless error (a HEAD) by its status
    throttled = code in THROTTLE_CODES or status in THROTTLE_STATUS
    retriable = throttled or code in TRANSIENT_CODES or retriable_status(status)
    return Failure(retriable, throttled, code or (str(status) if status else "Error"))


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        # `raise ... from None` hides the context on purpose (e.g. the FileNotFoundError behind a
        # not-found error): it must not decide whether to retry.
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)


def _judge_link(link: BaseException) -> Failure | None:
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        NoCredentialsError,
        ParamValidationError,
        PartialCredentialsError,
    )

    if isinstance(link, ClientError):
        return judge_code(link.response.get("Error", {}).get("Code", "") or "",
                          link.response.get("ResponseMetadata", {}).get("HTTPStatusCode"))
    if isinstance(link, (NoCredentialsError, PartialCredentialsError, ParamValidationError)):
        return Failure(False, False, type(link).__name__)
    if isinstance(link, BotoCoreError):
        return Failure(True, False, type(link).__name__)   # connection refused/reset, timeouts, truncated bodies
    status = vendor_status(link)
    if status is not None:
        code = getattr(link, "error_code", None) or ""
        judged = judge_code(str(getattr(code, "value", code)), status)
        return Failure(judged.retriable, judged.throttled, judged.code if code else str(status))
    if vendor_transient(link):
        return Failure(True, False, type(link).__name__)
    if isinstance(link, StorageConfigError):
        return Failure(False, False, type(link).__name__)   # settings or credentials: trying again cannot help
    if isinstance(link, OSError) and link.errno is not None:
        return Failure(link.errno not in PERMANENT_ERRNOS, False, errno.errorcode.get(link.errno, "EIO"))
    if isinstance(link, (ConnectionError, TimeoutError)):
        return Failure(True, False, type(link).__name__)
    return None


def judge(exc: BaseException) -> Failure:
    """Whether trying again may help, for an exception raised by a storage call (or a StorageError raised from
    one: the first cause that can be judged decides)."""
    for link in _chain(exc):
        judged = _judge_link(link)
        if judged is not None:
            return judged
    meaningful = (ConfigurationError, OutsideRootError, ObjectNotFoundError, ObjectChangedError, ObjectExistsError)
    if isinstance(exc, meaningful):
        return Failure(False, False, type(exc).__name__)
    # A storage error with nothing more specific behind it (a short read, a batch answered with the wrong number
    # of answers): retrying is safe, every mover's requests are idempotent or conditional.
    return Failure(isinstance(exc, StorageError), False, type(exc).__name__)


def is_storage_failure(exc: BaseException) -> bool:
    """An exception a storage call may raise for a storage reason (as opposed to a programming error)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from statekeeper.errors import StatekeeperError

    return isinstance(exc, (StatekeeperError, ClientError, BotoCoreError, OSError)) or is_vendor_error(exc)


def backoff(attempt: int, base: float, cap: float) -> float:
    """Seconds to wait before retry number `attempt` (1, 2, ...): full jitter, uniform in
    [0, min(cap, base * 2^(attempt-1))], so tasks that failed together spread out instead of retrying in lockstep."""
    return random.uniform(0, min(cap, base * (2 ** max(0, attempt - 1))))


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 8
    backoff_base: float = 0.2    # seconds
    backoff_max: float = 20.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.backoff_base < 0 or self.backoff_max < 0:
            raise ValueError(f"RetryPolicy: max_attempts must be >= 1 and the back-off >= 0, got {self}")

    def delay(self, attempt: int) -> float:
        return backoff(attempt, self.backoff_base, self.backoff_max)


class ThrottleLog:
    """One WARNING per episode of retries (retries with no gap longer than 30 s between them), not one per key or
    request: requests in flight keep succeeding in between, so a success cannot end an episode."""

    def __init__(self, logger: logging.Logger = log) -> None:
        self._log = logger
        self._lock = threading.Lock()
        self._last: float | None = None
        self.episodes = 0

    def hit(self, what: str, reason: str, delay: float) -> None:
        now = time.monotonic()
        with self._lock:
            new = self._last is None or now - self._last > _EPISODE_GAP_S
            self._last = now
            if new:
                self.episodes += 1
        if new:
            self._log.warning("the object store is throttling or unreachable (%s on %s); backing off with jitter (first "
                              "delay %.2fs) and retrying up to max_attempts per request; further retries in this "
                              "episode are not logged", reason, what, delay)


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Called(Generic[T]):
    """The result of `call`: the value, or the error (its text, and how it was judged), and the retries spent."""

    value: T | None
    retries: int
    error: str | None = None
    failure: Failure | None = None


def call(fn: Callable[[], T], *, what: str, policy: RetryPolicy, throttle_log: ThrottleLog | None = None,
         on_throttle: Callable[[], None] | None = None) -> Called[T]:
    """Run one request with back-off: retriable failures are retried up to `policy.max_attempts` attempts; the
    last error is returned, not raised. Exceptions that are not storage failures (programming errors) propagate."""
    attempt = 1
    while True:
        try:
            return Called(fn(), attempt - 1)
        except Exception as exc:  # noqa: BLE001 - judged below
            if not is_storage_failure(exc):
                raise
            failure = judge(exc)
            if not failure.retriable or attempt >= policy.max_attempts:
                suffix = f" after {attempt} attempt(s)" if failure.retriable else ""
                return Called(None, attempt - 1, f"{failure.code}: {exc}{suffix}", failure)
            if failure.throttled and on_throttle is not None:
                on_throttle()
            delay = policy.delay(attempt)
            if throttle_log is not None:
                throttle_log.hit(what, failure.code, delay)
            time.sleep(delay)
            attempt += 1

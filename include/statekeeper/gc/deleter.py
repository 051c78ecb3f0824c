"""Re-check and delete one partition's planned files. (Interface; implementation in progress.)"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from statekeeper.tables.vocabulary import GcOutcome


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

"""A garbage-collection run's options: the grace period, the retention policy, the deletion limits.

Defaults are the safe ones: plan only, a 3-day grace period, expire nothing, never a savepoint.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from statekeeper import units
from statekeeper.defaults import GC_GRACE
from statekeeper.errors import ConfigurationError
from statekeeper.gc.deleter import DeleteSettings
from statekeeper.tables.vocabulary import GcMode
from statekeeper.units import format_duration

# Iceberg's procedure refuses < 24 h; a Flink checkpoint's files are uploaded before its `_metadata`
# exists, for up to the checkpoint timeout (10 min by default): an hour leaves a margin over that.
MIN_GRACE = timedelta(hours=1)


class GcOptionsError(ConfigurationError, ValueError):
    """A contradictory or unsafe option (exit 2): the message says which and what to pass instead."""


def parse_duration(text: str, what: str = "duration") -> timedelta:
    """A GC duration option (statekeeper.units.parse_duration), refused as GcOptionsError."""
    return units.parse_duration(text, what, GcOptionsError)


@dataclass(frozen=True)
class RetentionPolicy:
    """Which retained snapshots may be expired, per job directory. The default expires nothing.

    The newest checkpoint of a job is never expired, nor any snapshot younger than the grace period.
    """

    retain_last: int | None = None                 # keep the newest N checkpoints of every job
    inactive_after: timedelta | None = None        # a job whose newest checkpoint is older than this ...
    inactive_retain: int = 1                       # ... keeps only its newest K
    expire_savepoints_older_than: timedelta | None = None  # None: savepoints are never expired

    @property
    def expires_anything(self) -> bool:
        return (self.retain_last is not None or self.inactive_after is not None
                or self.expire_savepoints_older_than is not None)

    def check(self) -> None:
        if self.retain_last is not None and self.retain_last < 1:
            raise GcOptionsError(f"--retain-last {self.retain_last}: a job's newest checkpoint is always kept; "
                                 "pass 1 or more")
        if self.inactive_retain < 1:
            raise GcOptionsError(f"--inactive-retain {self.inactive_retain}: a job's newest checkpoint is always "
                                 "kept; pass 1 or more")
        for name, value in (("--inactive-after", self.inactive_after),
                            ("--expire-savepoints-older-than", self.expire_savepoints_older_than)):
            if value is not None and value <= timedelta(0):
                raise GcOptionsError(f"{name} must be a positive duration")


@dataclass(frozen=True)
class GcOptions:
    mode: GcMode = GcMode.PLAN
    plan_run_id: str | None = None                 # GcMode.EXECUTE: the persisted plan to execute
    older_than: timedelta = GC_GRACE
    allow_short_grace: bool = False
    policy: RetentionPolicy = field(default_factory=RetentionPolicy)
    max_deletes_per_second: float | None = None    # for the whole run, shared by its tasks
    index_not_before: datetime | None = None       # refuse an index run that finished before this
    delete: DeleteSettings = field(default_factory=DeleteSettings)
    # Ownerless job directories (data files, no snapshot: docs/gc.md "Which roots a GC run must be
    # given") are never swept unless one of these says their users cannot be elsewhere.
    roots_complete: bool = False                   # the roots are every root any job may restore from
    ownerless_older_than: timedelta | None = None  # or: the directory's newest object is older than this
    # Aliases of s3:// accepted in stored paths (s3a, s3n, s3p): Iceberg's equal_schemes. Nothing else
    # can be accepted: Azure's spellings of one container never block, and oss://, gs:// and s3:// are
    # different stores whose references cannot match each other's listings.
    equal_schemes: tuple[str, ...] = ()

    def check(self) -> None:
        if self.mode is GcMode.EXECUTE and not self.plan_run_id:
            raise GcOptionsError("execute mode needs the run id of the plan to execute (--execute RUN_ID)")
        if self.mode is not GcMode.EXECUTE and self.plan_run_id:
            raise GcOptionsError("a plan run id is only taken in execute mode")
        if self.older_than <= timedelta(0):
            raise GcOptionsError("--older-than must be a positive duration")
        if self.older_than < MIN_GRACE and not self.allow_short_grace:
            raise GcOptionsError(
                f"--older-than {format_duration(self.older_than)} is below {format_duration(MIN_GRACE)}: files of a "
                "checkpoint in progress are uploaded before its _metadata exists, so a short grace period can delete "
                "live files. Pass --allow-short-grace only for tests or when no job writes to the roots")
        if self.max_deletes_per_second is not None and self.max_deletes_per_second <= 0:
            raise GcOptionsError("--max-deletes-per-second must be positive")
        if self.index_not_before is not None and self.index_not_before.tzinfo is None:
            raise GcOptionsError("--index-not-before needs a timezone (e.g. 2026-11-23T02:00:00+00:00)")
        if self.ownerless_older_than is not None and self.ownerless_older_than <= self.older_than:
            raise GcOptionsError(
                f"--ownerless-older-than {format_duration(self.ownerless_older_than)} must be longer than the grace "
                f"period (--older-than {format_duration(self.older_than)}): it is for job directories nothing "
                "under the roots owns, whose users may be in a root this run cannot see. Pass a duration far beyond "
                "the longest a job may run on a restored checkpoint (e.g. 90d), or --roots-complete if the roots are "
                "every root any job may restore from")
        self.policy.check()
        self.schemes()

    def schemes(self) -> tuple[str, ...]:
        """`equal_schemes` normalized (lower case, no `://`); GcOptionsError for anything but an S3 alias."""
        from statekeeper.gc.guards import check_equal_schemes

        try:
            return check_equal_schemes(self.equal_schemes)
        except ValueError as exc:
            raise GcOptionsError(str(exc)) from None

    @property
    def grace_seconds(self) -> float:
        """The grace period as gc_runs.grace_seconds records it."""
        return self.older_than.total_seconds()

    def to_json(self) -> str:
        """The options as recorded in gc_runs.options (durations in seconds). The accepted scheme
        aliases are left out, as they always were: the column keeps its keys, and a spelling that
        blocked a run is named in its `blocked` column."""
        def plain(value: Any) -> Any:
            if isinstance(value, timedelta):
                return value.total_seconds()
            if isinstance(value, datetime):
                return value.isoformat()
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            return value

        recorded = asdict(self)
        del recorded["equal_schemes"]
        return json.dumps(plain(recorded), sort_keys=True, default=str)

"""What an index run is asked to do. Pure values; checked before anything starts."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from statekeeper.errors import ConfigurationError


class IndexOptionsError(ConfigurationError, ValueError):
    """The index run's options are missing or contradictory."""


@dataclass(frozen=True)
class IndexOptions:
    roots: tuple[str, ...] = ()                   # checkpoint or savepoint base directories
    parallelism: int | None = None                # Spark tasks (None: one per core)
    job_filter: str | None = None                 # glob on the job directory name
    allow_empty_root: bool = False                # an s3:// root with no object under it is indexed as empty
    data_interval_start: datetime | None = None   # the scheduler's data interval, recorded in index_runs
    data_interval_end: datetime | None = None

    def check(self) -> None:
        if not self.roots:
            raise IndexOptionsError("no roots given")
        if self.parallelism is not None and self.parallelism < 1:
            raise IndexOptionsError("parallelism must be >= 1")

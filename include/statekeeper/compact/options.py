"""What a compaction run is asked to do. Pure values; every check that needs no storage happens here."""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from statekeeper.compact.plan import Placement
from statekeeper.defaults import COMPACT_MAX_METADATA_SIZE
from statekeeper.errors import ConfigurationError


class CompactOptionsError(ConfigurationError):
    """The compaction's options are contradictory or unsafe."""


class CompactMode(StrEnum):
    COMPACT = "compact"                          # write the new files and the verified `_metadata`
    DRY_RUN = "dry_run"                          # parse and plan: what would move, nothing written


@dataclass(frozen=True)
class CompactOptions:
    mode: CompactMode = CompactMode.COMPACT
    placement: Placement = Placement.NEW_DIRECTORY
    snapshots: tuple[str, ...] = ()          # explicit `_metadata` URIs; empty: select by size
    max_metadata_size: int = COMPACT_MAX_METADATA_SIZE   # select a `_metadata` larger than this ...
    max_inline_ratio: float | None = None    # ... or whose inline share is at least this (and >= 1 MiB)
    min_bytes: int = 1024                    # payloads smaller than this stay inline
    job_filter: str | None = None
    quiet_period: timedelta = timedelta(hours=1)   # in place: no object of the job newer than this
    report_rows: int = 50

    def check(self) -> None:
        if self.min_bytes < 0:
            raise CompactOptionsError(f"--min-bytes must be >= 0, got {self.min_bytes}")
        if self.max_metadata_size < 0:
            raise CompactOptionsError(f"--max-metadata-size must be >= 0, got {self.max_metadata_size}")
        if self.max_inline_ratio is not None and not 0 < self.max_inline_ratio <= 1:
            raise CompactOptionsError(f"--max-inline-ratio must be in (0, 1], got {self.max_inline_ratio}")
        if self.quiet_period < timedelta(minutes=10):
            raise CompactOptionsError("--quiet-period under 10m is refused: a running job checkpoints less often "
                                      "than that only when it is stuck, and --in-place must never touch one")

    def to_json(self) -> str:
        return json.dumps({
            "mode": self.mode.value, "placement": self.placement.value, "snapshots": list(self.snapshots),
            "max_metadata_size": self.max_metadata_size, "max_inline_ratio": self.max_inline_ratio,
            "min_bytes": self.min_bytes, "job_filter": self.job_filter,
            "quiet_period_s": self.quiet_period.total_seconds(),
        }, sort_keys=True)


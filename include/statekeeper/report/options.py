"""What a report run is asked to do. Pure values."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta


@dataclass(frozen=True)
class Limits:
    """How much of each view a page shows (the rest is in the totals)."""
    storage: int = 40
    edges: int = 60
    health: int = 200
    metadata_jobs: int = 8
    metadata_points: int = 120
    operators: int = 15
    trend_runs: int = 30
    idle_jobs: int = 40
    dr_lags: int = 24          # per job: the last N copies' lags in its RPO trend


@dataclass(frozen=True)
class ReportOptions:
    out: str | None = None                          # also write the page to this local directory
    limits: Limits = field(default_factory=Limits)
    # Job directories with no checkpoint newer than this are listed as idle (statekeeper.inspect.idle).
    inactive_after: timedelta = timedelta(days=7)

    def check(self) -> None:
        """Nothing else to refuse: every value is a choice of what to show."""
        if self.inactive_after <= timedelta(0):
            from statekeeper.errors import ConfigurationError

            raise ConfigurationError(f"--inactive-after must be positive, not {self.inactive_after}")

"""What a report run is asked to do. Pure values."""
from __future__ import annotations

from dataclasses import dataclass, field


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


@dataclass(frozen=True)
class ReportOptions:
    out: str | None = None                          # also write the page to this local directory
    limits: Limits = field(default_factory=Limits)

    def check(self) -> None:
        """Nothing to refuse: every value is a choice of what to show."""

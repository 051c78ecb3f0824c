"""What a warehouse maintenance run is asked to do. Pure values; checked before anything starts."""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta

from statekeeper.defaults import WAREHOUSE_RETENTION
from statekeeper.tables.errors import MaintenanceOptionsError
from statekeeper.tables.vocabulary import MaintenanceMode


@dataclass(frozen=True)
class MaintainOptions:
    retention: timedelta = WAREHOUSE_RETENTION   # vacuum keeps files removed within it (whole hours)
    dry_run: bool = False                        # report what would be compacted and vacuumed; change nothing

    @property
    def mode(self) -> MaintenanceMode:
        return MaintenanceMode.DRY_RUN if self.dry_run else MaintenanceMode.MAINTAIN

    def check(self) -> None:
        if self.retention < timedelta(0):
            raise MaintenanceOptionsError(f"--warehouse-retention {self.retention} is negative: vacuum keeps files "
                                          "removed within it; pass 0 or more")

    def to_json(self) -> str:
        return json.dumps({"retention_s": self.retention.total_seconds(), "dry_run": self.dry_run}, sort_keys=True)

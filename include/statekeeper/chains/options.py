"""What a chains run is asked to do. Pure values; checked before anything starts."""
from __future__ import annotations

from dataclasses import dataclass

from statekeeper.errors import ConfigurationError


class ChainsOptionsError(ConfigurationError, ValueError):
    """The chains run's options are out of range."""


@dataclass(frozen=True)
class ChainsOptions:
    max_depth: int = 64     # fail if restore lineage is deeper than this many levels

    def check(self) -> None:
        if self.max_depth < 1:
            raise ChainsOptionsError("max_depth must be >= 1")

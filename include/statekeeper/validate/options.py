"""What a validation run is asked to do. Pure values; checked before anything starts."""
from __future__ import annotations

from dataclasses import dataclass

from statekeeper.errors import ConfigurationError


class ValidateOptionsError(ConfigurationError, ValueError):
    """The validation run's options are out of range."""


@dataclass(frozen=True)
class ValidateOptions:
    roots: tuple[str, ...] = ()     # where referenced files outside the indexed roots may be stat'ed
    quality_suite: bool = True      # run the Great Expectations suite over the index tables
    stat_threads: int = 8           # concurrent stat requests per Spark task

    def check(self) -> None:
        if self.stat_threads < 1:
            raise ValidateOptionsError("stat_threads must be >= 1")

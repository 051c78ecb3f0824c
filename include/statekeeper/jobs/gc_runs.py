"""The per-directory records of a GC run (`gc_runs.ownerless`, `gc_runs.claimable`, `gc_runs.forst`): written by the GC job,
read back by it and by the report. One definition here, so the column and its two readers cannot drift
(the job packages import no other job package)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from statekeeper.tables.vocabulary import OwnerlessVerdict


@dataclass(frozen=True)
class OwnerlessDir:
    """A job directory with data files and no snapshot under the run's roots (statekeeper.gc.plan):
    the files and bytes the sweep found unreferenced in it, and whether they were held back. A job in a
    root the run was not given may still use its files."""

    root: str
    job_dir: str
    files: int
    bytes: int
    verdict: OwnerlessVerdict

    @property
    def held_back(self) -> bool:
        return self.verdict is OwnerlessVerdict.HELD_BACK

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> OwnerlessDir:
        """One element of `gc_runs.ownerless` as stored."""
        return cls(row["root"], row["job_dir"], int(row["files"]), int(row["bytes"] or 0),
                   OwnerlessVerdict(row["verdict"]))


@dataclass(frozen=True)
class ClaimableTail(OwnerlessDir):
    """A job's tail (statekeeper.gc.plan, "Claimable tails"): its unreferenced files written after its newest
    retained checkpoint that no failed checkpoint explains, and whether they were held back. A job in a root
    the run was not given may have restored (CLAIM) from a newer checkpoint of this job that is gone now."""


@dataclass(frozen=True)
class ForstJob:
    """A job directory's ForSt databases (statekeeper.gc.forst): how many, how many can no longer be
    written, their bytes; the unreferenced files of the dead ones the run reclaims (before the ownerless
    rule), and those of the others, left alone as possibly live."""

    root: str
    job_dir: str
    databases: int
    dead_databases: int
    bytes: int
    dead_files: int
    dead_bytes: int
    unjudged_files: int
    unjudged_bytes: int

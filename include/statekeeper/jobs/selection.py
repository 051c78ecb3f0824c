"""What the action jobs (compaction, DR copy) select snapshots by: validation's verdict on each snapshot,
the snapshots named with `--snapshot`, and the job-directory filter.

Spark column logic over the pinned tables; only the explicit check collects (a handful of rows).
A snapshot validation calls broken is never acted on: `restorable` is the only way in.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from statekeeper.tables.vocabulary import Check, SnapshotStatus


def verdicts(results: Any) -> Any:
    """(snapshot_uri, restorable): validation's verdict on each snapshot it looked at (`validation_results`'
    `snapshot` rows)."""
    from pyspark.sql import functions as F

    return results.where(F.col("check") == Check.SNAPSHOT.value).select("snapshot_uri", "restorable")


def job_dir_matches(glob: str) -> Any:
    """A Spark condition: the row's `job_dir` matches the shell-style `glob` (`--job-filter`)."""
    from pyspark.sql import functions as F

    return F.col("job_dir").rlike(fnmatch.translate(glob))


def job_dir_matched(glob: str, job_dir: str) -> bool:
    """`job_dir_matches` on the driver: the same pattern, so both sides agree on every name."""
    return re.match(fnmatch.translate(glob), job_dir) is not None


class Verdict(StrEnum):
    """What the index and validation say about a snapshot named with `--snapshot`."""

    RESTORABLE = "restorable"          # indexed, parsed, and validation found it restorable
    NOT_VALIDATED = "not_validated"    # indexed and parsed; validation has not looked at it
    UNRESTORABLE = "unrestorable"      # validation found missing or short files
    UNPARSED = "unparsed"              # its `_metadata` did not parse (status other than ok)
    NOT_INDEXED = "not_indexed"        # no snapshot of the index has this URI


@dataclass(frozen=True)
class ExplicitSnapshot:
    """One `--snapshot`: its verdict and, when indexed, its row's status, parse error and job directory."""

    uri: str
    verdict: Verdict
    status: str | None = None
    error: str | None = None
    job_dir: str | None = None

    def refusal(self, verb: str, error_chars: int) -> str | None:
        """Why the snapshot cannot be `verb` ("compacted", "copied"), or None when validation found it
        restorable. NOT_VALIDATED is refused too: a caller that accepts it asks before calling."""
        if self.verdict is Verdict.RESTORABLE:
            return None
        if self.verdict is Verdict.NOT_INDEXED:
            return (f"--snapshot {self.uri} is not in the index: is it below an indexed root? Run index_checkpoints "
                    "(and validate_checkpoints) first")
        if self.verdict is Verdict.UNPARSED:
            # The codec's message starts with the URI named just before: drop it, so the characters shown
            # are what is wrong (the version of an unknown-version file, the offset of a corrupt one).
            error = (self.error or "").replace(self.uri + " ", "")
            return (f"--snapshot {self.uri} cannot be {verb}: its _metadata is {self.status} "
                    f"({error[:error_chars]}); nothing was written")
        if self.verdict is Verdict.NOT_VALIDATED:
            return f"--snapshot {self.uri} is not validated yet: run validate_checkpoints first"
        return (f"--snapshot {self.uri} does not restore according to validation (validation_results names the "
                "missing or short files); nothing was written")


def explicit_snapshots(snapshots: Any, results: Any, uris: list[str]) -> list[ExplicitSnapshot]:
    """The verdict on each of `uris` (canonical `_metadata` URIs), in their order: a few rows of the
    pinned `snapshots` and `validation_results`, collected on the driver."""
    from pyspark.sql import functions as F

    rows = {r["uri"]: r for r in snapshots.where(F.col("uri").isin(uris))
            .select("uri", "status", "error", "job_dir").collect()}
    found = {r["snapshot_uri"]: r["restorable"] for r in verdicts(results)
             .where(F.col("snapshot_uri").isin(uris)).collect()}
    out = []
    for uri in uris:
        row = rows.get(uri)
        if row is None:
            out.append(ExplicitSnapshot(uri, Verdict.NOT_INDEXED))
            continue
        if row["status"] != SnapshotStatus.OK.value:
            verdict = Verdict.UNPARSED
        elif uri not in found:
            verdict = Verdict.NOT_VALIDATED
        else:
            verdict = Verdict.RESTORABLE if found[uri] else Verdict.UNRESTORABLE
        out.append(ExplicitSnapshot(uri, verdict, row["status"], row["error"], row["job_dir"]))
    return out

"""The integrity checks: names, severities, and the pure rule that turns one referenced file's
evidence into findings (run inside Spark tasks on the rows that need it). The other checks are worded
by SQL expressions (statekeeper.validate.wording).

Checks (docs/chains-and-validation.md; names: statekeeper.tables.vocabulary.Check, severities: .Severity):

* ``metadata_parses``   error   - `_metadata` could not be read or parsed (message from the codec);
* ``file_exists``       error   - an absolutely referenced file (tag 2/15) is not in the listing;
* ``relative_resolves`` error   - a relative handle (tag 6) names no file beside `_metadata`
                                  (FLINK-39964 after a CLAIM restore of a native savepoint);
* ``file_size``         error   - the file is shorter than the handle says (size, or the end of a
                                  segment: start + length);
* ``file_unverifiable`` error   - the file lies outside every indexed root and outside every
                                  configured root, or stat failed: existence is unknown, so the
                                  snapshot is not considered restorable (fail closed);
* ``cross_directory``   warning - the snapshot uses files in another job's directory, a savepoint or
                                  outside the roots (a dependency to keep, not damage);
* ``snapshot``          summary - one row per snapshot: worst severity, files checked, restorable.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from statekeeper.tables.vocabulary import Check, Severity

SEVERITY_RANK = {Severity.OK: 0, Severity.WARNING: 1, Severity.ERROR: 2}

# How a file outside the index's listing was looked at (statekeeper.validate.stat).
STAT_FOUND = "found"
STAT_MISSING = "missing"
STAT_OUTSIDE = "outside_roots"
STAT_UNREADABLE = "unreadable"


@dataclass(frozen=True, slots=True)
class FileEvidence:
    snapshot_uri: str
    file_uri: str
    indexed_root: bool              # the file lies under a root the index listed
    listed_size: int | None         # its size in `files`, None when the listing does not have it
    stat_status: str | None         # for files outside indexed roots: STAT_*
    stat_size: int | None
    stat_error: str | None
    extent: int | None              # largest stated size / segment end
    segmented: bool
    relative: bool
    relative_name: str | None


@dataclass(frozen=True, slots=True)
class Finding:
    snapshot_uri: str
    check: str
    severity: str
    subject: str
    detail: str
    bytes: int | None


def file_findings(e: FileEvidence) -> list[Finding]:
    """Findings for one (snapshot, referenced file); empty when the file is present and long enough."""
    if e.indexed_root:
        exists, size = e.listed_size is not None, e.listed_size
    elif e.stat_status == STAT_FOUND:
        exists, size = True, e.stat_size
    elif e.stat_status == STAT_MISSING:
        exists, size = False, None
    elif e.stat_status == STAT_UNREADABLE:
        return [Finding(e.snapshot_uri, Check.FILE_UNVERIFIABLE, Severity.ERROR, e.file_uri,
                        f"{e.file_uri} lies outside the indexed roots and could not be looked at: "
                        f"{e.stat_error or 'unknown error'}", e.extent)]
    else:
        return [Finding(e.snapshot_uri, Check.FILE_UNVERIFIABLE, Severity.ERROR, e.file_uri,
                        f"{e.file_uri} lies outside every indexed and configured root, so its existence cannot be "
                        "verified; add its location to --roots (or index it) to check it", e.extent)]
    stated = "" if e.extent is None else f" ({e.extent} bytes stated)"
    if not exists:
        if e.relative:
            return [Finding(e.snapshot_uri, Check.RELATIVE_RESOLVES, Severity.ERROR, e.file_uri,
                            f"relative handle {e.relative_name!r}{stated} does not resolve: no {e.file_uri} beside "
                            "_metadata", e.extent)]
        return [Finding(e.snapshot_uri, Check.FILE_EXISTS, Severity.ERROR, e.file_uri,
                        f"referenced file {e.file_uri}{stated} does not exist", e.extent)]
    if e.extent is not None and size is not None and size < e.extent:
        if e.segmented:
            detail = f"{e.file_uri} has {size} bytes but a segment of it ends at byte {e.extent}"
        else:
            detail = f"{e.file_uri} has {size} bytes, shorter than the {e.extent} bytes its handle states"
        return [Finding(e.snapshot_uri, Check.FILE_SIZE, Severity.ERROR, e.file_uri, detail, e.extent)]
    return []


EVIDENCE_COLUMNS = ("snapshot_uri", "file_uri", "indexed_root", "listed_size", "stat_status", "stat_size",
                    "stat_error", "extent", "segmented", "relative", "relative_name")
FINDING_SCHEMA = pa.schema([
    pa.field("snapshot_uri", pa.string()), pa.field("check", pa.string()), pa.field("severity", pa.string()),
    pa.field("subject", pa.string()), pa.field("detail", pa.string()), pa.field("bytes", pa.int64()),
])


def findings_batches(batches: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
    """mapInArrow: evidence rows (EVIDENCE_COLUMNS) -> finding rows (FINDING_SCHEMA)."""
    for batch in batches:
        if not batch.num_rows:
            continue
        cols = [batch.column(n).to_pylist() for n in EVIDENCE_COLUMNS]
        out: list[Finding] = []
        for values in zip(*cols, strict=True):
            out.extend(file_findings(FileEvidence(*values)))
        if out:
            yield pa.RecordBatch.from_arrays(
                [pa.array([getattr(f, n) for f in out], t.type) for n, t in zip(FINDING_SCHEMA.names, FINDING_SCHEMA,
                                                                                  strict=True)],
                schema=FINDING_SCHEMA)


def worst(severities: Iterable[str]) -> str:
    return max(severities, key=SEVERITY_RANK.__getitem__, default=Severity.OK)

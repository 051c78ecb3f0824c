"""Classify objects under a root by Flink's directory layout (format spec §6, §10, §11).

Pure functions of a path relative to its root. The layout says where a file *sits*, which is a hint
about ownership, never proof of liveness: only the `_metadata` files decide what is referenced.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from statekeeper.tables.vocabulary import FileKind

METADATA_NAME = "_metadata"
_INPROGRESS_PREFIX = "._metadata.inprogress."
JOB_ID_PATTERN = r"^[0-9a-f]{32}$"   # a job directory's name: the job id, 32 lowercase hex
_JOB_ID = re.compile(JOB_ID_PATTERN)
_CHK_NAME = r"chk-(\d+)"
_CHK = re.compile(rf"^{_CHK_NAME}$")
_SHARED = "shared"
_TASKOWNED = "taskowned"
# The first path segment below a root that Flink's flat layout puts there (no job-id level); Spark code
# matches the same names with rlike.
FLAT_DIR_PATTERN = rf"^(?:{_CHK_NAME}|{_SHARED}|{_TASKOWNED})$"
_FLAT_DIR = re.compile(FLAT_DIR_PATTERN)
# Statekeeper's compaction results: `compacted/<snapshot dir name>/` beside the source snapshot directory
# (statekeeper.compact.plan), a self-contained snapshot directory like a savepoint.
_COMPACTED = "compacted"
# savepoint-<first 6 chars of the job id>-<12 random hex> (AbstractFsCheckpointStorageAccess).
SAVEPOINT_DIR_PATTERN = r"^savepoint-([0-9a-f]{6})-([0-9a-f]{12})$"
_SAVEPOINT_DIR = re.compile(SAVEPOINT_DIR_PATTERN)
# FLIP-306 managed directories (FileMergingSnapshotManagerBase).
_FM_SHARED = re.compile(r"^job_[A-Za-z0-9_-]+_op_[A-Za-z0-9_-]+$")
_FM_TASKOWNED = re.compile(r"^job_[A-Za-z0-9_-]+_tm_.+$")
# ForSt (2.x) database with primary-dir=checkpoint-dir: shared/op_<id>_attempt_<n>/db/... (statekeeper.layout.forst)
_FORST_DB = re.compile(r"^op_.+_attempt_\d+$")
# Changelog state backend (1.16+): <dstl base path>/<job id>/dstl/<uuid> (StateChangeFsUploader). With the base
# path at the checkpoint root these are a job directory's own files; under a root of their own, a job
# directory that holds only them.
_DSTL = "dstl"


class LocationKind(StrEnum):
    """What a root's child directory is (a classification, not a column value)."""

    JOB = "job"                    # <32-hex job id>/
    SAVEPOINT = "savepoint"        # savepoint-<job6>-<hex12>/
    FLAT_CHECKPOINT = "flat"       # chk-N/, shared/, taskowned/ directly in the root (create-subdir=false)
    ROOT_FILES = "root_files"      # objects directly inside the root
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Location:
    kind: FileKind
    job_dir: str | None            # first path segment below the root; None for root-level objects
    job_id: str | None             # full job id when the path carries one
    checkpoint_id: int | None      # from chk-N
    savepoint_job_prefix: str | None = None  # the 6 job-id characters in a savepoint dir name


def is_flat_checkpoint_dir(name: str) -> bool:
    """`chk-N`, `shared` or `taskowned`: a checkpoint directory written directly in the root, without
    a job-id level (create-subdir=false). The one definition of Flink's flat layout."""
    return bool(_FLAT_DIR.match(name))


def checkpoint_id_of(name: str) -> int | None:
    """N of a `chk-N` directory name; None for any other name."""
    m = _CHK.match(name)
    return int(m.group(1)) if m else None


def checkpoint_dirs(job_location: str, child_dirs: Iterable[str]) -> list[tuple[int, str]]:
    """(checkpoint id, directory URI without a trailing slash) of the `chk-N` directories among `child_dirs`
    (a delimited listing of the job directory `job_location`), newest first. Anything else (shared/,
    taskowned/, a stray directory, an entry not directly inside the job directory) is not a checkpoint."""
    base = job_location.rstrip("/")
    out = []
    for uri in child_dirs:
        uri = uri.rstrip("/")
        head, _, name = uri.rpartition("/")
        checkpoint_id = checkpoint_id_of(name)
        if checkpoint_id is not None and head == base:
            out.append((checkpoint_id, uri))
    return sorted(out, reverse=True)


def classify_child(name: str | None) -> LocationKind:
    """Kind of a root's child directory (`None` = the root's own files)."""
    if name is None:
        return LocationKind.ROOT_FILES
    if _JOB_ID.match(name):
        return LocationKind.JOB
    if _SAVEPOINT_DIR.match(name):
        return LocationKind.SAVEPOINT
    if is_flat_checkpoint_dir(name):
        return LocationKind.FLAT_CHECKPOINT
    return LocationKind.OTHER


def classify(relative_path: str) -> Location:
    """Classify an object by its path below its root (no leading slash)."""
    segs = [s for s in relative_path.split("/") if s]
    if not segs:
        raise ValueError("empty relative path")
    name = segs[-1]
    if len(segs) == 1:
        kind = FileKind.SAVEPOINT_METADATA if name == METADATA_NAME else (
            FileKind.INPROGRESS_METADATA if name.startswith(_INPROGRESS_PREFIX) else FileKind.UNKNOWN)
        return Location(kind, None, None, None)

    top = segs[0]
    if _JOB_ID.match(top):
        kind, chk = _checkpoint_layout(segs[1:])
        return Location(kind, top, top, chk)
    sp = _SAVEPOINT_DIR.match(top)
    if sp:
        if len(segs) == 2 and name == METADATA_NAME:
            kind = FileKind.SAVEPOINT_METADATA
        elif len(segs) == 2 and name.startswith(_INPROGRESS_PREFIX):
            kind = FileKind.INPROGRESS_METADATA
        else:
            kind = FileKind.SAVEPOINT_DATA
        return Location(kind, top, None, None, sp.group(1))
    if is_flat_checkpoint_dir(top):
        kind, chk = _checkpoint_layout(segs)
        return Location(kind, top, None, chk)
    if top == _COMPACTED and len(segs) == 3:
        return Location(_compacted(name), top, None, None)
    return Location(_loose_metadata(name), top, None, None)


def _checkpoint_layout(segs: list[str]) -> tuple[FileKind, int | None]:
    """Kind of a path inside a job directory (segs start below `<job-id>/`)."""
    name = segs[-1]
    head = segs[0]
    chk = _CHK.match(head)
    if chk:
        checkpoint_id = int(chk.group(1))
        if len(segs) == 2:
            if name == METADATA_NAME:
                return FileKind.CHECKPOINT_METADATA, checkpoint_id
            if name.startswith(_INPROGRESS_PREFIX):
                return FileKind.INPROGRESS_METADATA, checkpoint_id
            return FileKind.EXCLUSIVE, checkpoint_id
        return FileKind.UNKNOWN, checkpoint_id
    if len(segs) == 1:
        return _loose_metadata(name), None
    if head == _COMPACTED and len(segs) == 3:
        return _compacted(name), None
    if head == _SHARED:
        if len(segs) == 2:
            return FileKind.SHARED, None
        if _FM_SHARED.match(segs[1]):
            return FileKind.FILE_MERGING_MANAGED, None
        if _FORST_DB.match(segs[1]):
            return FileKind.FORST_WORKING, None
        return FileKind.UNKNOWN, None
    if head == _DSTL and len(segs) == 2 and name != METADATA_NAME and not name.startswith(_INPROGRESS_PREFIX):
        # (a `_metadata` there is still a snapshot: DSTL files have UUID names)
        return FileKind.CHANGELOG, None
    if head == _TASKOWNED:
        if len(segs) >= 3 and _FM_TASKOWNED.match(segs[1]):
            return FileKind.FILE_MERGING_MANAGED, None
        if len(segs) == 2:
            return FileKind.TASK_OWNED, None
        return FileKind.UNKNOWN, None
    return _loose_metadata(name), None


# The kinds a `_metadata` is a snapshot of (what the index parses and GC's re-list must find).
SNAPSHOT_METADATA_KINDS = (FileKind.CHECKPOINT_METADATA, FileKind.SAVEPOINT_METADATA)


def holds_snapshot_metadata(relative_dir: str) -> bool:
    """Whether a `_metadata` directly in `relative_dir` (below its root; "" is the root) is a snapshot.

    Asked of `classify` itself, so every placement the index recognises is one a re-list looks at."""
    name = f"{relative_dir.strip('/')}/{METADATA_NAME}" if relative_dir.strip("/") else METADATA_NAME
    return classify(name).kind in SNAPSHOT_METADATA_KINDS


def may_hold_snapshot_below(relative_dir: str) -> bool:
    """Whether a snapshot's `_metadata` can sit in a directory *below* `relative_dir` (strictly inside
    one of its child directories), by the rules of `classify`.

    False only where `classify` never yields a snapshot kind at any depth: inside a `chk-N/` (its files
    are exclusive, deeper ones unknown), in `shared/` and `taskowned/` (job or flat layout), inside a
    savepoint directory, and below a flat-layout directory. Those subtrees hold nearly every object of a
    store, so a re-list walks everything else and still lists only directories. Any other directory
    (a job directory, `compacted/` and what is below it, a directory of no known layout) may hold a
    self-contained snapshot at any depth, because `classify` calls every `_metadata` there one.
    tests/layout checks this against `classify` over every path of a segment alphabet, so a placement
    added to `classify` cannot be missed here silently."""
    segs = [s for s in relative_dir.split("/") if s]
    if not segs:
        return True
    top = segs[0]
    if _SAVEPOINT_DIR.match(top) or is_flat_checkpoint_dir(top):
        return False
    inner = segs[1:] if _JOB_ID.match(top) else segs
    if not inner:
        return True
    if inner is not segs and is_flat_checkpoint_dir(inner[0]):
        return False
    return True


def _compacted(name: str) -> FileKind:
    # Its files (moved payloads, a candidate left by a crash) belong to it as a savepoint's files belong
    # to the savepoint: GC keeps what its `_metadata` references and sweeps the rest by its rules.
    return FileKind.SAVEPOINT_METADATA if name == METADATA_NAME else FileKind.SAVEPOINT_DATA


def _loose_metadata(name: str) -> FileKind:
    # A `_metadata` outside chk-N is a self-contained snapshot directory (a savepoint under a
    # custom name, State Processor API output); its type is read from the file itself.
    if name == METADATA_NAME:
        return FileKind.SAVEPOINT_METADATA
    if name.startswith(_INPROGRESS_PREFIX):
        return FileKind.INPROGRESS_METADATA
    return FileKind.UNKNOWN


class CachedClassifier:
    """`classify` with a per-directory cache: within one directory only `_metadata`-like names
    change the outcome, and a store has few directories per thousands of files."""

    __slots__ = ("_cache",)

    def __init__(self) -> None:
        self._cache: dict[str, Location] = {}

    def __call__(self, relative_path: str) -> Location:
        head, _, name = relative_path.rpartition("/")
        if name == METADATA_NAME or name.startswith(_INPROGRESS_PREFIX):
            return classify(relative_path)
        loc = self._cache.get(head)
        if loc is None:
            loc = classify(f"{head}/x" if head else "x")
            if len(self._cache) < 100_000:
                self._cache[head] = loc
        return loc

"""Parse one `_metadata` object into rows of `snapshots`, `references` and `inline_state`.

Never raises for bad input: an unreadable object, an unsupported version or a corrupt file becomes
a snapshot row with `status` and `error` (fail closed: the row exists, nothing is skipped), and
the references of such a snapshot are empty. Callers decide what a bad row means (GC refuses to
run on a root with any non-ok snapshot).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from statekeeper import __version__
from statekeeper.layout.classify import Location, classify
from statekeeper.storage import FileInfo, Root, StorageError
from statekeeper.storage.base import FileIO
from statekeeper.tables.catalog import job_bucket
from statekeeper.tables.vocabulary import FileKind, Scope, SnapshotStatus, SnapshotType

# Re-read these on the next run even if the object is unchanged: the cause may be transient.
RETRY_STATUSES = frozenset({SnapshotStatus.UNREADABLE})


def _parser_version() -> str:
    """Statekeeper version plus a digest of the codec sources: any codec change re-parses every
    `_metadata` once, so the index always reflects the parser that is deployed.

    Read through `importlib.resources`, not the file system: on a cluster the package arrives as
    a zip (`--py-files`), where a directory glob finds nothing and every executor would stamp the
    digest of no sources at all (a local and a cluster run then re-parse each other's rows)."""
    from importlib.resources import files

    sources = sorted((entry for entry in files("statekeeper.format").iterdir()
                      if entry.name.endswith(".py")), key=lambda entry: entry.name)
    if not sources:
        raise RuntimeError("statekeeper.format ships no .py sources; the parser version cannot "
                           "be derived (a build that strips sources must set it explicitly)")
    digest = hashlib.sha1()
    for entry in sources:
        digest.update(entry.name.encode())
        digest.update(entry.read_bytes())
    return f"{__version__}+{digest.hexdigest()[:12]}"


PARSER_VERSION = _parser_version()


class RootIndex:
    """Find the root of a normalized URI and classify it, with per-directory caching (a snapshot
    names thousands of files in a handful of directories)."""

    def __init__(self, roots: list[Root]) -> None:
        self._roots = [(r.uri.rstrip("/") + "/", r) for r in roots]
        self._dir_cache: dict[str, tuple[Root | None, Location | None]] = {}

    def locate(self, uri: str) -> tuple[Root | None, Location | None]:
        head, _, name = uri.rpartition("/")
        special = name == "_metadata" or name.startswith("._metadata.inprogress.")
        if not special:
            hit = self._dir_cache.get(head)
            if hit is not None:
                return hit
        found: tuple[Root | None, Location | None] = (None, None)
        for prefix, root in self._roots:
            if uri.startswith(prefix):
                rel = uri[len(prefix):]
                if special:
                    found = (root, classify(rel))
                else:
                    # Only `_metadata`-like names change a classification within a directory.
                    d, _, _ = rel.rpartition("/")
                    found = (root, classify(f"{d}/x" if d else "x"))
                break
        if not special and len(self._dir_cache) < 200_000:
            self._dir_cache[head] = found
        return found


@dataclass
class ParsedSnapshot:
    snapshot: dict[str, Any]
    references: list[tuple] = field(default_factory=list)   # REFERENCE_COLUMNS order
    inline: list[tuple] = field(default_factory=list)       # INLINE_COLUMNS order

    @property
    def ok(self) -> bool:
        return self.snapshot["status"] == SnapshotStatus.OK


REFERENCE_COLUMNS = (
    "snapshot_uri", "root", "root_id", "job_dir", "bucket", "snapshot_job_id", "snapshot_checkpoint_id", "file_uri",
    "stored_path", "handle_kind", "scope", "stated_size", "segment_start", "segment_length", "operator_id",
    "operator_name", "operator_uid", "subtask", "slot", "role", "local_name", "file_root", "file_job_dir",
    "file_job_id", "file_kind",
)
INLINE_COLUMNS = (
    "snapshot_uri", "root", "root_id", "job_dir", "bucket", "snapshot_checkpoint_id", "operator_id", "operator_name",
    "operator_uid", "handle_kind", "slot", "inline_bytes", "handle_count", "subtask_count",
)


def base_snapshot_row(info: FileInfo, root: Root, job_dir: str, location: Location, run_id: str) -> dict[str, Any]:
    return {
        "uri": info.uri, "root": root.uri, "root_id": root.root_id, "job_dir": job_dir,
        "bucket": job_bucket(job_dir), "job_id": location.job_id, "layout_kind": location.kind.value,
        "dir_checkpoint_id": location.checkpoint_id, "status": SnapshotStatus.OK, "error": None,
        "metadata_version": None, "checkpoint_id": location.checkpoint_id, "snapshot_type": None,
        "snapshot_format": None, "sharing": None, "metadata_size": info.size, "metadata_mtime": info.mtime,
        "metadata_etag": info.etag, "inline_bytes": None, "inline_handle_count": None, "reference_count": None,
        "referenced_file_count": None, "referenced_bytes": None, "operator_count": None, "operators": None,
        "parser_version": PARSER_VERSION, "index_run_id": run_id,
    }


def parse_snapshot(fileio: FileIO, info: FileInfo, root: Root, job_dir: str, location: Location, run_id: str,
                   roots: RootIndex) -> ParsedSnapshot:
    from statekeeper.format import (
        MetadataFormatError,
        UnsupportedMetadataVersionError,
        extract_references,
        read_metadata,
    )

    row = base_snapshot_row(info, root, job_dir, location, run_id)
    # A wrong-looking type from the path is corrected by the trailer below when there is one.
    row["snapshot_type"] = (SnapshotType.CHECKPOINT if location.kind == FileKind.CHECKPOINT_METADATA
                            else SnapshotType.SAVEPOINT)
    try:
        with fileio.open_input(info.uri, info=info) as stream:
            model = read_metadata(stream, info.uri)
        refs = extract_references(model, info.uri)
    except UnsupportedMetadataVersionError as exc:
        return _failed(row, SnapshotStatus.UNSUPPORTED, exc)
    except MetadataFormatError as exc:
        return _failed(row, SnapshotStatus.PARSE_ERROR, exc)
    except StorageError as exc:
        return _failed(row, SnapshotStatus.UNREADABLE, exc)
    except OSError as exc:
        return _failed(row, SnapshotStatus.UNREADABLE, exc)
    except Exception as exc:  # noqa: BLE001 - a codec bug must not stop the run nor hide the file
        return _failed(row, SnapshotStatus.PARSE_ERROR, exc, internal=True)

    _describe(row, model, refs)
    keys = (info.uri, root.uri, root.root_id, job_dir, row["bucket"])
    return ParsedSnapshot(row, _reference_rows(keys, location.job_id, model.checkpoint_id, refs, roots),
                          _inline_rows(keys, model.checkpoint_id, refs))


def _describe(row: dict[str, Any], model: Any, refs: Any) -> None:
    """The snapshots row's description of a parsed `_metadata`: type, version, references, inline state, operators."""
    props = model.properties
    if props is not None:
        row["snapshot_type"] = props.snapshot_type
        row["snapshot_format"] = props.format.lower() if props.format else None
        row["sharing"] = props.sharing.lower() if props.sharing else None
    row["metadata_version"] = model.version
    row["checkpoint_id"] = model.checkpoint_id
    physical = refs.physical_files()
    row["reference_count"] = len(refs.files)
    row["referenced_file_count"] = len(physical)
    row["referenced_bytes"] = sum(physical.values())
    row["inline_bytes"] = refs.inline_bytes
    row["inline_handle_count"] = sum(s.handle_count for s in refs.inline)
    row["operator_count"] = len(model.operators)
    row["operators"] = [
        {"operator_id": op.operator_id, "operator_name": op.name, "operator_uid": op.uid,
         "parallelism": op.parallelism, "max_parallelism": op.max_parallelism,
         "subtask_states": len(op.subtasks), "finished": op.fully_finished}
        for op in model.operators
    ]


def _reference_rows(keys: tuple, job_id: str | None, checkpoint_id: int, refs: Any, roots: RootIndex) -> list[tuple]:
    """One REFERENCE_COLUMNS row per reference, with the root and directory it falls in (or external).
    `keys`: the snapshot's (uri, root, root_id, job_dir, bucket)."""
    snap_uri, root_uri, root_id, job_dir, bucket = keys
    references = []
    append = references.append
    locate = roots.locate
    for f in refs.files:
        froot, floc = locate(f.uri)
        if f.scope == Scope.FILE_MERGING_MANAGED_DIR:
            kind = FileKind.FILE_MERGING_MANAGED_DIR
        elif floc is None:
            kind = FileKind.EXTERNAL
        else:
            kind = floc.kind.value
        append((snap_uri, root_uri, root_id, job_dir, bucket, job_id, checkpoint_id, f.uri, f.stored_path,
                f.handle_kind, f.scope, f.stated_size, f.segment_start, f.segment_length, f.operator_id,
                f.operator_name, f.operator_uid, f.subtask, f.slot, f.role, f.local_name,
                None if froot is None else froot.uri, None if floc is None else (floc.job_dir or "."),
                None if floc is None else floc.job_id, kind))
    return references


def _inline_rows(keys: tuple, checkpoint_id: int, refs: Any) -> list[tuple]:
    """One INLINE_COLUMNS row per (operator, handle kind, slot): bytes, handles, subtasks."""
    snap_uri, root_uri, root_id, job_dir, bucket = keys
    agg: dict[tuple, list] = {}
    for s in refs.inline:
        key = (s.operator_id, s.operator_name, s.operator_uid, s.handle_kind, s.slot)
        a = agg.setdefault(key, [0, 0, set()])
        a[0] += s.inline_bytes
        a[1] += s.handle_count
        if s.subtask is not None:
            a[2].add(s.subtask)
    return [(snap_uri, root_uri, root_id, job_dir, bucket, checkpoint_id, k[0], k[1], k[2], k[3], k[4], v[0], v[1],
             len(v[2])) for k, v in sorted(agg.items(), key=lambda kv: tuple("" if x is None else x for x in kv[0]))]


def _failed(row: dict[str, Any], status: str, exc: BaseException, internal: bool = False) -> ParsedSnapshot:
    message = f"{type(exc).__name__}: {exc}"
    if internal:
        message = f"internal parser error (please report): {message}"
    row["status"] = status
    row["error"] = message[:4000]
    return ParsedSnapshot(row)

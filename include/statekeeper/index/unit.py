"""Index one unit (a root's child directory) inside a Spark task.

A unit is rewritten as a whole or left alone:
* unchanged (same objects with the same size/ETag/mtime, no snapshot waiting for a retry, same
  parser): nothing is written and nothing is re-read beyond the previous `files`/`snapshots` rows;
* changed: every table's rows for the unit are rebuilt; `_metadata` objects whose size/ETag/mtime
  and parser are unchanged reuse their previous snapshot, reference and inline rows (no re-parse);
* listing failed: nothing is written, the previous rows stay, and the failure is reported — the
  index never claims a directory is empty because it could not be read.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from statekeeper.index.parse import (
    INLINE_COLUMNS,
    PARSER_VERSION,
    REFERENCE_COLUMNS,
    RETRY_STATUSES,
    ParsedSnapshot,
    RootIndex,
    base_snapshot_row,
    parse_snapshot,
)
from statekeeper.layout.classify import CachedClassifier
from statekeeper.storage import FileInfo, Root, StorageError
from statekeeper.storage.base import FileIO
from statekeeper.tables.arrow_codec import micros
from statekeeper.tables.catalog import FILES, INLINE_STATE, REFERENCES, ROOT_LEVEL_JOB_DIR, SNAPSHOTS, job_bucket
from statekeeper.tables.files import DataFile
from statekeeper.tables.reader import read_files
from statekeeper.tables.vocabulary import FileKind, SnapshotStatus, SnapshotType
from statekeeper.tables.warehouse import Warehouse
from statekeeper.uri import join_uri

UNCHANGED = "unchanged"
REWRITTEN = "rewritten"
FAILED = "failed"
_MAX_ERRORS_PER_UNIT = 20


@dataclass
class UnitPlan:
    root: Root
    job_dir: str                                   # child dir name, or "." for the root's own files
    previous: dict[str, list[DataFile]]            # table -> data files of this unit's bucket partition

    @property
    def uri(self) -> str:
        return self.root.uri if self.job_dir == ROOT_LEVEL_JOB_DIR else join_uri(self.root.uri, self.job_dir)

    @property
    def bucket(self) -> str:
        return job_bucket(self.job_dir)

    @property
    def partition(self) -> dict[str, str]:
        return {"root_id": self.root.root_id, "bucket": self.bucket}


@dataclass
class UnitStats:
    units: int = 0
    units_rewritten: int = 0
    units_unchanged: int = 0
    units_failed: int = 0
    objects_listed: int = 0
    bytes_listed: int = 0
    metadata_found: int = 0
    metadata_parsed: int = 0
    metadata_reused: int = 0
    metadata_failed: int = 0
    errors: list[str] = field(default_factory=list)

    COUNTERS = ("units", "units_rewritten", "units_unchanged", "units_failed", "objects_listed", "bytes_listed",
                "metadata_found", "metadata_parsed", "metadata_reused", "metadata_failed")

    def add(self, other: UnitStats, max_errors: int) -> None:
        for name in self.COUNTERS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        room = max_errors - len(self.errors)
        if room > 0:
            self.errors.extend(other.errors[:room])

    def to_mapping(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: getattr(self, name) for name in self.COUNTERS}
        out["errors"] = list(self.errors)
        return out

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> UnitStats:
        stats = cls(**{k: int(data.get(k, 0)) for k in cls.COUNTERS})
        stats.errors = list(data.get("errors", []))
        return stats


@dataclass
class UnitResult:
    outcome: str
    stats: UnitStats
    tables: dict[str, pa.Table] = field(default_factory=dict)   # rows to add, per table
    removes: dict[str, list[DataFile]] = field(default_factory=dict)


@dataclass
class UnitContext:
    """What every unit of one Spark task shares."""

    storage: FileIO                 # guarded by the roots
    warehouse: Warehouse
    warehouse_io: FileIO
    run_id: str
    roots: RootIndex
    # (table, file paths, columns) -> job_dir -> rows: the jobs of one bucket share its files, so
    # each file is read once per bucket, not once per job. Cleared between buckets.
    _previous: dict[tuple, dict[str, pa.Table]] = field(default_factory=dict, repr=False)

    def clear_previous(self) -> None:
        self._previous.clear()

    def read_previous(self, spec_name: str, files: list[DataFile], columns: list[str] | None = None,
                      job_dir: str | None = None) -> pa.Table | None:
        """Previous rows of `spec_name` in `files` (one bucket partition), only those of `job_dir`
        when given; None when there are none."""
        if not files:
            return None
        key = (spec_name, tuple(sorted(f.path for f in files)), None if columns is None else tuple(columns))
        groups = self._previous.get(key)
        if groups is None:
            groups = self._previous[key] = _by_job_dir(self._read(spec_name, files, columns))
        if job_dir is not None:
            return groups.get(job_dir)
        parts = [groups[j] for j in sorted(groups)]
        return pa.concat_tables(parts) if parts else None

    def previous_job_dirs(self, spec_name: str, files: list[DataFile], columns: list[str] | None = None) -> set[str]:
        self.read_previous(spec_name, files, columns)
        key = (spec_name, tuple(sorted(f.path for f in files)), None if columns is None else tuple(columns))
        return set(self._previous.get(key, {}))

    def _read(self, spec_name: str, files: list[DataFile], columns: list[str] | None) -> pa.Table:
        from statekeeper.tables.catalog import spec

        s = spec(spec_name)
        wanted = None if columns is None else (columns if "job_dir" in columns else [*columns, "job_dir"])
        return read_files(self.warehouse, s.schema, s.partition_by, files, table_name=s.name, columns=wanted,
                          fileio=self.warehouse_io)


def _by_job_dir(table: pa.Table) -> dict[str, pa.Table]:
    """Split rows by job_dir, keeping each job's row order (a stable sort, then runs)."""
    if table.num_rows == 0:
        return {}
    ordered = table.take(pc.sort_indices(table, sort_keys=[("job_dir", "ascending")]))
    # value_counts lists values in order of first appearance: on sorted data, the runs in order.
    counts = pc.value_counts(ordered.column("job_dir"))
    out: dict[str, pa.Table] = {}
    start = 0
    for value, n in zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True):
        out[value] = ordered.slice(start, n)
        start += n
    return out


def list_unit(storage: FileIO, plan: UnitPlan) -> Iterator[FileInfo]:
    if plan.job_dir == ROOT_LEVEL_JOB_DIR:
        return storage.list(plan.root.uri, recursive=False)
    return storage.list(plan.uri)


def index_unit(ctx: UnitContext, plan: UnitPlan) -> UnitResult:
    stats = UnitStats(units=1)
    try:
        listing = sorted(list_unit(ctx.storage, plan), key=lambda i: i.uri)
    except StorageError as exc:
        stats.units_failed = 1
        stats.errors.append(f"cannot list {plan.uri}: {exc} (previous rows kept)")
        return UnitResult(FAILED, stats)
    stats.objects_listed = len(listing)
    stats.bytes_listed = sum(i.size for i in listing)

    # Only the columns the change check needs; full rows are read when the unit is rewritten.
    prev_files = ctx.read_previous("files", plan.previous.get("files", []), _FILE_KEY_COLUMNS, plan.job_dir)
    prev_snaps = ctx.read_previous("snapshots", plan.previous.get("snapshots", []), _SNAPSHOT_KEY_COLUMNS,
                                   plan.job_dir)
    prev_by_uri = _previous_objects(prev_files)
    snap_by_uri = _previous_snapshots(prev_snaps)

    prefix = plan.root.uri.rstrip("/") + "/"
    for info in listing:  # FileIO yields canonical URIs below the listed directory
        if not info.uri.startswith(prefix):
            raise AssertionError(f"listing of {plan.uri} returned {info.uri}, outside root {plan.root.uri}")
    classify = CachedClassifier()
    metadata = []
    for info in listing:
        if info.uri.endswith("/_metadata"):  # the only name that can classify as metadata
            loc = classify(info.uri[len(prefix):])
            if loc.kind.is_metadata:
                metadata.append((info, loc))
    stats.metadata_found = len(metadata)
    # Reported on every run, unchanged or not: they are a standing problem, not an event.
    stats.errors.extend(_special_object_errors(listing))

    mtimes = [micros(i.mtime) for i in listing]
    same_listing = len(prev_by_uri) == len(listing) and all(
        prev_by_uri.get(i.uri, (None,))[:3] == (i.size, i.etag, m) for i, m in zip(listing, mtimes, strict=True))
    needs_retry = any(row["status"] in RETRY_STATUSES or row["parser_version"] != PARSER_VERSION
                      for row in snap_by_uri.values())
    if same_listing and not needs_retry and len(snap_by_uri) == len(metadata):
        stats.units_unchanged = 1
        stats.metadata_reused = len(metadata)
        stats.metadata_failed = sum(1 for row in snap_by_uri.values() if row["status"] != SnapshotStatus.OK)
        stats.errors.extend(_snapshot_errors(snap_by_uri.values()))
        return UnitResult(UNCHANGED, stats)

    stats.units_rewritten = 1
    locations = [classify(i.uri[len(prefix):]) for i in listing]
    files_table = _files_table(ctx, plan, listing, locations, mtimes, prev_by_uri)
    return UnitResult(REWRITTEN, stats, _unit_tables(ctx, plan, files_table, metadata, stats),
                      {name: list(files) for name, files in plan.previous.items() if files})


def _unit_tables(ctx: UnitContext, plan: UnitPlan, files_table: pa.Table, metadata: list[tuple[FileInfo, Any]],
                 stats: UnitStats) -> dict[str, pa.Table]:
    """The rewritten unit's rows of every index table: each `_metadata` parsed again unless the previous
    index's row can be reused (then its references and inline state are carried over)."""
    snap_by_uri = _previous_snapshots(ctx.read_previous("snapshots", plan.previous.get("snapshots", []),
                                                        job_dir=plan.job_dir))
    snapshot_rows: list[dict[str, Any]] = []
    new_references: list[tuple] = []
    new_inline: list[tuple] = []
    reused: list[str] = []
    for info, loc in metadata:
        prev = snap_by_uri.get(info.uri)
        if prev is not None and _reusable(prev, info):
            snapshot_rows.append(prev)
            reused.append(info.uri)
            continue
        if not info.object_type.is_regular:
            # Never opened: a symlink may lead anywhere, a FIFO blocks the reader.
            snapshot_rows.append(_special_snapshot(info, plan.root, plan.job_dir, loc, ctx.run_id).snapshot)
            continue
        parsed = parse_snapshot(ctx.storage, info, plan.root, plan.job_dir, loc, ctx.run_id, ctx.roots)
        stats.metadata_parsed += 1
        snapshot_rows.append(parsed.snapshot)
        new_references.extend(parsed.references)
        new_inline.extend(parsed.inline)
    stats.metadata_reused = len(reused)
    stats.metadata_failed = sum(1 for r in snapshot_rows if r["status"] != SnapshotStatus.OK)
    stats.errors.extend(_snapshot_errors(snapshot_rows))

    tables: dict[str, pa.Table] = {}
    if files_table.num_rows:
        tables["files"] = files_table
    if snapshot_rows:
        tables["snapshots"] = pa.Table.from_pylist(sorted(snapshot_rows, key=lambda r: r["uri"]),
                                                   schema=SNAPSHOTS.schema)
    for name, columns, new_rows, spec in (("references", REFERENCE_COLUMNS, new_references, REFERENCES),
                                          ("inline_state", INLINE_COLUMNS, new_inline, INLINE_STATE)):
        parts = [_rows_to_table(columns, new_rows, spec.schema)] if new_rows else []
        if reused:
            previous = ctx.read_previous(name, plan.previous.get(name, []), job_dir=plan.job_dir)
            if previous is not None:
                parts.append(previous.filter(pc.is_in(previous.column("snapshot_uri"), pa.array(reused, pa.string()))))
        parts = [p for p in parts if p.num_rows]
        if parts:
            tables[name] = pa.concat_tables(parts).cast(spec.schema)
    return tables


_FILE_KEY_COLUMNS = ["uri", "size", "etag", "mtime", "index_run_id"]
_SNAPSHOT_KEY_COLUMNS = ["uri", "status", "error", "parser_version"]


def _previous_objects(prev: pa.Table | None) -> dict[str, tuple]:
    """uri -> (size, etag, mtime in µs, index_run_id); integers, since converting tz-aware
    timestamps to datetime objects costs more than the whole comparison."""
    if prev is None:
        return {}
    prev = prev.set_column(prev.schema.get_field_index("mtime"), "mtime", prev.column("mtime").cast(pa.int64()))
    cols = prev.select(_FILE_KEY_COLUMNS).to_pydict()
    return {u: (s, e, m, r) for u, s, e, m, r in zip(cols["uri"], cols["size"], cols["etag"], cols["mtime"],
                                                    cols["index_run_id"], strict=True)}


def _previous_snapshots(prev: pa.Table | None) -> dict[str, dict[str, Any]]:
    if prev is None:
        return {}
    return {row["uri"]: row for row in prev.to_pylist()}


def _reusable(prev: dict[str, Any], info: FileInfo) -> bool:
    return (prev["metadata_size"] == info.size and prev["metadata_etag"] == info.etag
            and micros(prev["metadata_mtime"]) == micros(info.mtime) and prev["parser_version"] == PARSER_VERSION
            and prev["status"] not in RETRY_STATUSES)


def _special_snapshot(info: FileInfo, root: Root, job_dir: str, loc: Any, run_id: str) -> ParsedSnapshot:
    row = base_snapshot_row(info, root, job_dir, loc, run_id)
    row["snapshot_type"] = (SnapshotType.CHECKPOINT if loc.kind == FileKind.CHECKPOINT_METADATA
                            else SnapshotType.SAVEPOINT)
    row["status"] = SnapshotStatus.UNREADABLE
    row["error"] = (f"{info.uri} is a {info.object_type.value}, not a regular file: not read (Statekeeper "
                    "never follows symlinks or opens special files inside roots); replace it with the real "
                    "_metadata file or remove it")
    return ParsedSnapshot(row)


def _special_object_errors(listing: list[FileInfo]) -> list[str]:
    out = []
    for info in listing:
        if not info.object_type.is_regular and len(out) < _MAX_ERRORS_PER_UNIT:
            out.append(f"{info.uri}: a {info.object_type.value}, not a regular file; indexed with kind "
                       f"'{info.object_type.value}', never followed, opened or deleted through")
    return out


def _snapshot_errors(rows: Any) -> list[str]:
    out = []
    for row in rows:
        if row["status"] != SnapshotStatus.OK and len(out) < _MAX_ERRORS_PER_UNIT:
            out.append(f"{row['uri']}: {row['status']}: {row['error']}")
    return out


def _files_table(ctx: UnitContext, plan: UnitPlan, listing: list[FileInfo], locations: list, mtimes: list[int],
                 prev: dict) -> pa.Table:
    root = plan.root
    n = len(listing)
    run_ids = []
    for info, mtime in zip(listing, mtimes, strict=True):
        p = prev.get(info.uri)
        # An object version keeps the id of the run that first indexed it: unchanged storage
        # means unchanged table contents.
        run_ids.append(p[3] if p is not None and p[:3] == (info.size, info.etag, mtime) else ctx.run_id)
    prefix_len = len(root.uri.rstrip("/")) + 1
    return pa.table({
        "uri": [i.uri for i in listing],
        "root": [root.uri] * n,
        "root_id": [root.root_id] * n,
        "job_dir": [plan.job_dir] * n,
        "bucket": [plan.bucket] * n,
        "relative_path": [i.uri[prefix_len:] for i in listing],
        # A non-regular object's kind is what it is (`symlink`, `fifo`, ...), not where it sits:
        # consumers that select by layout kind (cleaners) must never pick it up.
        "kind": [loc.kind.value if i.object_type.is_regular else i.object_type.value
                 for i, loc in zip(listing, locations, strict=True)],
        "job_id": [loc.job_id for loc in locations],
        "checkpoint_id": [loc.checkpoint_id for loc in locations],
        "size": [i.size for i in listing],
        # Via integer microseconds: pyarrow converts tz-aware datetimes ~30x slower.
        "mtime": pa.array(mtimes, pa.int64()).cast(FILES.schema.field("mtime").type),
        "etag": [i.etag for i in listing],
        "index_run_id": run_ids,
    }, schema=FILES.schema)


def _rows_to_table(columns: tuple[str, ...], rows: list[tuple], schema: pa.Schema) -> pa.Table:
    arrays = list(zip(*rows, strict=True))
    return pa.table({name: list(values) for name, values in zip(columns, arrays, strict=True)},
                    schema=pa.schema([schema.field(c) for c in columns])).select(schema.names)

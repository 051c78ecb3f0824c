"""`statekeeper explain --inactive-after`: the idle job directories (statekeeper.jobs.idle), without Spark.

Per job directory its newest checkpoint (`snapshots`), its objects and bytes (`files`), and which directories
use its files (`references`, distinct files per pair), each table read one data file at a time at the
index cut, so memory holds per-directory sums, never a listing.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from statekeeper.jobs.idle import IdleJobDir, JobActivity, Use, is_job_directory, judge
from statekeeper.tables.vocabulary import SnapshotType


def idle_job_dirs(warehouse: Any, cutoff: datetime) -> list[IdleJobDir]:
    """`judge` over the warehouse's index cut."""
    from statekeeper.tables import cut
    from statekeeper.tables.reader import TableReader

    _, versions = cut.pin_cut(warehouse, ("files", "snapshots", "references"))
    reader = TableReader(warehouse, versions)
    reader.require("snapshots", "index_checkpoints")
    activity = _activity(reader)
    idle = {(a.root, a.job_dir) for a in activity if is_job_directory(a.job_dir) and a.idle(cutoff)}
    return judge(activity, _uses(reader, idle), cutoff)


def _batches(reader: Any, name: str, columns: list[str]) -> Iterable[Any]:
    from statekeeper.tables.reader import read_files

    state = reader.state(name)
    if state is None:
        return
    for f in state.files:
        yield read_files(reader.warehouse, state.schema, state.partition_by, [f], table_name=name,
                         columns=columns, fileio=reader._io)


def _activity(reader: Any) -> list[JobActivity]:
    newest: dict[tuple[str, str], datetime] = {}
    for t in _batches(reader, "snapshots", ["root", "job_dir", "snapshot_type", "metadata_mtime"]):
        for r in t.to_pylist():
            if r["snapshot_type"] == SnapshotType.CHECKPOINT.value:
                key = (r["root"], r["job_dir"])
                newest[key] = max(newest.get(key, r["metadata_mtime"]), r["metadata_mtime"])
    sizes: dict[tuple[str, str], list[Any]] = {}
    for t in _batches(reader, "files", ["root", "job_dir", "size", "mtime"]):
        grouped = t.group_by(["root", "job_dir"]).aggregate([("size", "count"), ("size", "sum"), ("mtime", "max")])
        for r in grouped.to_pylist():
            acc = sizes.setdefault((r["root"], r["job_dir"]), [0, 0, None])
            acc[0] += r["size_count"]
            acc[1] += r["size_sum"] or 0
            acc[2] = r["mtime_max"] if acc[2] is None else max(acc[2], r["mtime_max"])
    return [JobActivity(root, job_dir, newest.get((root, job_dir)), newest_object, files, size)
            for (root, job_dir), (files, size, newest_object) in sizes.items()]


def _uses(reader: Any, idle: set[tuple[str, str]]) -> list[Use]:
    """Per (referencing directory, idle target directory): snapshots, distinct files and their bytes."""
    if not idle:
        return []
    snapshots: dict[tuple[str, str, str, str], set[str]] = {}
    files: dict[tuple[str, str, str, str], dict[str, int]] = {}
    for t in _batches(reader, "references", ["root", "job_dir", "snapshot_uri", "file_root", "file_job_dir",
                                             "file_uri", "stated_size"]):
        for r in t.to_pylist():
            target = (r["file_root"], r["file_job_dir"])
            if target not in idle:
                continue
            key = (r["root"], r["job_dir"], *target)
            snapshots.setdefault(key, set()).add(r["snapshot_uri"])
            sizes = files.setdefault(key, {})
            sizes[r["file_uri"]] = max(sizes.get(r["file_uri"], 0), r["stated_size"] or 0)
    return [Use(k[0], k[1], k[2], k[3], len(snapshots[k]), len(v), sum(v.values())) for k, v in files.items()]

"""A small warehouse written row by row (no Spark): every table the metrics read, with known figures."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa

from statekeeper.tables import Warehouse

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
ROOT = "file:///store/checkpoints"
FLAT = "file:///flat"                    # a root given at one job's own directory (create-subdir off)
SAVEPOINTS = "file:///store/savepoints"
A, B, O = "a" * 32, "b" * 32, "0" * 32   # two jobs and an ownerless directory


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def _default(f: pa.Field) -> Any:
    if f.nullable:
        return None
    t = f.type
    if pa.types.is_string(t):
        return ""
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return 0
    if pa.types.is_timestamp(t):
        return T0
    if pa.types.is_list(t) or pa.types.is_map(t):
        return []
    if pa.types.is_boolean(t):
        return False
    raise TypeError(f"no default for {f}")


def append(warehouse: Warehouse, name: str, rows: list[dict[str, Any]]) -> int:
    """Commit `rows` (missing columns: null, or an empty value where the column is not nullable) to `name`;
    the version committed."""
    from statekeeper.tables import delta_log
    from statekeeper.tables.catalog import job_bucket, spec
    from statekeeper.tables.files import split_partitions, write_data_file

    s = spec(name)
    full = []
    for r in rows:
        row = {f.name: r[f.name] if f.name in r else _default(f) for f in s.schema}
        if "bucket" in row and "job_dir" in row:
            row["bucket"] = job_bucket(row["job_dir"])
        if "root_id" in row and not row["root_id"]:
            row["root_id"] = row["root"].rsplit("/", 1)[-1]
        full.append(row)
    table = s.conform(pa.Table.from_pylist(full, schema=s.schema))
    state = delta_log.load_state(warehouse, name)
    adds = [write_data_file(warehouse, s, part, values) for values, part in split_partitions(s, table) if part.num_rows]
    result = delta_log.commit(warehouse, s, adds, [], read_version=None if state is None else state.version,
                              strict=False)
    return result.version


def _file(root: str, job_dir: str, rel: str, size: int, kind: str = "shared") -> dict[str, Any]:
    return {"uri": f"{root}/{job_dir}/{rel}" if job_dir != "." else f"{root}/{rel}", "root": root, "job_dir": job_dir,
            "relative_path": rel, "kind": kind, "size": size, "mtime": T0}


def _snapshot(root: str, job_dir: str, uri: str, checkpoint_id: int, mtime: datetime, inline: int | None,
              snapshot_type: str = "checkpoint") -> dict[str, Any]:
    return {"uri": uri, "root": root, "job_dir": job_dir, "layout_kind": "checkpoint_metadata", "status": "ok",
            "checkpoint_id": checkpoint_id, "snapshot_type": snapshot_type, "metadata_size": 10,
            "metadata_mtime": mtime, "inline_bytes": inline}


def _reference(root: str, job_dir: str, snapshot: str, file_root: str | None, file_job_dir: str | None,
               file_uri: str) -> dict[str, Any]:
    return {"snapshot_uri": snapshot, "root": root, "job_dir": job_dir, "file_uri": file_uri,
            "handle_kind": "FILE_STREAM_STATE_HANDLE", "file_root": file_root, "file_job_dir": file_job_dir,
            "file_kind": "shared"}


@dataclass
class Store:
    """What the warehouse holds, as the tests expect to read it back."""

    warehouse: Warehouse
    uris: dict[str, str] = field(default_factory=dict)


def build(path) -> Store:
    wh = Warehouse(str(path))
    a1, a2 = f"{ROOT}/{A}/chk-1/_metadata", f"{ROOT}/{A}/chk-2/_metadata"
    b5, flat3 = f"{ROOT}/{B}/chk-5/_metadata", f"{FLAT}/chk-3/_metadata"
    a_sst, b_sst, flat_sst = f"{ROOT}/{A}/shared/s1", f"{ROOT}/{B}/shared/b1", f"{FLAT}/shared/f1"
    files = [
        _file(ROOT, A, "shared/s1", 100), _file(ROOT, A, "chk-1/_metadata", 10, "checkpoint_metadata"),
        _file(ROOT, A, "chk-2/_metadata", 11, "checkpoint_metadata"),
        _file(ROOT, B, "shared/b1", 50), _file(ROOT, B, "chk-5/_metadata", 20, "checkpoint_metadata"),
        _file(ROOT, O, "shared/o1", 30),
        # a flat root: units chk-3 and shared, both the root's own job "."
        _file(FLAT, "chk-3", "chk-3/_metadata", 5, "checkpoint_metadata"), _file(FLAT, "shared", "shared/f1", 7),
    ]
    for f in files:
        if f["job_dir"] in ("chk-3", "shared"):
            f["uri"] = f"{FLAT}/{f['relative_path']}"
    snapshots = [
        _snapshot(ROOT, A, a1, 1, at(-30), 3), _snapshot(ROOT, A, a2, 2, at(-20), 4),
        _snapshot(ROOT, B, b5, 5, at(-10), None), _snapshot(FLAT, "chk-3", flat3, 3, at(-5), 2),
    ]
    references = [
        _reference(ROOT, B, b5, ROOT, A, a_sst), _reference(ROOT, B, b5, ROOT, A, a_sst),   # two segments: one file
        _reference(ROOT, B, b5, ROOT, B, b_sst),
        _reference(ROOT, A, a2, ROOT, A, a_sst), _reference(ROOT, A, a1, ROOT, A, a_sst),
        _reference(FLAT, "chk-3", flat3, FLAT, "shared", flat_sst),                         # the same job "."
        _reference(ROOT, A, a2, None, None, "file:///elsewhere/x"),                          # outside the roots
    ]
    versions = {"files": append(wh, "files", files), "snapshots": append(wh, "snapshots", snapshots),
                "references": append(wh, "references", references)}
    append(wh, "index_runs", [
        {"run_id": "i0", "status": "failed", "started_at": at(-90), "finished_at": at(-89)},
        {"run_id": "i1", "status": "succeeded", "started_at": at(-60), "finished_at": at(-58), "table_versions": versions},
        {"run_id": "i2", "status": "partial", "started_at": at(-5), "finished_at": at(-4)},
    ])
    append(wh, "validation_jobs", [
        {"run_id": "v1", "root": ROOT, "job_dir": A, "kind": "job", "status": "unrestorable", "newest_uri": a2,
         "newest_checkpoint_id": 2, "newest_restorable": False, "latest_restorable_uri": a1,
         "latest_restorable_checkpoint_id": 1},
        {"run_id": "v1", "root": ROOT, "job_dir": B, "kind": "job", "status": "restorable", "newest_uri": b5,
         "newest_checkpoint_id": 5, "newest_restorable": True, "latest_restorable_uri": b5,
         "latest_restorable_checkpoint_id": 5},
        {"run_id": "v1", "root": FLAT, "job_dir": ".", "kind": "job", "status": "unrestorable", "newest_uri": flat3,
         "newest_checkpoint_id": 3, "newest_restorable": False},
    ])
    append(wh, "validation_runs", [{"run_id": "v1", "status": "unrestorable", "started_at": at(-50),
                                    "finished_at": at(-48)}])
    append(wh, "gc_runs", [
        {"run_id": "g1", "status": "requested", "mode": "plan", "plan_run_id": "g1", "started_at": at(-40),
         "finished_at": at(-40)},
        {"run_id": "g1", "status": "planned", "mode": "plan", "plan_run_id": "g1", "started_at": at(-40),
         "finished_at": at(-39), "planned": 3, "planned_bytes": 18,
         "ownerless": [{"root": ROOT, "job_dir": O, "files": 1, "bytes": 30, "verdict": "held_back"}]},
        {"run_id": "g2", "status": "running", "mode": "execute", "plan_run_id": "g1", "started_at": at(-30),
         "finished_at": at(-30)},
        {"run_id": "g2", "status": "failed", "mode": "execute", "plan_run_id": "g1", "started_at": at(-30),
         "finished_at": at(-28), "planned": 3, "planned_bytes": 18, "deleted": 1, "deleted_bytes": 10,
         "changed_skipped": 1, "failed": 1,
         "ownerless": [{"root": ROOT, "job_dir": O, "files": 1, "bytes": 30, "verdict": "held_back"},
                       {"root": FLAT, "job_dir": "taskowned", "files": 1, "bytes": 6, "verdict": "held_back"}]},
    ])
    append(wh, "gc_actions", [
        {"run_id": "g1", "uri": a1, "root": ROOT, "job_dir": A, "size": 10, "reason": "expired_snapshot",
         "outcome": "deleted"},
        {"run_id": "g1", "uri": f"{ROOT}/{A}/shared/s9", "root": ROOT, "job_dir": A, "size": 5, "reason": "orphan",
         "outcome": "planned"},
        {"run_id": "g1", "uri": f"{ROOT}/{B}/shared/b9", "root": ROOT, "job_dir": B, "size": 3, "reason": "orphan",
         "outcome": "failed"},
        {"run_id": "g0", "uri": f"{ROOT}/{B}/shared/b8", "root": ROOT, "job_dir": B, "size": 99, "reason": "orphan",
         "outcome": "planned"},   # an older plan: not the newest run's
    ])
    append(wh, "dr_copies", [
        {"run_id": "d1", "status": "verified", "source_root": ROOT, "job_dir": A, "checkpoint_id": 1,
         "snapshot_type": "checkpoint", "selected_by": "latest_restorable", "finished_at": at(-25),
         "source_completed_at": at(-30)},
        {"run_id": "d1", "status": "verified", "source_root": SAVEPOINTS, "job_dir": "savepoint-aaaaaa-1",
         "snapshot_type": "savepoint", "selected_by": "savepoint", "finished_at": at(-25),
         "source_completed_at": at(-300)},
        {"run_id": "f1", "status": "verified", "source_root": ROOT, "job_dir": A, "checkpoint_id": 2,
         "snapshot_type": "checkpoint", "selected_by": "follow", "finished_at": at(-15),
         "source_completed_at": at(-20)},
        # a copy that failed in a follow round (its round also names it in dr_runs.problems: one round)
        {"run_id": "f2", "status": "failed", "source_root": ROOT, "job_dir": A, "snapshot_type": "checkpoint",
         "selected_by": "follow", "finished_at": at(-10)},
    ])
    refused = "{} names {}/shared/gone, which its directory's listing does not hold: ..."
    append(wh, "dr_runs", [
        {"run_id": "d1", "status": "succeeded", "mode": "copy", "started_at": at(-26), "finished_at": at(-25),
         "verified": 2, "files_copied": 3, "bytes_copied": 300},
        # refused before A's verified copy: not in the row of refusals since
        {"run_id": "f0", "status": "attention", "mode": "follow", "started_at": at(-18), "finished_at": at(-17),
         "roots": [ROOT], "problems": [refused.format(a1, f"{ROOT}/{A}")],
         "refused": [{"root": ROOT, "job_dir": A, "metadata_uri": a1, "reason": refused.format(a1, f"{ROOT}/{A}")}]},
        {"run_id": "f1", "status": "succeeded", "mode": "follow", "started_at": at(-16), "finished_at": at(-15),
         "roots": [ROOT], "verified": 1, "files_copied": 2, "bytes_copied": 40},
        {"run_id": "f2", "status": "attention", "mode": "follow", "started_at": at(-11), "finished_at": at(-10),
         "roots": [ROOT], "failed": 1, "problems": [f"{ROOT}/{A}/chk-3/_metadata: copy failed: ..."]},
        # refusals leave no dr_copies row: the round's `refused` records them (and a line of `problems` each)
        {"run_id": "f3", "status": "attention", "mode": "follow", "started_at": at(-6), "finished_at": at(-5),
         "roots": [ROOT], "problems": [refused.format(f"{ROOT}/{A}/chk-4/_metadata", f"{ROOT}/{A}"),
                                       refused.format(b5, f"{ROOT}/{A}")],
         "refused": [{"root": ROOT, "job_dir": A, "metadata_uri": f"{ROOT}/{A}/chk-4/_metadata", "reason": "..."},
                     {"root": ROOT, "job_dir": B, "metadata_uri": b5, "reason": "..."}]},
    ])
    return Store(wh, {"a1": a1, "a2": a2, "b5": b5, "flat3": flat3})

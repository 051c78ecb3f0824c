"""Unit-level index behaviour that needs storage faults: unreadable `_metadata` and unlistable
directories. Storage is real (a copy of a Flink store on local disk); a thin FileIO subclass makes
chosen objects fail the way a permission error or a flaky network would (the tests run as root,
so file permissions cannot produce the fault)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.index.parse import RootIndex
from statekeeper.index.unit import FAILED, REWRITTEN, UNCHANGED, UnitContext, UnitPlan, index_unit
from statekeeper.storage import GuardedFileIO, LocalFileIO, Roots, UnreadableObjectError
from statekeeper.tables import Warehouse, delta_log
from statekeeper.tables.catalog import INDEX_TABLES, job_bucket
from statekeeper.tables.files import write_data_file
from statekeeper.uri import normalize_uri

pytestmark = pytest.mark.flink
VERSION = harness.FLINK_VERSIONS[0]


class FlakyLocalFileIO(LocalFileIO):
    def __init__(self, unreadable=(), unlistable=()):
        self.unreadable = {normalize_uri(u) for u in unreadable}
        self.unlistable = {normalize_uri(u) for u in unlistable}

    def open_input(self, uri, *, info=None):
        if normalize_uri(uri) in self.unreadable:
            raise UnreadableObjectError(f"permission denied reading {uri}")
        return super().open_input(uri, info=info)

    def list(self, directory, *, recursive=True):
        if normalize_uri(directory) in self.unlistable:
            raise UnreadableObjectError(f"permission denied listing {directory}")
        return super().list(directory, recursive=recursive)


@pytest.fixture
def job(flink_fixture, tmp_path):
    fixture = flink_fixture(VERSION, "incremental")
    shutil.copytree(fixture.root / "checkpoints", tmp_path / "checkpoints")
    root = Roots([str(tmp_path / "checkpoints")])
    job_dir = next(p for p in (tmp_path / "checkpoints").iterdir() if p.is_dir())
    return root, job_dir.name, sorted(job_dir.rglob("_metadata"))


def context(io, roots, warehouse, run_id):
    return UnitContext(GuardedFileIO(io, roots), warehouse, warehouse.file_io(), run_id, RootIndex(list(roots)))


def persist(warehouse, result, previous_state):
    """Commit a unit result the way the change set would, returning the new states."""
    for spec in INDEX_TABLES:
        state = previous_state.get(spec.name)
        adds = []
        if spec.name in result.tables:
            t = spec.conform(result.tables[spec.name])
            values = {"root_id": t.column("root_id")[0].as_py(), "bucket": t.column("bucket")[0].as_py()}
            adds = [write_data_file(warehouse, spec, t, values)]
        delta_log.commit(warehouse, spec, adds, result.removes.get(spec.name, []),
                         read_version=None if state is None else state.version)
    return {spec.name: delta_log.load_state(warehouse, spec.name) for spec in INDEX_TABLES}


def previous_for(states, root, job_dir):
    return {name: state.files_by_partition().get((root.root_id, job_bucket(job_dir)), [])
            for name, state in states.items() if state is not None}


def test_unreadable_metadata_is_recorded_and_retried(job, tmp_path):
    roots, job_dir, metadata = job
    root = next(iter(roots))
    warehouse = Warehouse(str(tmp_path / "wh"))
    victim = normalize_uri(str(metadata[0]))

    first = index_unit(context(FlakyLocalFileIO(unreadable=[victim]), roots, warehouse, "r1"),
                       UnitPlan(root, job_dir, {}))
    assert first.outcome == REWRITTEN
    snaps = {r["uri"]: r for r in first.tables["snapshots"].to_pylist()}
    assert snaps[victim]["status"] == "unreadable" and "permission denied" in snaps[victim]["error"]
    assert all(r["status"] == "ok" for u, r in snaps.items() if u != victim)
    assert first.stats.metadata_failed == 1 and any(victim in e for e in first.stats.errors)
    assert victim not in set(first.tables["references"].column("snapshot_uri").to_pylist())
    states = persist(warehouse, first, {})

    # Storage unchanged, but an unreadable snapshot is retried; the others are reused, not re-parsed.
    second = index_unit(context(FlakyLocalFileIO(), roots, warehouse, "r2"),
                        UnitPlan(root, job_dir, previous_for(states, root, job_dir)))
    assert second.outcome == REWRITTEN
    assert second.stats.metadata_parsed == 1 and second.stats.metadata_reused == len(metadata) - 1
    snaps = {r["uri"]: r for r in second.tables["snapshots"].to_pylist()}
    assert snaps[victim]["status"] == "ok" and snaps[victim]["index_run_id"] == "r2"
    assert victim in set(second.tables["references"].column("snapshot_uri").to_pylist())
    states = persist(warehouse, second, states)

    third = index_unit(context(FlakyLocalFileIO(), roots, warehouse, "r3"),
                       UnitPlan(root, job_dir, previous_for(states, root, job_dir)))
    assert third.outcome == UNCHANGED and third.tables == {} and third.removes == {}


def test_unlistable_directory_keeps_previous_rows(job, tmp_path):
    roots, job_dir, _ = job
    root = next(iter(roots))
    warehouse = Warehouse(str(tmp_path / "wh"))
    states = persist(warehouse, index_unit(context(FlakyLocalFileIO(), roots, warehouse, "r1"),
                                           UnitPlan(root, job_dir, {})), {})
    unit_uri = f"{root.uri}/{job_dir}"
    failed = index_unit(context(FlakyLocalFileIO(unlistable=[unit_uri]), roots, warehouse, "r2"),
                        UnitPlan(root, job_dir, previous_for(states, root, job_dir)))
    assert failed.outcome == FAILED
    assert failed.tables == {} and failed.removes == {}  # previous rows are not removed
    assert failed.stats.units_failed == 1 and "previous rows kept" in failed.stats.errors[0]


def test_references_outside_roots_are_external(job, tmp_path):
    """A snapshot whose shared files lie outside every configured root (a copied store still
    naming the original location) keeps those references, attributed to no root."""
    roots, job_dir, metadata = job
    root = next(iter(roots))
    result = index_unit(context(FlakyLocalFileIO(), roots, Warehouse(str(tmp_path / "wh")), "r"),
                        UnitPlan(root, job_dir, {}))
    refs = result.tables["references"].to_pylist()
    external = [r for r in refs if r["file_kind"] == "external"]
    inside = [r for r in refs if r["file_kind"] != "external"]
    assert external, "the copy's absolute shared/ paths still name the cached store"
    assert all(r["file_root"] is None and r["file_job_dir"] is None for r in external)
    assert all(r["file_uri"].startswith(root.uri + "/") for r in inside)
    assert {r["file_kind"] for r in inside} <= {"exclusive", "shared", "task_owned"}


def test_task_hands_its_rows_to_the_writer_as_ipc_add_rows(job, tmp_path):
    """An index task's output: Arrow IPC `add` rows of each bucket partition (Delta's writer makes the data files
    from them) and one note with its counters."""
    import json

    import pyarrow as pa

    from statekeeper.index.planner import balance, plan_buckets
    from statekeeper.index.task import IndexTask, encode_previous
    from statekeeper.storage import StorageConfig
    from statekeeper.tables.arrow_codec import table_from_ipc
    from statekeeper.tables.catalog import spec

    roots, _, metadata = job
    planned = plan_buckets(LocalFileIO(), roots, {})
    bins = [[(b.plan.root.uri, b.plan.bucket, b.plan.job_dirs, encode_previous(b.plan.previous)) for b in g]
            for g in balance(planned, 1)]
    warehouse = Warehouse(str(tmp_path / "wh"))
    task = IndexTask(roots.uris, StorageConfig(), warehouse, "r", None, bins, None)
    rows = pa.Table.from_batches(list(task(iter([pa.record_batch({"id": pa.array([0], pa.int64())})])))).to_pylist()
    assert {r["op"] for r in rows} == {"add", "note"}
    tables: dict[str, list] = {}
    for r in rows:
        if r["op"] == "add":
            assert set(json.loads(r["partition"])) == {"root_id", "bucket"}
            tables.setdefault(r["table"], []).extend(table_from_ipc(r["payload"]).to_pylist())
        else:
            note = json.loads(r["payload"].decode())
            assert note["metadata_parsed"] == len(metadata)
    assert len(tables["snapshots"]) == len(metadata)
    # the task wrote nothing itself: Delta's writer makes the data files from these rows
    assert not list(tmp_path.glob("wh/**/*.parquet"))



"""Incremental and idempotent indexing on a COPY of a real Flink store (never the cache)."""
from __future__ import annotations

import shutil
import struct
import threading
from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.tables import ConcurrentCommitError, Warehouse
from statekeeper.uri import normalize_uri
from tests.index.support import TABLES, canonical, local_listing, run_index, table_rows, table_version

pytestmark = [pytest.mark.flink, pytest.mark.spark]

VERSION = harness.FLINK_VERSIONS[0]


@pytest.fixture
def store(flink_fixture, tmp_path) -> Path:
    """A private copy of the `savepoints` scenario (checkpoints and savepoints roots)."""
    fixture = flink_fixture(VERSION, "savepoints")
    dest = tmp_path / "store"
    shutil.copytree(fixture.root, dest, symlinks=False)
    return dest


def roots_of(store: Path) -> list[str]:
    return [str(store / "checkpoints"), str(store / "savepoints")]


def snapshot(wh: Warehouse) -> dict[str, list]:
    return {t: canonical(table_rows(wh, t)) for t in TABLES}


def test_rerun_without_storage_change_changes_nothing(spark, store, tmp_path):
    wh = Warehouse(str(tmp_path / "wh"))
    first = run_index(spark, roots_of(store), wh)
    assert first.status == "succeeded"
    assert first.metadata_found > 0 and first.metadata_parsed == first.metadata_found
    before, versions = snapshot(wh), {t: table_version(wh, t) for t in TABLES}

    second = run_index(spark, roots_of(store), wh)
    assert second.status == "succeeded"
    assert second.metadata_parsed == 0, "unchanged _metadata must not be re-parsed"
    assert second.metadata_reused == first.metadata_found
    assert second.units_rewritten == 0 and second.units_unchanged == second.units
    assert {t: table_version(wh, t) for t in TABLES} == versions  # not even an empty commit
    assert snapshot(wh) == before
    runs = sorted(table_rows(wh, "index_runs"), key=lambda r: r["started_at"])
    assert [r["run_id"] for r in runs] == [first.run_id, second.run_id]
    assert [r["status"] for r in runs] == ["succeeded", "succeeded"]
    assert dict(runs[0]["table_versions"]) == dict(runs[1]["table_versions"]) == versions
    assert runs[1]["metadata_parsed"] == 0 and runs[0]["objects_listed"] == runs[1]["objects_listed"]


def _metadata_files(store: Path) -> list[Path]:
    return sorted((store / "checkpoints").rglob("_metadata"))


def test_changed_deleted_new_and_bad_metadata(spark, store, tmp_path):
    wh = Warehouse(str(tmp_path / "wh"))
    first = run_index(spark, roots_of(store), wh)
    v_first = table_version(wh, "snapshots")
    checkpoints = _metadata_files(store)
    assert len(checkpoints) >= 3
    truncated, deleted, bumped = checkpoints[0], checkpoints[1], checkpoints[2]
    deleted_uri = normalize_uri(str(deleted))
    new_dir = bumped.parent.with_name("chk-99")                        # a new checkpoint appears
    shutil.copytree(bumped.parent, new_dir)
    data = truncated.read_bytes()
    truncated.write_bytes(data[: len(data) // 3])                      # corrupt: cut short
    deleted.unlink()                                                   # Flink subsumed it
    raw = bytearray(bumped.read_bytes())
    raw[4:8] = struct.pack(">i", 99)                                   # a future format version
    bumped.write_bytes(bytes(raw))
    untouched = next(p for p in (bumped.parent.parent / "shared").iterdir() if p.is_file())
    orphan = bumped.parent.parent / "shared" / "orphan-upload"
    orphan.write_bytes(b"x" * 123)

    second = run_index(spark, roots_of(store), wh)
    assert second.status == "succeeded"  # bad _metadata are recorded, not fatal
    assert second.metadata_parsed == 3                                 # truncated, bumped, new
    others = first.metadata_found - len(checkpoints)                   # the savepoints: not touched
    assert others > 0 and second.metadata_reused == others
    assert second.metadata_failed == 2
    assert second.units_unchanged >= 1                                 # the savepoints root did not change
    assert any(str(truncated) in e for e in second.errors)

    rows = {r["uri"]: r for r in table_rows(wh, "snapshots")}
    assert deleted_uri not in rows
    bad = rows[normalize_uri(str(truncated))]
    assert bad["status"] == "parse_error" and str(truncated) in bad["error"]
    future = rows[normalize_uri(str(bumped))]
    assert future["status"] == "unsupported" and "99" in future["error"]
    assert future["checkpoint_id"] == future["dir_checkpoint_id"]      # from the path when unparseable
    fresh = rows[normalize_uri(str(new_dir / "_metadata"))]
    assert fresh["status"] == "ok" and fresh["dir_checkpoint_id"] == 99
    assert fresh["checkpoint_id"] == int(bumped.parent.name.split("-")[1])  # the id written inside
    assert fresh["index_run_id"] == second.run_id
    savepoint_rows = [r for r in rows.values() if r["layout_kind"] == "savepoint_metadata"]
    assert savepoint_rows and all(r["index_run_id"] == first.run_id for r in savepoint_rows)

    refs = table_rows(wh, "references")
    by_snapshot = {r["snapshot_uri"] for r in refs}
    assert deleted_uri not in by_snapshot and bad["uri"] not in by_snapshot and future["uri"] not in by_snapshot
    assert fresh["uri"] in by_snapshot

    files = {r["uri"]: r for r in table_rows(wh, "files")}
    expected = {**local_listing(store / "checkpoints"), **local_listing(store / "savepoints")}
    assert {u: r["size"] for u, r in files.items()} == expected
    assert files[normalize_uri(str(orphan))]["index_run_id"] == second.run_id
    assert files[normalize_uri(str(untouched))]["index_run_id"] == first.run_id  # same object version

    # History stays in Delta: the version the first run wrote still has the deleted snapshot.
    assert deleted_uri in {r["uri"] for r in table_rows(wh, "snapshots", version=v_first)}

    # Deterministic failures are not retried; the next run is a no-op again.
    before = snapshot(wh)
    third = run_index(spark, roots_of(store), wh)
    assert third.metadata_parsed == 0 and third.units_rewritten == 0
    assert snapshot(wh) == before


def test_vanished_job_directory_disappears_from_current_view(spark, store, tmp_path):
    wh = Warehouse(str(tmp_path / "wh"))
    run_index(spark, roots_of(store), wh)
    job_dir = _metadata_files(store)[0].parent.parent
    shutil.rmtree(job_dir)
    result = run_index(spark, roots_of(store), wh)
    assert result.status == "succeeded"
    gone = normalize_uri(str(job_dir)) + "/"
    for table, column in (("files", "uri"), ("snapshots", "uri"), ("references", "snapshot_uri"),
                          ("inline_state", "snapshot_uri")):
        assert not [r for r in table_rows(wh, table) if r[column].startswith(gone)], table


def test_job_filter_rewrites_only_matching_job_directories(spark, store, tmp_path):
    wh = Warehouse(str(tmp_path / "wh"))
    run_index(spark, roots_of(store), wh)
    before = snapshot(wh)
    job = _metadata_files(store)[0].parent.parent.name
    (store / "checkpoints" / job / "shared" / "late-upload").write_bytes(b"1")
    filtered = run_index(spark, roots_of(store), wh, job_filter="zzz*")
    assert filtered.units == 0 and snapshot(wh) == before
    matched = run_index(spark, roots_of(store), wh, job_filter=job[:8] + "*")
    assert matched.units == 1 and matched.units_rewritten == 1
    assert normalize_uri(str(store / "checkpoints" / job / "shared" / "late-upload")) in {
        r["uri"] for r in table_rows(wh, "files")}


def test_missing_root_fails_closed(spark, store, tmp_path):
    from statekeeper.storage import RootNotFoundError

    wh = Warehouse(str(tmp_path / "wh"))
    with pytest.raises(RootNotFoundError, match="refusing to treat it as empty"):
        run_index(spark, [str(store / "checkpoints"), str(store / "not-mounted")], wh)


def test_concurrent_runs_never_corrupt_the_warehouse(spark, store, tmp_path):
    """Two runs on one warehouse: the loser fails with ConcurrentCommitError (or they serialize);
    either way the tables equal a clean single run and hold no half-committed data."""
    from statekeeper.launch.session import activate

    wh = Warehouse(str(tmp_path / "wh"))
    outcomes: list[object] = []
    barrier = threading.Barrier(2)

    def run():
        activate(spark)
        barrier.wait()
        try:
            outcomes.append(run_index(spark, roots_of(store), wh))
        except BaseException as exc:  # noqa: BLE001 - inspected below
            outcomes.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(failures) <= 1, failures
    for f in failures:
        assert isinstance(f, ConcurrentCommitError), repr(f)
        assert "Re-run" in str(f)
    clean = Warehouse(str(tmp_path / "clean"))
    run_index(spark, roots_of(store), clean)
    strip = lambda rows: canonical([{k: v for k, v in r.items() if k != "index_run_id"} for r in rows])  # noqa: E731
    for table in TABLES:
        assert strip(table_rows(wh, table)) == strip(table_rows(clean, table)), table
    statuses = sorted(r["status"] for r in table_rows(wh, "index_runs"))
    assert statuses == sorted(["failed"] * len(failures) + ["succeeded"] * (2 - len(failures)))
    # No data files of the loser linger in the tables' directories.
    from statekeeper.tables import delta_log
    for table in TABLES:
        io_ = wh.file_io()
        base = wh.table_uri(table)
        on_disk = {i.uri[len(base) + 1:] for i in io_.list(base) if i.uri.endswith(".parquet")}
        assert on_disk == {f.path for f in delta_log.load_state(wh, table).files}, table

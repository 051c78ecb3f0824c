"""Delta table IO without Spark: parquet data files + one delta-rs commit, read back by deltalake."""
from __future__ import annotations

import json
import os
from datetime import datetime, timezone

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from statekeeper.tables import ConcurrentCommitError, TableSchemaError, TableSpec, UnsupportedTableError, Warehouse
from statekeeper.tables import delta_log
from statekeeper.tables.files import file_stats, split_partitions, write_data_file

SPEC = TableSpec("things", pa.schema([
    pa.field("part", pa.string(), nullable=False),
    pa.field("n", pa.int64()),
    pa.field("name", pa.string()),
    pa.field("ts", pa.timestamp("us", tz="UTC")),
    pa.field("tags", pa.list_(pa.string())),
]), ("part",))


def rows(part: str, ns: list[int]) -> pa.Table:
    return pa.table({
        "part": [part] * len(ns), "n": ns, "name": [f"{part}-{n}" for n in ns],
        "ts": pa.array([datetime(2026, 1, 1, 0, 0, 0, n, tzinfo=timezone.utc) for n in ns], pa.timestamp("us", tz="UTC")),
        "tags": [[part] for _ in ns],
    }, schema=SPEC.schema)


def write(warehouse: Warehouse, table: pa.Table):
    return [write_data_file(warehouse, SPEC, part, values) for values, part in split_partitions(SPEC, SPEC.conform(table))]


def content(warehouse: Warehouse, name: str = "things") -> list[dict]:
    dt = DeltaTable(warehouse.delta_location(name), storage_options=warehouse.storage_options())
    return sorted(dt.to_pyarrow_table().to_pylist(), key=lambda r: (r["part"], r["n"]))


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def warehouse(request, tmp_path):
    if request.param == "local":
        return Warehouse(str(tmp_path / "wh"))
    config = request.getfixturevalue("s3_config")
    bucket = request.getfixturevalue("s3_bucket")
    return Warehouse(f"s3://{bucket}/warehouse", config)


def test_create_append_and_replace_partition(warehouse):
    assert delta_log.load_state(warehouse, "things") is None
    first = write(warehouse, pa.concat_tables([rows("a", [1, 2]), rows("b", [3])]))
    assert len(first) == 2  # one file per partition
    r0 = delta_log.commit(warehouse, SPEC, first, [], read_version=None)
    assert (r0.version, r0.files_added, r0.rows_added) == (0, 2, 3)
    assert [r["n"] for r in content(warehouse)] == [1, 2, 3]

    state = delta_log.load_state(warehouse, "things")
    assert state.version == 0 and state.partition_by == ("part",)
    by_part = state.files_by_partition()
    new_a = write(warehouse, rows("a", [10]))
    r1 = delta_log.commit(warehouse, SPEC, new_a, by_part[("a",)], read_version=0)
    assert (r1.version, r1.files_added, r1.files_removed) == (1, 1, 1)
    assert [(r["part"], r["n"]) for r in content(warehouse)] == [("a", 10), ("b", 3)]
    got = content(warehouse)[0]
    assert got["name"] == "a-10" and got["tags"] == ["a"] and got["ts"].microsecond == 10


def test_nothing_to_commit_makes_no_version(warehouse):
    delta_log.commit(warehouse, SPEC, write(warehouse, rows("a", [1])), [], read_version=None)
    result = delta_log.commit(warehouse, SPEC, [], [], read_version=0)
    assert result.version is None
    assert delta_log.latest_version(warehouse, "things") == 0


def test_concurrent_strict_commit_loses_cleanly(warehouse):
    delta_log.commit(warehouse, SPEC, write(warehouse, rows("a", [1])), [], read_version=None)
    state = delta_log.load_state(warehouse, "things")
    winner = write(warehouse, rows("a", [2]))
    loser = write(warehouse, rows("a", [3]))
    delta_log.commit(warehouse, SPEC, winner, list(state.files), read_version=state.version)
    with pytest.raises(ConcurrentCommitError, match="planned against version 0, but the table is now at version 1"):
        delta_log.commit(warehouse, SPEC, loser, list(state.files), read_version=state.version)
    assert [r["n"] for r in content(warehouse)] == [2]
    io_ = warehouse.file_io()
    for f in loser:  # the loser's files are gone, the winner's remain
        assert not io_.exists(f"{warehouse.table_uri('things')}/{f.path}")
    for f in winner:
        assert io_.exists(f"{warehouse.table_uri('things')}/{f.path}")


def test_strict_blind_appends_do_not_both_land(warehouse):
    """Two runs adding the same new partition would duplicate rows if appends were allowed to commute."""
    delta_log.commit(warehouse, SPEC, write(warehouse, rows("a", [1])), [], read_version=None)
    delta_log.commit(warehouse, SPEC, write(warehouse, rows("new", [5])), [], read_version=0)
    with pytest.raises(ConcurrentCommitError):
        delta_log.commit(warehouse, SPEC, write(warehouse, rows("new", [5])), [], read_version=0)
    assert [r["part"] for r in content(warehouse)].count("new") == 1


def test_non_strict_append_retries_over_other_appends(warehouse):
    delta_log.commit(warehouse, SPEC, write(warehouse, rows("a", [1])), [], read_version=None)
    delta_log.commit(warehouse, SPEC, write(warehouse, rows("b", [2])), [], read_version=0)
    r = delta_log.commit(warehouse, SPEC, write(warehouse, rows("c", [3])), [], read_version=0, strict=False)
    assert r.version == 2
    assert [r["part"] for r in content(warehouse)] == ["a", "b", "c"]


def test_concurrent_table_creation(warehouse):
    delta_log.commit(warehouse, SPEC, write(warehouse, rows("a", [1])), [], read_version=None)
    with pytest.raises(ConcurrentCommitError, match="planned against absent"):
        delta_log.commit(warehouse, SPEC, write(warehouse, rows("b", [1])), [], read_version=None)


def test_racing_creations_leave_one_winner(warehouse, tmp_path):
    """Two creates that both found no table: exactly one lands as version 0, the other loses cleanly
    (delta-rs would otherwise retry the loser's create as version 1 on top of the winner's)."""
    import threading

    for round_ in range(6):
        name = f"race{round_}"
        spec = TableSpec(name, SPEC.schema, SPEC.partition_by)
        files = {side: [write_data_file(warehouse, spec, part, values) for values, part in
                        split_partitions(spec, spec.conform(rows(side, [1])))] for side in ("x", "y")}
        barrier = threading.Barrier(2)
        outcomes: dict[str, object] = {}

        def create(side: str) -> None:
            barrier.wait()
            try:
                outcomes[side] = delta_log.commit(warehouse, spec, files[side], [], read_version=None).version
            except ConcurrentCommitError as exc:
                outcomes[side] = exc

        threads = [threading.Thread(target=create, args=(side,)) for side in files]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(map(type, outcomes.values()), key=str) == sorted([int, ConcurrentCommitError], key=str), outcomes
        assert delta_log.latest_version(warehouse, name) == 0
        winner = next(side for side, o in outcomes.items() if o == 0)
        assert [r["part"] for r in content(warehouse, name)] == [winner]


def test_schema_checks(tmp_path):
    warehouse = Warehouse(str(tmp_path / "wh"))
    delta_log.commit(warehouse, SPEC, write(warehouse, rows("a", [1])), [], read_version=None)
    other = TableSpec("things", pa.schema([pa.field("part", pa.string(), nullable=False), ("n", pa.string())]),
                      ("part",))
    with pytest.raises(TableSchemaError, match="differ from the declared schema"):
        delta_log.check_compatible(delta_log.load_state(warehouse, "things"), other)
    with pytest.raises(TableSchemaError, match="missing"):
        SPEC.conform(pa.table({"part": ["a"]}))
    with pytest.raises(TableSchemaError, match="non-null string"):
        TableSpec("bad", pa.schema([("p", pa.int64())]), ("p",))


def test_tables_with_unsupported_reader_features_are_refused(tmp_path):
    location = str(tmp_path / "dv")
    DeltaTable.create(location, schema=pa.schema([("x", pa.int64())]),
                      configuration={"delta.enableDeletionVectors": "true"})
    with pytest.raises(UnsupportedTableError, match="reader version"):
        delta_log.load_state(Warehouse(str(tmp_path)), "dv")


def test_file_stats_are_safe_for_skipping():
    t = rows("a", [1, 999])
    stats = file_stats(t.drop_columns(["part"]))
    assert stats["numRecords"] == 2
    assert stats["minValues"]["n"] == 1 and stats["maxValues"]["n"] == 999
    assert stats["minValues"]["ts"] == "2026-01-01T00:00:00.000Z"
    assert stats["maxValues"]["ts"] == "2026-01-01T00:00:00.001Z"  # 999 µs rounds the max up
    assert "tags" not in stats["nullCount"]
    long = pa.table({"s": ["x" * 40, "y"]})
    assert "s" not in file_stats(long)["maxValues"]


def test_commit_metadata_is_recorded(tmp_path):
    warehouse = Warehouse(str(tmp_path / "wh"))
    delta_log.commit(warehouse, SPEC, write(warehouse, rows("a", [1])), [], read_version=None,
                     metadata={"statekeeper.runId": "r-1"})
    history = DeltaTable(warehouse.delta_location("things")).history(1)[0]
    assert history["statekeeper.runId"] == "r-1"
    assert os.path.isdir(warehouse.delta_location("things") + "/_delta_log")
    json.dumps(history)


def test_non_strict_append_to_a_table_created_meanwhile(warehouse):
    """An audit-style append planned when the table did not exist lands after a concurrent create."""
    other = write(warehouse, rows("a", [1]))
    mine = write(warehouse, rows("b", [2]))
    delta_log.commit(warehouse, SPEC, other, [], read_version=None)
    r = delta_log.commit(warehouse, SPEC, mine, [], read_version=None, strict=False)
    assert r.version == 1
    assert [r["part"] for r in content(warehouse)] == ["a", "b"]


def test_a_table_written_before_a_column_was_added_gains_it(warehouse):
    """Catalog tables grow by trailing nullable columns (gc_runs.ownerless, dr_files.target_version):
    an older table gets them in one ADD COLUMN commit of its own; its rows read them as null."""
    old = TableSpec("things", pa.schema(list(SPEC.schema)[:-1]), SPEC.partition_by)
    first = [write_data_file(warehouse, old, part, values)
             for values, part in split_partitions(old, old.conform(rows("a", [1]).drop_columns(["tags"])))]
    delta_log.commit(warehouse, old, first, [], read_version=None)
    state = delta_log.add_missing_columns(warehouse, delta_log.load_state(warehouse, "things"), SPEC)
    assert state.schema.names == SPEC.schema.names and state.version == 1
    delta_log.check_compatible(state, SPEC)
    delta_log.commit(warehouse, SPEC, write(warehouse, rows("b", [2])), [], read_version=state.version)
    assert [(r["n"], r["tags"]) for r in content(warehouse)] == [(1, None), (2, ["b"])]
    history = DeltaTable(warehouse.delta_location("things"), storage_options=warehouse.storage_options()).history()
    assert "ADD COLUMN" in {h["operation"] for h in history}
    assert "ADD COLUMN" in delta_log.ROW_PRESERVING_OPERATIONS
    # anything but trailing nullable columns is still refused
    changed = TableSpec("things", pa.schema([*list(SPEC.schema), pa.field("must", pa.int64(), nullable=False)]),
                        SPEC.partition_by)
    state = delta_log.add_missing_columns(warehouse, delta_log.load_state(warehouse, "things"), changed)
    with pytest.raises(TableSchemaError):
        delta_log.check_compatible(state, changed)

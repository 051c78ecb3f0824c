"""Delta tables written and read by the table engine of every Spark job: Delta Lake's Spark integration."""
from __future__ import annotations

import json
import threading
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from statekeeper.tables import ConcurrentCommitError, EngineUnavailableError, TableSpec, Warehouse
from statekeeper.tables import delta_log
from statekeeper.tables.arrow_codec import table_to_ipc
from statekeeper.tables.delta_spark import DeltaSparkEngine
from statekeeper.tables.engine import delta_spark_available, select_engine
from statekeeper.tables.errors import TableError
from tests.tables.readers import rows_of, same_reads

pytestmark = pytest.mark.spark

SPEC = TableSpec("events", pa.schema([
    pa.field("root_id", pa.string(), nullable=False),
    pa.field("job_dir", pa.string(), nullable=False),
    pa.field("n", pa.int64()),
    pa.field("label", pa.string()),
    pa.field("at", pa.timestamp("us", tz="UTC")),
    pa.field("attrs", pa.map_(pa.string(), pa.int64())),
]), ("root_id", "job_dir"))

OTHER = TableSpec("other", pa.schema([
    pa.field("root_id", pa.string(), nullable=False),
    pa.field("job_dir", pa.string(), nullable=False),
    pa.field("v", pa.string()),
]), ("root_id", "job_dir"))


def arrow_rows(root: str, job: str, ns: list[int]) -> pa.Table:
    return pa.table({
        "root_id": [root] * len(ns), "job_dir": [job] * len(ns), "n": ns, "label": [f"{job}:{n}" for n in ns],
        "at": pa.array([datetime(2026, 3, 1, tzinfo=timezone.utc)] * len(ns), pa.timestamp("us", tz="UTC")),
        "attrs": pa.array([[("k", n)] for n in ns], pa.map_(pa.string(), pa.int64())),
    }, schema=SPEC.schema)


def df_of(spark, table: pa.Table):
    return spark.createDataFrame(table)


def collect(df) -> list[tuple]:
    return sorted((r["root_id"], r["job_dir"], r["n"]) for r in df.collect())


@pytest.fixture
def warehouse(tmp_path):
    # Tables on an s3a:// warehouse: tests/tables/test_s3a_tables.py.
    return Warehouse(str(tmp_path / "wh"))


ENGINE = DeltaSparkEngine()


def test_write_modes_and_read_back(spark, warehouse):
    engine = ENGINE
    data = pa.concat_tables([arrow_rows("r1", "j1", [1, 2]), arrow_rows("r1", "j2", [3]), arrow_rows("r2", "j1", [4])])
    assert engine.write(df_of(spark, data).repartition(2), warehouse, SPEC, mode="append").version == 0
    assert collect(engine.read(spark, warehouse, "events")) == [("r1", "j1", 1), ("r1", "j1", 2), ("r1", "j2", 3),
                                                                ("r2", "j1", 4)]
    back = engine.read(spark, warehouse, "events").where("n = 1").collect()[0]
    assert back["label"] == "j1:1" and back["attrs"] == {"k": 1}
    assert back["at"] == datetime(2026, 3, 1)  # session time zone is UTC; Spark returns naive datetimes

    replaced = engine.write(df_of(spark, arrow_rows("r1", "j1", [10])), warehouse, SPEC, mode="replace_partitions",
                            replace=[{"root_id": "r1", "job_dir": "j1"}, {"root_id": "r9", "job_dir": "gone"}])
    assert replaced.version == 1
    assert collect(engine.read(spark, warehouse, "events")) == [("r1", "j1", 10), ("r1", "j2", 3), ("r2", "j1", 4)]
    assert len(engine.read(spark, warehouse, "events", version=0).collect()) == 4
    assert collect(engine.read(spark, warehouse, "events", partitions={"job_dir": ["j2"]})) == [("r1", "j2", 3)]
    # a row outside the partitions it replaces is refused, not written
    with pytest.raises(Exception, match="replaceWhere|DELTA_REPLACE_WHERE"):
        engine.write(df_of(spark, arrow_rows("r2", "j1", [5])), warehouse, SPEC, mode="replace_partitions",
                     replace=[{"root_id": "r1", "job_dir": "j1"}])
    assert delta_log.latest_version(warehouse, "events") == 1

    engine.write(df_of(spark, arrow_rows("r3", "j", [7])), warehouse, SPEC, mode="overwrite")
    assert collect(engine.read(spark, warehouse, "events")) == [("r3", "j", 7)]
    # Same content through deltalake directly, and through the driver's reader.
    dt = DeltaTable(warehouse.delta_location("events"), storage_options=warehouse.storage_options())
    assert dt.to_pyarrow_table().column("n").to_pylist() == [7]
    assert same_reads(spark, warehouse, "events") == 1


def test_expected_version_guards_the_write(spark, warehouse):
    ENGINE.write(df_of(spark, arrow_rows("r", "a", [1])), warehouse, SPEC)
    ENGINE.write(df_of(spark, arrow_rows("r", "b", [2])), warehouse, SPEC)
    with pytest.raises(ConcurrentCommitError, match="version 0"):
        ENGINE.write(df_of(spark, arrow_rows("r", "c", [3])), warehouse, SPEC, expected_version=0)
    assert delta_log.latest_version(warehouse, "events") == 1
    assert collect(ENGINE.read(spark, warehouse, "events")) == [("r", "a", 1), ("r", "b", 2)]


@pytest.mark.parametrize("mode", ["replace_partitions", "append"])
def test_concurrent_writers_one_commit_wins_and_the_other_loses_nothing_it_did_not_write(spark, warehouse, mode):
    """Two writers planned from the same version replace the same partition, or append (which Delta lets commute
    unless the write read the table, as a planned write did): Delta's conflict detection at commit time (not a
    check before the write) lets one win; the other fails with ConcurrentCommitError and none of its rows are in
    the table."""
    ENGINE.write(df_of(spark, arrow_rows("r", "a", [0])), warehouse, SPEC)
    barrier = threading.Barrier(2)
    outcomes: dict[str, BaseException | int] = {}

    def writer(name: str, n: int) -> None:
        from statekeeper.launch.session import activate

        activate(spark)
        rows = df_of(spark, arrow_rows("r", "a", [n]))
        # both start their transaction at version 0, then race to commit
        barrier.wait()
        try:
            outcomes[name] = ENGINE.write(rows, warehouse, SPEC, mode=mode,
                                          replace=[{"root_id": "r", "job_dir": "a"}], expected_version=0).version
        except BaseException as exc:  # noqa: BLE001 - judged below
            outcomes[name] = exc

    threads = [threading.Thread(target=writer, args=(name, n)) for name, n in (("one", 1), ("two", 2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [name for name, o in outcomes.items() if o == 1]
    lost = [o for o in outcomes.values() if isinstance(o, BaseException)]
    assert len(won) == 1 and len(lost) == 1, outcomes
    assert isinstance(lost[0], ConcurrentCommitError), lost[0]
    winner = 1 if won == ["one"] else 2
    assert collect(ENGINE.read(spark, warehouse, "events")) == ([("r", "a", winner)] if mode == "replace_partitions"
                                                                else [("r", "a", 0), ("r", "a", winner)])
    assert delta_log.latest_version(warehouse, "events") == 1


def test_a_conflict_reported_against_the_writes_own_landed_commit_keeps_it(spark, warehouse, monkeypatch):
    """A store that answers a commit's retried upload as taken by another writer (its first upload landed, the answer
    was lost) makes Delta report a conflict with the write's own commit. The log holds the write's commit id at
    that version: the write reports it, and the data files it names stay (deleting them as a loser's would leave
    the table naming missing files). S3 through our log store never gets here (it reads the refused upload back;
    tests/tables/test_s3a_tables.py); another log store may."""
    import statekeeper.tables.delta_spark as delta_spark

    ENGINE.write(df_of(spark, arrow_rows("r", "a", [0])), warehouse, SPEC)
    real = delta_spark._commit

    def landed_then_conflict(txn, actions, operation, tags):
        real(txn, actions, operation, tags)
        raise RuntimeError("io.delta.exceptions.ConcurrentAppendException: a concurrent WRITE added data to table "
                           "committed at version 1 (as Delta reports it, here of this write's own commit)")

    monkeypatch.setattr(delta_spark, "_commit", landed_then_conflict)
    result = ENGINE.write(df_of(spark, arrow_rows("r", "b", [1])), warehouse, SPEC, mode="replace_partitions",
                          replace=[{"root_id": "r", "job_dir": "b"}], expected_version=0)
    assert result.version == 1
    assert collect(ENGINE.read(spark, warehouse, "events")) == [("r", "a", 0), ("r", "b", 1)]
    named = set(DeltaTable(warehouse.table_uri("events")).file_uris())
    assert named and all(Path(uri.removeprefix("file://")).is_file() for uri in named), named


def test_empty_table_reads_as_empty_dataframe(spark, warehouse):
    ENGINE.write(df_of(spark, arrow_rows("r", "a", [])), warehouse, SPEC)
    df = ENGINE.read(spark, warehouse, "events")
    assert df.collect() == [] and df.columns == SPEC.schema.names


def changeset_rows(spark, items):
    from statekeeper.tables.changeset import CHANGESET_SCHEMA
    return spark.createDataFrame(items, CHANGESET_SCHEMA).repartition(2)


def add(table: str, t: pa.Table, partition: dict) -> tuple:
    return (table, "add", json.dumps(partition, sort_keys=True), bytearray(table_to_ipc(t)))


def remove(table: str, partition: dict) -> tuple:
    return (table, "remove", json.dumps(partition, sort_keys=True), bytearray(b"{}"))


def test_changeset_commits_several_tables_in_one_pass(spark, warehouse):
    other = pa.table({"root_id": ["r"], "job_dir": ["a"], "v": ["x"]}, schema=OTHER.schema)
    items = [add("events", arrow_rows("r", "a", [1, 2]), {"root_id": "r", "job_dir": "a"}),
             add("events", arrow_rows("r", "b", [3]), {"root_id": "r", "job_dir": "b"}),
             add("other", other, {"root_id": "r", "job_dir": "a"}),
             ("", "note", "", bytearray(json.dumps({"kind": "t", "n": 1}).encode()))]
    result = ENGINE.commit_changeset(changeset_rows(spark, items), warehouse, [SPEC, OTHER],
                                     {"events": None, "other": None})
    assert {n: c.version for n, c in result.committed.items()} == {"events": 0, "other": 0}
    assert result.notes == [{"kind": "t", "n": 1}]
    # the next change set replaces partition a of events, drops b, leaves other alone
    items = [add("events", arrow_rows("r", "a", [9]), {"root_id": "r", "job_dir": "a"}),
             remove("events", {"root_id": "r", "job_dir": "b"})]
    result = ENGINE.commit_changeset(changeset_rows(spark, items), warehouse, [SPEC, OTHER],
                                     {"events": 0, "other": 0})
    assert result.committed["events"].version == 1 and result.committed["other"].version is None
    assert collect(ENGINE.read(spark, warehouse, "events")) == [("r", "a", 9)]
    assert [r["v"] for r in ENGINE.read(spark, warehouse, "other").collect()] == ["x"]


def test_changeset_conflict_commits_nothing(spark, warehouse):
    ENGINE.commit_changeset(changeset_rows(spark, [add("events", arrow_rows("r", "a", [1]),
                                                       {"root_id": "r", "job_dir": "a"})]),
                            warehouse, [SPEC, OTHER], {"events": None, "other": None})
    ENGINE.write(df_of(spark, arrow_rows("r", "z", [5])), warehouse, SPEC)
    other = pa.table({"root_id": ["r"], "job_dir": ["a"], "v": ["x"]}, schema=OTHER.schema)
    stale = [add("other", other, {"root_id": "r", "job_dir": "a"}),
             add("events", arrow_rows("r", "a", [2]), {"root_id": "r", "job_dir": "a"})]
    with pytest.raises(ConcurrentCommitError):
        ENGINE.commit_changeset(changeset_rows(spark, stale), warehouse, [SPEC, OTHER], {"events": 0, "other": 0})
    # the first change set created `other` empty (v0); the stale one was refused before committing anything
    assert delta_log.latest_version(warehouse, "events") == 1 and delta_log.latest_version(warehouse, "other") == 0
    assert collect(ENGINE.read(spark, warehouse, "events")) == [("r", "a", 1), ("r", "z", 5)]


def test_a_changeset_with_an_unknown_row_commits_nothing(spark, warehouse):
    items = [add("events", arrow_rows("r", "a", [1]), {"root_id": "r", "job_dir": "a"}),
             ("events", "file", json.dumps({"root_id": "r", "job_dir": "a"}), bytearray(b"{}"))]
    with pytest.raises(TableError, match="unknown change set op 'file'"):
        ENGINE.commit_changeset(changeset_rows(spark, items), warehouse, [SPEC], {"events": None})
    assert delta_log.latest_version(warehouse, "events") is None


def test_writes_from_another_python_thread(spark, warehouse):
    errors: list[BaseException] = []

    def work():
        try:
            ENGINE.write(df_of(spark, arrow_rows("t", "x", [1])), warehouse, SPEC)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert errors == []
    assert delta_log.latest_version(warehouse, "events") == 0


def test_polars_reads_the_tables_when_installed(spark, warehouse):
    pl = pytest.importorskip("polars")
    ENGINE.write(df_of(spark, arrow_rows("r", "a", [1])), warehouse, SPEC)
    assert pl.read_delta(warehouse.delta_location("events"))["n"].to_list() == [1]


class _ConfOnlySession:
    """A session shell exposing a chosen `spark.sql.extensions` and the real JVM of the test session."""

    def __init__(self, extensions: str, jvm):
        self._extensions = extensions
        self._jvm = jvm
        self.conf = self

    def get(self, key, default=None):
        return self._extensions if key == "spark.sql.extensions" else default


def test_a_session_without_delta_is_refused_with_what_to_add(spark, monkeypatch):
    import statekeeper.tables.engine as engine_mod
    from statekeeper.tables.engine import DELTA_EXTENSION

    assert delta_spark_available(spark) is True
    assert select_engine(spark, "auto").name == select_engine(spark, "delta-spark").name == "delta-spark"
    with pytest.raises(TableError, match="delta-rs was removed"):
        select_engine(spark, "delta-rs")
    bare = _ConfOnlySession("", spark._jvm)
    with pytest.raises(EngineUnavailableError, match="spark.sql.extensions"):
        select_engine(bare, "auto")
    # Extension configured but the class is not on the classpath: still unavailable.
    monkeypatch.setattr(engine_mod, "_DELTA_CLASS", "io.delta.NoSuchClass")
    assert delta_spark_available(_ConfOnlySession(DELTA_EXTENSION, spark._jvm)) is False


def test_a_catalog_table_older_than_its_trailing_columns_reads_them_as_null_until_written(spark, warehouse):
    """A catalog table written before its spec gained trailing nullable columns (dr_copies before the
    recovery-point columns) gets them on its next write; until then every reader, Spark's and the driver's,
    sees them as null, so no job asks whether a table predates a column."""
    from statekeeper.tables.catalog import DR_COPIES
    from statekeeper.tables.reader import TableReader

    added = ["source_completed_at", "published_at"]
    old = TableSpec(DR_COPIES.name, pa.schema([f for f in DR_COPIES.schema if f.name not in added]), ())
    at = datetime(2026, 3, 1, tzinfo=timezone.utc)
    values = {pa.string(): "x", pa.int64(): 1, pa.timestamp("us", tz="UTC"): at}
    row = old.conform(pa.Table.from_pylist([{f.name: values[f.type] for f in old.schema}], schema=old.schema))
    ENGINE.append_rows(spark, warehouse, old, row)
    assert delta_log.load_state(warehouse, DR_COPIES.name).schema.names == old.schema.names

    df = ENGINE.read(spark, warehouse, DR_COPIES.name)
    assert df.columns == DR_COPIES.schema.names
    [back] = df.collect()
    assert back["run_id"] == "x" and back["files"] == 1 and [back[c] for c in added] == [None, None]
    table = TableReader(warehouse).read(DR_COPIES.name, columns=["run_id", *added])
    assert table.to_pylist() == [{"run_id": "x", "source_completed_at": None, "published_at": None}]
    # reading changes nothing: the columns are added by the next write, as nullable columns of the table
    assert delta_log.load_state(warehouse, DR_COPIES.name).schema.names == old.schema.names
    ENGINE.write(df, warehouse, DR_COPIES)
    assert delta_log.load_state(warehouse, DR_COPIES.name).schema.names == DR_COPIES.schema.names
    assert same_reads(spark, warehouse, DR_COPIES.name) == 2


def _sample(t: pa.DataType, i: int):
    """A value of arrow type `t`, distinct per `i`."""
    from datetime import timedelta

    if pa.types.is_map(t):
        return [(_sample(t.key_type, i), _sample(t.item_type, i))]
    if pa.types.is_list(t):
        return [_sample(t.value_type, i), _sample(t.value_type, i + 1)]
    if pa.types.is_struct(t):
        return {f.name: _sample(f.type, i) for f in t}
    if pa.types.is_timestamp(t):
        return datetime(2026, 3, 1, tzinfo=timezone.utc) + timedelta(seconds=i, microseconds=7)
    if pa.types.is_boolean(t):
        return i % 2 == 0
    if pa.types.is_integer(t):
        return i
    if pa.types.is_floating(t):
        return i + 0.25
    return f"v{i}"


def _covering(specs) -> list:
    """Few tables that between them hold every column type of `specs`, partitioned and not."""
    def kinds(spec) -> set[str]:
        return {str(f.type) for f in spec.schema} | {f"partitioned={bool(spec.partition_by)}"}

    wanted = set().union(*map(kinds, specs))
    chosen: list = []
    while wanted:
        best = max(specs, key=lambda spec: len(kinds(spec) & wanted))
        chosen.append(best)
        wanted -= kinds(best)
    return chosen


def test_every_column_type_of_the_catalog_reads_alike_through_spark_and_the_driver(spark, warehouse):
    """Every column type the catalog uses (maps, lists of structs, zoned timestamps, nulls) written by Delta's
    Spark writer reads back the same through Spark and through the delta-rs TableReader of the CLI and report."""
    from statekeeper.tables.catalog import ALL_TABLES

    for spec in _covering(ALL_TABLES):
        rows = []
        for i in range(3):
            row = {f.name: None if (f.nullable and i == 2) else _sample(f.type, i) for f in spec.schema}
            row.update({c: f"p{i % 2}" for c in spec.partition_by})
            rows.append(row)
        table = spec.conform(pa.Table.from_pylist(rows, schema=spec.schema))
        ENGINE.append_rows(spark, warehouse, spec, table)
        assert same_reads(spark, warehouse, spec.name) == 3, spec.name


def test_partition_values_keep_their_exact_values(spark, warehouse):
    """Characters Spark escapes in a partition directory (%XX) and non-ASCII ones read back exactly, through
    Spark and through the driver's reader."""
    odd = ["a b/c", "50%=half", "x:y#z", "ünï", "s3://bucket/path"]
    for i, job in enumerate(odd):
        ENGINE.write(df_of(spark, arrow_rows("r", job, [i])), warehouse, SPEC)
    wanted = sorted(("r", job, i) for i, job in enumerate(odd))
    assert collect(ENGINE.read(spark, warehouse, "events")) == wanted
    state = delta_log.load_state(warehouse, "events")
    assert sorted(f.partition_values["job_dir"] for f in state.files) == sorted(odd)
    assert same_reads(spark, warehouse, "events") == len(odd)


def test_a_table_is_sized_as_read_so_that_a_large_one_is_not_broadcast(spark, warehouse):
    """Spark sizes a Delta scan by its files on disk and broadcasts a join side estimated under its threshold. The
    tables' parquet takes 10-53x its size when read: unscaled, a 1M-object listing (41 MB of files, 440 MiB
    hashed) was broadcast into validation's tasks until the JVM ran out of heap. Every session scales the estimate
    (spark.sql.sources.fileCompressionFactor, statekeeper.launch.jars.spark_conf): with the threshold between a
    table's files and its size as read, a join of two reads of it must shuffle, not broadcast."""
    from pyspark.sql import functions as F

    assert float(spark.conf.get("spark.sql.sources.fileCompressionFactor")) == 10.0
    ENGINE.write(df_of(spark, arrow_rows("r", "a", list(range(2000)))), warehouse, SPEC)
    on_disk = sum(p.stat().st_size for p in Path(warehouse.delta_location("events")).rglob("*.parquet"))
    threshold = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", str(3 * on_disk))
    try:
        left, right = (ENGINE.read(spark, warehouse, "events").alias(side) for side in ("l", "r"))
        estimate = int(left._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())
        assert estimate >= 10 * on_disk
        joined = left.join(right, F.col("l.n") == F.col("r.n"))
        plan = joined._jdf.queryExecution().executedPlan().toString()
        assert "Broadcast" not in plan, plan
        assert joined.count() == 2000
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", threshold)

"""Delta tables written and read through Spark (Python Data Sources + delta-rs commits)."""
from __future__ import annotations

import json
import threading
from datetime import datetime, timezone

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from statekeeper.tables import ConcurrentCommitError, EngineUnavailableError, TableSpec, Warehouse
from statekeeper.tables import delta_log
from statekeeper.tables.arrow_codec import table_to_ipc
from statekeeper.tables.engine import DeltaRsEngine, delta_spark_available, select_engine
from statekeeper.tables.staging import STAGING_DIR
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


def _spark_schema(spec):
    from pyspark.sql.pandas.types import from_arrow_schema
    return from_arrow_schema(spec.schema, prefer_timestamp_ntz=False)


def collect(df) -> list[tuple]:
    return sorted((r["root_id"], r["job_dir"], r["n"]) for r in df.collect())


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def warehouse(request, tmp_path):
    if request.param == "local":
        return Warehouse(str(tmp_path / "wh"))
    return Warehouse(f"s3://{request.getfixturevalue('s3_bucket')}/wh", request.getfixturevalue("s3_config"))


def test_write_modes_and_read_back(spark, warehouse):
    engine = DeltaRsEngine()
    data = pa.concat_tables([arrow_rows("r1", "j1", [1, 2]), arrow_rows("r1", "j2", [3]), arrow_rows("r2", "j1", [4])])
    created = engine.write(df_of(spark, data).repartition(2), warehouse, SPEC, mode="append")
    assert created.version == 0 and created.rows_added == 4
    assert created.files_added >= 3  # at least one file per partition
    assert collect(engine.read(spark, warehouse, "events")) == [("r1", "j1", 1), ("r1", "j1", 2), ("r1", "j2", 3),
                                                                ("r2", "j1", 4)]
    back = engine.read(spark, warehouse, "events").where("n = 1").collect()[0]
    assert back["label"] == "j1:1" and back["attrs"] == {"k": 1}
    assert back["at"] == datetime(2026, 3, 1)  # session time zone is UTC; Spark returns naive datetimes

    replaced = engine.write(df_of(spark, arrow_rows("r1", "j1", [10])), warehouse, SPEC, mode="replace_partitions",
                            replace=[{"root_id": "r1", "job_dir": "j1"}, {"root_id": "r9", "job_dir": "gone"}])
    assert replaced.version == 1 and replaced.files_removed >= 1
    assert collect(engine.read(spark, warehouse, "events")) == [("r1", "j1", 10), ("r1", "j2", 3), ("r2", "j1", 4)]
    # Time travel and partition pruning.
    assert len(engine.read(spark, warehouse, "events", version=0).collect()) == 4
    assert collect(engine.read(spark, warehouse, "events", partitions={"job_dir": ["j2"]})) == [("r1", "j2", 3)]

    engine.write(df_of(spark, arrow_rows("r3", "j", [7])), warehouse, SPEC, mode="overwrite")
    assert collect(engine.read(spark, warehouse, "events")) == [("r3", "j", 7)]

    # Same content through deltalake directly.
    dt = DeltaTable(warehouse.delta_location("events"), storage_options=warehouse.storage_options())
    assert dt.to_pyarrow_table().column("n").to_pylist() == [7]


def test_expected_version_guards_the_write(spark, tmp_path):
    warehouse = Warehouse(str(tmp_path / "wh"))
    engine = DeltaRsEngine()
    engine.write(df_of(spark, arrow_rows("r", "a", [1])), warehouse, SPEC)
    engine.write(df_of(spark, arrow_rows("r", "b", [2])), warehouse, SPEC)
    with pytest.raises(ConcurrentCommitError):
        engine.write(df_of(spark, arrow_rows("r", "c", [3])), warehouse, SPEC, expected_version=0)
    assert delta_log.latest_version(warehouse, "events") == 1
    assert _orphan_parquet(warehouse, "events") == set()


def test_a_small_table_of_many_files_is_read_by_several_tasks(spark, tmp_path):
    """Every core gets a share of a scan even when the whole table is far below one 64 MiB split (the
    `files` listing of a store under a million objects was read by one task), but no split is made
    smaller than min_split_bytes."""
    warehouse = Warehouse(str(tmp_path / "wh"))
    engine = DeltaRsEngine()
    data = pa.concat_tables([arrow_rows("r", f"j{i:02d}", [i]) for i in range(12)])
    assert engine.write(df_of(spark, data).repartition(1), warehouse, SPEC).files_added == 12
    # A few KB is one task, through the data source (object-store warehouses) and Spark's own scan alike.
    assert engine.read(spark, warehouse, "events").rdd.getNumPartitions() == 1
    assert DeltaRsEngine(local_parquet=False).read(spark, warehouse, "events").rdd.getNumPartitions() == 1
    # The engine's reader with a split floor below this table's size (as a listing of ~100k objects
    # is above the default 1 MiB).
    df = (spark.read.format("statekeeper_delta").option("warehouse", warehouse.uri).option("table", "events")
          .option("min_splits", str(2 * spark.sparkContext.defaultParallelism)).option("min_split_bytes", "1").load())
    wanted = min(12, 2 * spark.sparkContext.defaultParallelism)
    assert df.rdd.getNumPartitions() >= wanted > 1
    # Each split holds whole files, and every row is read once.
    per_task = df.rdd.mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect()
    assert sum(per_task) == 12 and max(per_task) <= -(-12 // wanted) + 1
    assert collect(df) == sorted(("r", f"j{i:02d}", i) for i in range(12))
    # A pruned read of one partition is one file: one split.
    assert engine.read(spark, warehouse, "events", partitions={"job_dir": ["j03"]}).rdd.getNumPartitions() == 1


def test_empty_table_reads_as_empty_dataframe(spark, tmp_path):
    warehouse = Warehouse(str(tmp_path / "wh"))
    engine = DeltaRsEngine()
    engine.write(df_of(spark, arrow_rows("r", "a", [])), warehouse, SPEC)
    df = engine.read(spark, warehouse, "events")
    assert df.collect() == [] and df.columns == SPEC.schema.names


def _orphan_parquet(warehouse: Warehouse, table: str) -> set[str]:
    """Parquet files in the table directory that the latest version does not reference."""
    io_ = warehouse.file_io()
    base = warehouse.table_uri(table)
    on_disk = {i.uri[len(base) + 1:] for i in io_.list(base) if i.uri.endswith(".parquet")}
    live = {f.path for f in delta_log.load_state(warehouse, table).files}
    return on_disk - live


def changeset_rows(spark, items):
    from statekeeper.tables.changeset import CHANGESET_SCHEMA
    return spark.createDataFrame(items, CHANGESET_SCHEMA).repartition(2)


def add(table: str, t: pa.Table, partition: dict) -> tuple:
    return (table, "add", json.dumps(partition, sort_keys=True), bytearray(table_to_ipc(t)))


def test_changeset_commits_several_tables_in_one_pass(spark, warehouse):
    engine = DeltaRsEngine()
    other = pa.table({"root_id": ["r"], "job_dir": ["a"], "v": ["x"]}, schema=OTHER.schema)
    items = [add("events", arrow_rows("r", "a", [1, 2]), {"root_id": "r", "job_dir": "a"}),
             add("events", arrow_rows("r", "b", [3]), {"root_id": "r", "job_dir": "b"}),
             add("other", other, {"root_id": "r", "job_dir": "a"}),
             ("events", "note", "", bytearray(json.dumps({"units": 2}).encode()))]
    result = engine.commit_changeset(changeset_rows(spark, items), warehouse, [SPEC, OTHER],
                                     {"events": None, "other": None}, metadata={"statekeeper.runId": "t1"})
    assert result.committed["events"].version == 0 and result.committed["other"].version == 0
    assert result.committed["events"].rows_added == 3
    assert result.notes == [{"units": 2}]

    # Second change set: replace partition a (remove old files + add), drop partition b, touch nothing in other.
    state = delta_log.load_state(warehouse, "events")
    removes = [("events", "remove", json.dumps(f.partition_values, sort_keys=True), bytearray(f.to_json().encode()))
               for f in state.files]
    items = [add("events", arrow_rows("r", "a", [9]), {"root_id": "r", "job_dir": "a"}), *removes]
    result = engine.commit_changeset(changeset_rows(spark, items), warehouse, [SPEC, OTHER],
                                     {"events": 0, "other": 0})
    assert result.committed["events"].version == 1
    assert result.committed["other"].version is None  # nothing to commit: no new version
    assert collect(engine.read(spark, warehouse, "events")) == [("r", "a", 9)]
    assert [r["v"] for r in engine.read(spark, warehouse, "other").collect()] == ["x"]


def test_changeset_conflict_commits_nothing_and_cleans_up(spark, tmp_path):
    warehouse = Warehouse(str(tmp_path / "wh"))
    engine = DeltaRsEngine()
    other = pa.table({"root_id": ["r"], "job_dir": ["a"], "v": ["x"]}, schema=OTHER.schema)
    engine.commit_changeset(changeset_rows(spark, [add("events", arrow_rows("r", "a", [1]), {"root_id": "r", "job_dir": "a"}),
                                                   add("other", other, {"root_id": "r", "job_dir": "a"})]),
                            warehouse, [SPEC, OTHER], {"events": None, "other": None})
    # Someone else commits to `other` after our planning at version 0.
    engine.write(df_of(spark, arrow_rows("r", "z", [5])), warehouse, SPEC)
    stale = [add("events", arrow_rows("r", "a", [2]), {"root_id": "r", "job_dir": "a"}),
             add("other", other, {"root_id": "r", "job_dir": "b"})]
    with pytest.raises(ConcurrentCommitError):
        engine.commit_changeset(changeset_rows(spark, stale), warehouse, [SPEC, OTHER], {"events": 0, "other": 0})
    assert delta_log.latest_version(warehouse, "other") == 0  # no table got the loser's commit
    assert delta_log.latest_version(warehouse, "events") == 1
    assert _orphan_parquet(warehouse, "events") == set() and _orphan_parquet(warehouse, "other") == set()


def written(warehouse: Warehouse, spec, t: pa.Table, partition: dict) -> tuple:
    """A `file` row: the producer wrote the data file itself (as the index tasks do)."""
    from statekeeper.tables.files import write_data_file

    f = write_data_file(warehouse, spec, spec.conform(t), partition)
    return (spec.name, "file", json.dumps(partition, sort_keys=True), bytearray(f.to_json().encode()))


def test_changeset_commits_files_written_by_the_producer_or_deletes_them(spark, tmp_path):
    warehouse = Warehouse(str(tmp_path / "wh"))
    engine = DeltaRsEngine()
    items = [written(warehouse, SPEC, arrow_rows("r", "a", [1, 2]), {"root_id": "r", "job_dir": "a"}),
             add("events", arrow_rows("r", "b", [3]), {"root_id": "r", "job_dir": "b"})]
    result = engine.commit_changeset(changeset_rows(spark, items), warehouse, [SPEC], {"events": None})
    assert result.committed["events"].version == 0 and result.committed["events"].rows_added == 3
    assert collect(engine.read(spark, warehouse, "events")) == [("r", "a", 1), ("r", "a", 2), ("r", "b", 3)]
    # A stale change set (the table moved): the producer's file is deleted, nothing is committed.
    engine.write(df_of(spark, arrow_rows("r", "z", [5])), warehouse, SPEC)
    stale = [written(warehouse, SPEC, arrow_rows("r", "a", [7]), {"root_id": "r", "job_dir": "a"})]
    assert _orphan_parquet(warehouse, "events") != set()  # written, not yet committed
    with pytest.raises(ConcurrentCommitError):
        engine.commit_changeset(changeset_rows(spark, stale), warehouse, [SPEC], {"events": 0})
    assert delta_log.latest_version(warehouse, "events") == 1
    assert _orphan_parquet(warehouse, "events") == set()


class _Producer:
    """A change set producer as the index tasks are: partition 0 writes a data file, reports it to the
    `written` accumulator and succeeds; partition 1 fails once partition 0 is done (or writes a file too)."""

    def __init__(self, warehouse: Warehouse, written, fail: bool, done: str) -> None:
        self.warehouse, self.written, self.fail, self.done = warehouse, written, fail, done

    def __call__(self, batches):
        import os
        import time

        from statekeeper.tables.changeset import ChangesetRows
        from statekeeper.tables.files import write_data_file

        for batch in batches:
            for i in batch.column("id").to_pylist():
                if i == 1 and self.fail:
                    deadline = time.monotonic() + 60
                    while not os.path.exists(self.done) and time.monotonic() < deadline:
                        time.sleep(0.05)
                    raise RuntimeError("injected producer failure")
                partition = {"root_id": "r", "job_dir": f"j{i}"}
                f = write_data_file(self.warehouse, SPEC, SPEC.conform(arrow_rows("r", f"j{i}", [i])), partition)
                self.written.add([(SPEC.name, f.to_json())])
                rows = ChangesetRows()
                rows.file(SPEC.name, partition, f)
                rows.note({"partition": i})
                open(self.done, "w").close()
                yield rows.batch()


def test_a_changeset_of_producer_written_files_commits_on_the_driver_or_deletes_them_if_the_producer_fails(
        spark, tmp_path):
    """Files a producer's tasks wrote are committed from their `file` rows; if the producer's job fails, the
    files its successful tasks wrote (known only from the accumulator) are deleted, nothing is committed."""
    from statekeeper.tables.changeset import CHANGESET_SCHEMA, written_files

    engine = DeltaRsEngine()
    warehouse = Warehouse(str(tmp_path / "wh"))
    engine.commit_changeset(changeset_rows(spark, [add("events", arrow_rows("r", "a", [1]),
                                                        {"root_id": "r", "job_dir": "a"})]),
                            warehouse, [SPEC], {"events": None})

    written = written_files(spark)
    failing = spark.range(0, 2, 1, 2).mapInArrow(_Producer(warehouse, written, True, str(tmp_path / "done-1")),
                                                 CHANGESET_SCHEMA)
    with pytest.raises(Exception, match="injected producer failure"):
        engine.commit_changeset(failing, warehouse, [SPEC], {"events": 0}, written=written)
    assert len(written.value) == 1                    # partition 0 succeeded and wrote its file
    assert delta_log.latest_version(warehouse, "events") == 0
    assert _orphan_parquet(warehouse, "events") == set()

    written = written_files(spark)
    good = spark.range(0, 2, 1, 2).mapInArrow(_Producer(warehouse, written, False, str(tmp_path / "done-2")),
                                              CHANGESET_SCHEMA)
    result = engine.commit_changeset(good, warehouse, [SPEC], {"events": 0}, written=written)
    assert result.committed["events"].version == 1 and result.committed["events"].files_added == 2
    assert sorted(result.notes, key=lambda n: n["partition"]) == [{"partition": 0}, {"partition": 1}]
    assert collect(engine.read(spark, warehouse, "events")) == [("r", "a", 1), ("r", "j0", 0), ("r", "j1", 1)]
    assert _orphan_parquet(warehouse, "events") == set()


def test_a_changeset_with_an_unknown_row_commits_nothing_and_deletes_the_producers_files(spark, tmp_path):
    """A row the engine cannot read fails the change set before any commit, whatever order the rows arrive
    in, and the files the producer wrote are deleted, not left uncommitted."""
    warehouse = Warehouse(str(tmp_path / "wh"))
    engine = DeltaRsEngine()
    items = [written(warehouse, SPEC, arrow_rows("r", "a", [1]), {"root_id": "r", "job_dir": "a"}),
             ("events", "rename", "", bytearray(b"{}")),
             written(warehouse, SPEC, arrow_rows("r", "b", [2]), {"root_id": "r", "job_dir": "b"})]
    with pytest.raises(Exception, match="unknown change set op 'rename'"):
        engine.commit_changeset(changeset_rows(spark, items), warehouse, [SPEC], {"events": None})
    assert delta_log.latest_version(warehouse, "events") is None
    assert not list((tmp_path / "wh").rglob("*.parquet"))


def test_writes_from_another_python_thread(spark, tmp_path):
    warehouse = Warehouse(str(tmp_path / "wh"))
    errors: list[BaseException] = []

    def work():
        try:
            DeltaRsEngine().write(df_of(spark, arrow_rows("t", "x", [1])), warehouse, SPEC)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert errors == []
    assert delta_log.latest_version(warehouse, "events") == 0


def test_local_tables_are_readable_as_plain_parquet_with_explicit_schema(spark, tmp_path):
    warehouse = Warehouse(str(tmp_path / "wh"))
    DeltaRsEngine().write(df_of(spark, arrow_rows("r", "a", [1, 2])), warehouse, SPEC)
    dt = DeltaTable(warehouse.delta_location("events"))
    df = (spark.read.option("basePath", warehouse.delta_location("events"))
          .schema(_spark_schema(SPEC)).parquet(*dt.file_uris()))
    assert collect(df) == [("r", "a", 1), ("r", "a", 2)]


def test_polars_reads_the_tables_when_installed(spark, tmp_path):
    pl = pytest.importorskip("polars")
    warehouse = Warehouse(str(tmp_path / "wh"))
    DeltaRsEngine().write(df_of(spark, arrow_rows("r", "a", [1])), warehouse, SPEC)
    assert pl.read_delta(warehouse.delta_location("events"))["n"].to_list() == [1]


class _ConfOnlySession:
    """A session shell exposing a chosen `spark.sql.extensions` and the real JVM of the test session."""

    def __init__(self, extensions: str, jvm):
        self._extensions = extensions
        self._jvm = jvm
        self.conf = self

    def get(self, key, default=None):
        return self._extensions if key == "spark.sql.extensions" else default


def test_delta_spark_detection(spark, monkeypatch):
    import statekeeper.tables.engine as engine_mod

    assert delta_spark_available(spark) is False  # no Delta jars/extension in this environment
    assert isinstance(select_engine(spark, "auto"), DeltaRsEngine)
    with pytest.raises(EngineUnavailableError, match="use --engine delta-rs"):
        select_engine(spark, "delta-spark")
    # Extension configured but the class is not on the classpath: still unavailable.
    configured = _ConfOnlySession(engine_mod._DELTA_EXTENSION, spark._jvm)
    assert delta_spark_available(configured) is False
    # Extension configured and the class loadable (stand-in class that exists in every JVM).
    monkeypatch.setattr(engine_mod, "_DELTA_CLASS", "java.lang.String")
    assert delta_spark_available(configured) is True
    assert select_engine(configured, "auto").name == "delta-spark"
    assert delta_spark_available(_ConfOnlySession("", spark._jvm)) is False


def test_a_catalog_table_older_than_its_trailing_columns_reads_them_as_null(spark, tmp_path):
    """A catalog table written before its spec gained trailing nullable columns (dr_copies before the
    recovery-point columns) gets them on its next write; until then every reader, Spark's and the driver's,
    sees them as null, so no job asks whether a table predates a column."""
    from statekeeper.tables.catalog import DR_COPIES
    from statekeeper.tables.files import split_partitions, write_data_file
    from statekeeper.tables.reader import TableReader

    added = ["source_completed_at", "published_at"]
    old = TableSpec(DR_COPIES.name, pa.schema([f for f in DR_COPIES.schema if f.name not in added]), ())
    at = datetime(2026, 3, 1, tzinfo=timezone.utc)
    values = {pa.string(): "x", pa.int64(): 1, pa.timestamp("us", tz="UTC"): at}
    row = old.conform(pa.Table.from_pylist([{f.name: values[f.type] for f in old.schema}], schema=old.schema))
    warehouse = Warehouse(str(tmp_path / "wh"))
    files = [write_data_file(warehouse, old, part, v) for v, part in split_partitions(old, row)]
    delta_log.commit(warehouse, old, files, [], read_version=None)
    assert delta_log.load_state(warehouse, DR_COPIES.name).schema.names == old.schema.names

    df = DeltaRsEngine().read(spark, warehouse, DR_COPIES.name)
    assert df.columns == DR_COPIES.schema.names
    [back] = df.collect()
    assert back["run_id"] == "x" and back["files"] == 1 and [back[c] for c in added] == [None, None]
    table = TableReader(warehouse).read(DR_COPIES.name, columns=["run_id", *added])
    assert table.to_pylist() == [{"run_id": "x", "source_completed_at": None, "published_at": None}]
    # reading changes nothing: the columns are added by the next write
    assert delta_log.load_state(warehouse, DR_COPIES.name).schema.names == old.schema.names


def test_a_local_table_is_read_by_spark_alone_with_the_data_sources_rows(spark, tmp_path):
    """On a local warehouse the engine hands the pinned version's files to Spark's parquet scan (no Python
    process plans or reads them); partition values that look like numbers stay the strings the log holds,
    versions and partition pruning pick the same files as the data source."""
    warehouse = Warehouse(str(tmp_path / "wh"))
    engine = DeltaRsEngine()
    engine.write(df_of(spark, arrow_rows("00", "1e5", [1, 2])), warehouse, SPEC)
    engine.write(df_of(spark, arrow_rows("007", "a", [3])), warehouse, SPEC)
    engine.write(df_of(spark, arrow_rows("007", "a", [4, 5])), warehouse, SPEC, mode="replace_partitions",
                 replace=[{"root_id": "007", "job_dir": "a"}])
    assert same_reads(spark, warehouse, "events") == 4
    assert collect(engine.read(spark, warehouse, "events")) == [("00", "1e5", 1), ("00", "1e5", 2),
                                                                 ("007", "a", 4), ("007", "a", 5)]
    assert same_reads(spark, warehouse, "events", version=1) == 3
    assert same_reads(spark, warehouse, "events", partitions={"root_id": ["007"]}) == 2
    assert same_reads(spark, warehouse, "events", partitions={"job_dir": ["nowhere"]}) == 0


def test_partition_values_not_written_verbatim_are_read_through_the_data_source(spark, tmp_path):
    """A value outside the path-safe alphabet is hashed into its directory name: Spark's discovery would
    read the hash, so such a table (and a warehouse path Spark would glob) goes through the data source."""
    from statekeeper.tables import parquet_scan

    warehouse = Warehouse(str(tmp_path / "wh"))
    engine = DeltaRsEngine()
    engine.write(df_of(spark, arrow_rows("r", "a b/c", [1])), warehouse, SPEC)
    assert parquet_scan.scan(spark, warehouse, "events") is None
    assert collect(engine.read(spark, warehouse, "events")) == [("r", "a b/c", 1)]
    globbed = Warehouse(str(tmp_path / "w[h]"))
    engine.write(df_of(spark, arrow_rows("r", "a", [2])), globbed, SPEC)
    assert parquet_scan.scan(spark, globbed, "events") is None
    assert collect(engine.read(spark, globbed, "events")) == [("r", "a", 2)]


def test_a_table_is_sized_as_read_so_that_a_large_one_is_not_broadcast(spark, tmp_path):
    """Spark sizes a file scan by its files on disk and broadcasts a join side estimated under its threshold. The
    tables' zstd parquet takes 10-53x its size when read: unscaled, a 1M-object listing (41 MB of files, 440 MiB
    hashed) was broadcast into validation's tasks until the JVM ran out of heap. With the threshold between a
    table's files and its size as read, a join of two reads of it must shuffle, not broadcast."""
    from pyspark.sql import functions as F

    from statekeeper.tables import parquet_scan

    warehouse = Warehouse(str(tmp_path / "wh"))
    engine = DeltaRsEngine()
    engine.write(df_of(spark, arrow_rows("r", "a", list(range(2000)))), warehouse, SPEC)
    on_disk = sum(p.stat().st_size for p in (tmp_path / "wh" / "events").rglob("*.parquet"))
    spark.conf.unset(parquet_scan.COMPRESSION_FACTOR_CONF)
    threshold = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", str(3 * on_disk))
    try:
        left, right = (engine.read(spark, warehouse, "events").alias(side) for side in ("l", "r"))
        estimate = int(left._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())
        assert estimate >= float(parquet_scan.COMPRESSION_FACTOR) * on_disk
        joined = left.join(right, F.col("l.n") == F.col("r.n"))
        plan = joined._jdf.queryExecution().executedPlan().toString()
        assert "SortMergeJoin" in plan and "Broadcast" not in plan, plan
        assert joined.count() == 2000
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", threshold)


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
    """Few tables that between them hold every column type of `specs`, partitioned and not (each table costs
    a dozen Spark jobs here)."""
    def kinds(spec) -> set[str]:
        return {str(f.type) for f in spec.schema} | {f"partitioned={bool(spec.partition_by)}"}

    wanted = set().union(*map(kinds, specs))
    chosen: list = []
    while wanted:
        best = max(specs, key=lambda spec: len(kinds(spec) & wanted))
        chosen.append(best)
        wanted -= kinds(best)
    return chosen


def test_catalog_tables_read_and_write_alike_through_spark_alone_and_the_data_source(spark, tmp_path):
    """Every column type the catalog uses (maps, lists of structs, zoned timestamps, nulls) survives
    Spark's parquet scan and writer as it does the data source."""
    from statekeeper.tables.catalog import ALL_TABLES
    from statekeeper.tables.files import split_partitions, write_data_file

    from statekeeper.tables.reader import TableReader

    warehouse = Warehouse(str(tmp_path / "wh"))
    written = Warehouse(str(tmp_path / "written"))
    for spec in _covering(ALL_TABLES):
        rows = []
        for i in range(3):
            row = {f.name: None if (f.nullable and i == 2) else _sample(f.type, i) for f in spec.schema}
            row.update({c: f"p{i % 2}" for c in spec.partition_by})
            rows.append(row)
        table = spec.conform(pa.Table.from_pylist(rows, schema=spec.schema))
        files = [write_data_file(warehouse, spec, part, values) for values, part in split_partitions(spec, table)]
        delta_log.commit(warehouse, spec, files, [], read_version=None)
        assert same_reads(spark, warehouse, spec.name) == 3, spec.name
        # written again by Spark's own writer: the same rows, through Spark and through the driver's reader
        DeltaRsEngine().write(DeltaRsEngine().read(spark, warehouse, spec.name), written, spec)
        assert same_reads(spark, written, spec.name) == 3, spec.name
        assert rows_of(DeltaRsEngine().read(spark, written, spec.name)) == rows_of(
            DeltaRsEngine().read(spark, warehouse, spec.name)), spec.name
        assert (sorted(map(repr, TableReader(written).read(spec.name).to_pylist()))
                == sorted(map(repr, TableReader(warehouse).read(spec.name).to_pylist()))), spec.name


def _files(warehouse: Warehouse, table: str) -> list[str]:
    return sorted(f.path for f in delta_log.load_state(warehouse, table).files)


def test_a_local_table_is_written_by_spark_alone_as_the_data_source_writes_it(spark, tmp_path):
    """Spark's own writer (parquet_write) and the data source make the same commits: each mode's rows, the
    file layout below the table (no staging left behind), an empty write committing nothing, and a write
    against a version that moved refused before any file is written."""
    import re

    results = {}
    for way, engine in (("spark", DeltaRsEngine()), ("source", DeltaRsEngine(local_parquet=False))):
        warehouse = Warehouse(str(tmp_path / way))
        first = engine.write(df_of(spark, arrow_rows("00", "a", [1, 2])), warehouse, SPEC)
        engine.write(df_of(spark, arrow_rows("r", "b", [3])), warehouse, SPEC)
        engine.write(df_of(spark, arrow_rows("r", "b", [4, 5])).repartition(2), warehouse, SPEC,
                     mode="replace_partitions", replace=[{"root_id": "r", "job_dir": "b"}])
        assert engine.write(df_of(spark, arrow_rows("r", "c", [])), warehouse, SPEC).version is None
        with pytest.raises(ConcurrentCommitError):
            engine.write(df_of(spark, arrow_rows("r", "d", [6])), warehouse, SPEC, expected_version=0)
        engine.write(df_of(spark, arrow_rows("r", "e", [7])).select(*reversed(SPEC.schema.names)), warehouse, SPEC)
        results[way] = (first, same_reads(spark, warehouse, "events"), collect(engine.read(spark, warehouse, "events")),
                        delta_log.latest_version(warehouse, "events"))
        assert all(re.fullmatch(r"root_id=[^/]+/job_dir=[^/]+/part-[0-9a-f]{32}\.zstd\.parquet", p)
                   for p in _files(warehouse, "events")), _files(warehouse, "events")
        assert not list((tmp_path / way / "events").glob(f"{STAGING_DIR}/*"))
        # on storage beyond the live files: only the one the partition replace removed (vacuum deletes it)
        assert [p.split("/")[1] for p in _orphan_parquet(warehouse, "events")] == ["job_dir=b"]
        overwritten = engine.write(df_of(spark, arrow_rows("z", "z", [9])), warehouse, SPEC, mode="overwrite")
        assert (overwritten.files_removed, collect(engine.read(spark, warehouse, "events"))) == (4, [("z", "z", 9)])
    assert results["spark"] == results["source"]
    assert results["spark"][2] == [("00", "a", 1), ("00", "a", 2), ("r", "b", 4), ("r", "b", 5), ("r", "e", 7)]


def test_partition_values_spark_escapes_or_cannot_write_keep_their_exact_values(spark, tmp_path):
    """Spark escapes some characters of a partition directory as %XX (read back exactly) and writes an empty
    value as it writes null: such a write is discarded uncommitted, to be made through the data source
    (where delta-rs, too, takes an empty partition value for null: no catalog table has one)."""
    from statekeeper.tables import parquet_write

    warehouse = Warehouse(str(tmp_path / "wh"))
    odd = ["a b/c", "50%=half", "x:y#z", "ünï"]
    for i, job in enumerate(odd):
        assert parquet_write.write(df_of(spark, arrow_rows("r", job, [i])), warehouse, SPEC) is not None
    assert parquet_write.write(df_of(spark, arrow_rows("r", "", [9])), warehouse, SPEC) is None
    assert not list((tmp_path / "wh" / "events").glob(f"{STAGING_DIR}/*"))
    assert delta_log.latest_version(warehouse, "events") == len(odd) - 1
    wanted = sorted(("r", job, i) for i, job in enumerate(odd))
    assert collect(DeltaRsEngine().read(spark, warehouse, "events")) == wanted
    state = delta_log.load_state(warehouse, "events")
    assert sorted(f.partition_values["job_dir"] for f in state.files) == sorted(odd)

"""Delta tables on an s3:// warehouse through delta-spark and Hadoop's S3A (`s3a://`), against SeaweedFS (a real S3
server that enforces If-None-Match) and real Spark: the bucket's settings set at run time
(statekeeper.tables.s3a), two writers on one table, and Statekeeper's log store
(statekeeper.delta.S3ConditionalLogStore) with two driver processes."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest

from statekeeper.launch.jars import LOG_STORE_CLASS, S3A_LOG_STORE_CONF, spark_conf
from statekeeper.storage import StorageConfig
from statekeeper.tables.delta_spark import DeltaSparkEngine
from statekeeper.tables.errors import ConcurrentCommitError, TableError
from statekeeper.tables.s3a import (SIMPLE_PROVIDER, TEMPORARY_PROVIDER, S3ABucketConflictError,
                                    UnreachableWarehouseError, bucket_settings, configure)
from statekeeper.tables.warehouse import Warehouse
from tests.plugins.fault_proxy import FaultProxy
from tests.plugins.s3 import make_bucket, s3_env
from tests.plugins.spark import job_process_env
from tests.tables.s3a_writer import SPEC, rows, writer_rows

_REPO = Path(__file__).resolve().parents[2]
RENDEZVOUS_S = 300.0
# What Delta raises when its commit-time conflict detection refuses a commit (io.delta.exceptions.*).
DELTA_CONFLICT = re.compile(r"Concurrent\w+Exception|MetadataChangedException|ProtocolChangedException")


def _sorted_rows(df) -> list[tuple]:
    return sorted((r["root_id"], r["job_dir"], r["n"], r["writer"]) for r in df.collect())


def _tuples(table: pa.Table) -> list[tuple]:
    return sorted((r["root_id"], r["job_dir"], r["n"], r["writer"]) for r in table.to_pylist())


def _data_files(warehouse: Warehouse, versions: tuple[int, ...]) -> tuple[set[str], set[str]]:
    """The data files the table's `versions` name (through delta-rs), and those stored under the table."""
    from deltalake import DeltaTable

    uri, options = warehouse.table_uri(SPEC.name), warehouse.storage.deltalake_storage_options()
    named = {f for v in versions for f in DeltaTable(uri, version=v, storage_options=options).file_uris()}
    stored = {i.uri for i in warehouse.file_io().list(uri) if "/_delta_log/" not in i.uri}
    return named, stored


def _s3_warehouse(seaweedfs, prefix: str = "s3a") -> Warehouse:
    return Warehouse(f"s3://{make_bucket(seaweedfs.config(), prefix)}/wh", seaweedfs.config())


def _objects(config: StorageConfig, uri: str) -> list[str]:
    from statekeeper.storage.s3 import make_s3_client, split_s3_uri

    bucket, prefix = split_s3_uri(uri)
    pages = make_s3_client(config).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"][len(prefix):].lstrip("/") for page in pages for o in page.get("Contents", []))


# -- the bucket's settings (pure) ------------------------------------------------------------------------------

def test_bucket_settings_scope_endpoint_and_keys_to_the_bucket():
    config = StorageConfig(endpoint="http://127.0.0.1:9000", region="eu-west-1", access_key_id="AK",
                           secret_access_key="SK")
    assert bucket_settings("s3://tables/wh", config) == {
        "fs.s3a.bucket.tables.endpoint": "http://127.0.0.1:9000",
        "fs.s3a.bucket.tables.endpoint.region": "eu-west-1",
        "fs.s3a.bucket.tables.path.style.access": "true",
        "fs.s3a.bucket.tables.connection.ssl.enabled": "false",
        "fs.s3a.bucket.tables.access.key": "AK",
        "fs.s3a.bucket.tables.secret.key": "SK",
        "fs.s3a.bucket.tables.aws.credentials.provider": SIMPLE_PROVIDER,
    }
    temporary = bucket_settings("s3a://tables/wh", config.with_overrides(session_token="ST"))
    assert temporary["fs.s3a.bucket.tables.session.token"] == "ST"
    assert temporary["fs.s3a.bucket.tables.aws.credentials.provider"] == TEMPORARY_PROVIDER


def test_bucket_settings_without_keys_leave_the_default_credential_chain():
    settings = bucket_settings("s3://tables/wh", StorageConfig())
    assert settings == {"fs.s3a.bucket.tables.endpoint.region": "us-east-1",
                        "fs.s3a.bucket.tables.path.style.access": "false"}
    https = bucket_settings("s3://tables/wh", StorageConfig(endpoint="https://s3.example.test"))
    assert https["fs.s3a.bucket.tables.connection.ssl.enabled"] == "true"
    assert not any(k.endswith((".access.key", ".secret.key", ".aws.credentials.provider")) for k in https)


def test_the_log_store_is_configured_for_s3a_unless_the_deployment_chose_one():
    assert spark_conf()[S3A_LOG_STORE_CONF] == LOG_STORE_CLASS
    dynamo = "io.delta.storage.S3DynamoDBLogStore"
    assert spark_conf({S3A_LOG_STORE_CONF: dynamo})[S3A_LOG_STORE_CONF] == dynamo
    # Delta refuses a scheme's store beside the legacy class setting: none is added then.
    assert S3A_LOG_STORE_CONF not in spark_conf({"spark.delta.logStore.class": "x.Y"})


def test_the_log_store_is_compiled_once_into_the_jars_directory_and_javac_is_named_when_missing(tmp_path,
                                                                                                monkeypatch):
    import zipfile

    from statekeeper.launch.jars import JavacNotFoundError, build_log_store, jars_dir, log_store_jar

    installed = log_store_jar()
    assert installed.parent == jars_dir() and installed.is_file()   # make setup built it
    directory = tmp_path / "jars"
    directory.mkdir()
    for jar in jars_dir().glob("*.jar"):
        if jar != installed:
            (directory / jar.name).symlink_to(jar)
    built = build_log_store(directory, log=lambda _: None)
    assert built == log_store_jar(directory) and built.name == installed.name
    assert "statekeeper/delta/S3ConditionalLogStore.class" in zipfile.ZipFile(built).namelist()
    stamp = built.stat().st_mtime_ns
    assert build_log_store(directory, log=lambda _: None) == built and built.stat().st_mtime_ns == stamp

    built.unlink()
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "no-jdk"))
    with pytest.raises(JavacNotFoundError, match="javac not found"):
        build_log_store(directory, log=lambda _: None)


# -- the engine on an s3a:// warehouse -----------------------------------------------------------------------

@pytest.mark.parametrize("uri", ["gs://tables/wh", "abfss://c@account.dfs.core.windows.net/wh",
                                 "wasbs://c@account.blob.core.windows.net/wh", "oss://tables/wh"])
def test_a_warehouse_the_jvm_parts_cannot_reach_is_refused_before_any_work(spark, uri):
    # Warehouse itself admits only local and s3:// locations; a warehouse-like object on another scheme (a wider
    # Warehouse, a caller's own) is refused by the engine before it reads or writes anything.
    warehouse = SimpleNamespace(uri=uri, storage=StorageConfig())
    engine = DeltaSparkEngine()
    for attempt in (lambda: engine.read(spark, warehouse, SPEC.name),
                    lambda: engine.write(spark.createDataFrame(writer_rows("a")), warehouse, SPEC)):
        with pytest.raises(UnreachableWarehouseError) as caught:
            attempt()
        assert uri in str(caught.value) and "only local and s3:// warehouses" in str(caught.value)
        assert isinstance(caught.value, TableError)


def test_write_read_and_replace_partitions_on_an_s3a_warehouse(spark, seaweedfs):
    config = seaweedfs.config()
    warehouse = Warehouse(f"s3://{make_bucket(config, 's3a')}/wh", config)
    engine = DeltaSparkEngine()
    first = pa.concat_tables([rows("r1", "j1", [1, 2], "w"), rows("r1", "j2", [3], "w"), rows("r2", "j1", [4], "w")])
    assert engine.write(spark.createDataFrame(first), warehouse, SPEC, mode="overwrite").version == 0
    assert _sorted_rows(engine.read(spark, warehouse, SPEC.name)) == _tuples(first)

    replaced = engine.write(spark.createDataFrame(rows("r1", "j1", [10], "x")), warehouse, SPEC,
                            mode="replace_partitions", replace=[{"root_id": "r1", "job_dir": "j1"}],
                            expected_version=0)
    assert replaced.version == 1
    assert _sorted_rows(engine.read(spark, warehouse, SPEC.name)) == [
        ("r1", "j1", 10, "x"), ("r1", "j2", 3, "w"), ("r2", "j1", 4, "w")]
    assert _sorted_rows(engine.read(spark, warehouse, SPEC.name, version=0)) == _tuples(first)
    assert _sorted_rows(engine.read(spark, warehouse, SPEC.name, partitions={"root_id": ["r2"]})) == [
        ("r2", "j1", 4, "w")]
    # The table is in the bucket (not on a local path named like it): its commits and its partitions' files.
    keys = _objects(config, warehouse.table_uri(SPEC.name))
    assert {"_delta_log/00000000000000000000.json", "_delta_log/00000000000000000001.json"} <= set(keys)
    assert any(k.startswith("root_id=r2/job_dir=j1/") and k.endswith(".parquet") for k in keys)
    with pytest.raises(ConcurrentCommitError):
        engine.write(spark.createDataFrame(rows("r1", "j1", [11], "y")), warehouse, SPEC,
                     mode="replace_partitions", replace=[{"root_id": "r1", "job_dir": "j1"}], expected_version=0)


def test_credentials_are_set_at_run_time_only_and_a_bucket_keeps_its_first_settings(spark, seaweedfs):
    warehouse = _s3_warehouse(seaweedfs)
    engine = DeltaSparkEngine()
    engine.write(spark.createDataFrame(writer_rows("a")), warehouse, SPEC, mode="overwrite")
    config = seaweedfs.config()
    bucket = warehouse.uri.split("/")[2]
    hadoop = spark._jsc.hadoopConfiguration()
    assert hadoop.get(f"fs.s3a.bucket.{bucket}.secret.key") == config.secret_access_key
    # Neither the SparkConf (argv, every task, the UI) nor the SQL conf holds them. (The access key is a
    # substring of this session's app name: the keys that would carry it are looked for instead.)
    for conf in (dict(spark.sparkContext.getConf().getAll()), spark.conf.getAll):
        assert not [k for k, v in conf.items() if config.secret_access_key in v]
        assert not [k for k in conf if k.endswith((".access.key", ".secret.key", ".session.token"))]
    assert spark.sparkContext.getConf().get(S3A_LOG_STORE_CONF) == LOG_STORE_CLASS

    configure(spark, warehouse)   # again, same settings: nothing to do
    other = Warehouse(warehouse.uri, config.with_overrides(secret_access_key="another-secret"))
    with pytest.raises(S3ABucketConflictError, match=bucket):
        configure(spark, other)
    assert hadoop.get(f"fs.s3a.bucket.{bucket}.secret.key") == config.secret_access_key


# -- two writers on one table --------------------------------------------------------------------------------

def _rendezvous(directory: str, me: str, other: str):
    """A mapInArrow step that holds `me`'s write task until `other`'s has started too (both tasks run in Python
    workers, so they meet through files): by then both transactions were started from the same version."""
    def gate(batches):
        import os
        import time as clock

        open(os.path.join(directory, me), "w").close()
        deadline = clock.monotonic() + RENDEZVOUS_S
        while not os.path.exists(os.path.join(directory, other)):
            if clock.monotonic() > deadline:
                raise RuntimeError(f"writer {other} never started its write")
            clock.sleep(0.05)
        yield from batches
    return gate


@pytest.fixture(params=["local", "s3"])
def warehouse(request, tmp_path):
    if request.param == "local":
        return Warehouse(str(tmp_path / "wh"))
    return _s3_warehouse(request.getfixturevalue("seaweedfs"))


def test_two_writers_from_one_version_one_commits_the_other_conflicts(spark, warehouse, tmp_path):
    from statekeeper.launch.session import activate
    from statekeeper.tables.spark import spark_schema

    engine = DeltaSparkEngine()
    base = rows("r1", "j1", [1, 2], "base")
    assert engine.write(spark.createDataFrame(base), warehouse, SPEC, mode="overwrite").version == 0
    meet = tmp_path / "meet"
    meet.mkdir()
    outcome: dict[str, object] = {}

    def write(me: str, other: str) -> None:
        activate(spark)
        # One task per write: local[2] runs both writers' tasks at once (a session does not serialise them).
        df = (spark.createDataFrame(writer_rows(me)).coalesce(1)
              .mapInArrow(_rendezvous(str(meet), me, other), spark_schema(SPEC.schema)))
        try:
            outcome[me] = engine.write(df, warehouse, SPEC, mode="replace_partitions",
                                       replace=[{"root_id": "r1", "job_dir": "j1"}], expected_version=0)
        except BaseException as exc:  # noqa: BLE001 - reported below
            outcome[me] = exc

    threads = [threading.Thread(target=write, args=(me, other)) for me, other in (("a", "b"), ("b", "a"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    conflicts = {w: o for w, o in outcome.items() if isinstance(o, ConcurrentCommitError)}
    commits = {w: o for w, o in outcome.items() if not isinstance(o, BaseException)}
    assert len(conflicts) == 1 and len(commits) == 1, outcome
    (winner, result), = commits.items()
    (loser, error), = conflicts.items()
    assert result.version == 1 and loser != winner
    # Delta judged it at commit time (both had read version 0), not the engine's check before the write.
    assert error.read_version == 0 and DELTA_CONFLICT.search(str(error)), error
    assert _sorted_rows(engine.read(spark, warehouse, SPEC.name)) == _tuples(writer_rows(winner))
    assert _delta_versions(spark, warehouse) == 1


def _delta_versions(spark, warehouse) -> int:
    """The table's newest version, from its history."""
    from statekeeper.tables.delta_spark import spark_path

    history = spark.sql(f"DESCRIBE HISTORY delta.`{spark_path(warehouse, SPEC.name)}`")
    return int(history.selectExpr("max(version) AS v").first()["v"])


# -- two driver processes: the log store ---------------------------------------------------------------------

class CommitGate(FaultProxy):
    """A proxy in front of SeaweedFS that holds the first upload of one Delta commit file until a second upload of
    that file arrives, then passes them on one after the other. Two drivers committing the same version thus both
    finish whatever they check before uploading (Delta's default store: an existence check) before either upload
    lands, the race that loses a commit when the upload itself is not create-only; passing them on one at a time
    keeps the test about what the client asks of the store, not about the server's own handling of two at once."""

    def __init__(self, upstream: StorageConfig, key_suffix: str) -> None:
        super().__init__(upstream)
        self._suffix = key_suffix
        self._second = threading.Event()
        self._first_done = threading.Event()
        self.arrived = 0

    def _serve(self, handler) -> None:
        gated = handler.command == "PUT" and handler.path.split("?")[0].endswith(self._suffix)
        if not gated:
            super()._serve(handler)
            return
        with self._lock:
            self.arrived += 1
            order = self.arrived
        if order == 1:
            self._second.wait(RENDEZVOUS_S)
            try:
                super()._serve(handler)
            finally:
                self._first_done.set()
        elif order == 2:
            self._second.set()
            self._first_done.wait(RENDEZVOUS_S)
            super()._serve(handler)
        else:
            super()._serve(handler)


def _two_drivers(seaweedfs, spark, base: Path, extra_conf: dict[str, str]) -> tuple[list[dict], Warehouse, Path]:
    """Version 0 of a table written here; then two driver processes each replace its partition (r1, j1) from
    version 0, through a CommitGate, with an event log. Their JSON reports, the warehouse, the event log dir."""
    warehouse = _s3_warehouse(seaweedfs, "drivers")
    DeltaSparkEngine().write(spark.createDataFrame(rows("r1", "j1", [1, 2], "base")), warehouse, SPEC, mode="overwrite")
    gate = CommitGate(seaweedfs.config(), "/_delta_log/00000000000000000001.json")
    events = base / "events"
    meet = base / "meet"
    events.mkdir()
    meet.mkdir()
    conf = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file://{events}", **extra_conf}
    env = job_process_env(**s3_env(gate.config))
    procs = {}
    try:
        for me, other in (("a", "b"), ("b", "a")):
            log = open(base / f"{me}.log", "wb")  # noqa: SIM115 - closed below
            argv = [sys.executable, "-m", "tests.tables.s3a_writer", "--warehouse", warehouse.uri, "--writer", me,
                    "--other", other, "--rendezvous", str(meet), "--work", str(base / me),
                    *[f"--conf={k}={v}" for k, v in conf.items()]]
            procs[me] = (subprocess.Popen(argv, cwd=_REPO, env=env, stdout=subprocess.PIPE, stderr=log), log)
        reports = []
        for me, (proc, log) in procs.items():
            out, _ = proc.communicate(timeout=900)
            log.close()
            assert proc.returncode == 0, f"writer {me} exited {proc.returncode}:\n" \
                                         f"{(base / f'{me}.log').read_text(errors='replace')[-4000:]}"
            reports.append(json.loads(out.decode().strip().splitlines()[-1]))
    finally:
        for proc, log in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=60)
            log.close()
        gate.stop()
    # Both commits met at the gate: the drivers really raced for version 1.
    assert gate.arrived >= 2, gate.arrived
    return reports, warehouse, events


@pytest.fixture(scope="module")
def two_drivers(seaweedfs, spark, tmp_path_factory):
    return _two_drivers(seaweedfs, spark, tmp_path_factory.mktemp("drivers"), {})


@pytest.mark.slow
def test_two_driver_processes_one_commits_the_other_conflicts_and_nothing_is_lost(spark, two_drivers):
    reports, warehouse, _ = two_drivers
    assert [r["rows_before"] for r in reports] == [2, 2]        # both read version 0
    committed = [r for r in reports if "version" in r]
    conflicted = [r for r in reports if "conflict" in r]
    assert len(committed) == 1 and len(conflicted) == 1, reports
    assert committed[0]["version"] == 1
    assert DELTA_CONFLICT.search(conflicted[0]["conflict"]), conflicted[0]
    assert _sorted_rows(DeltaSparkEngine().read(spark, warehouse, SPEC.name)) == _tuples(
        writer_rows(committed[0]["writer"]))
    assert _delta_versions(spark, warehouse) == 1
    # The loser's data files went with its conflict (DeltaSparkEngine._discard_written): the bucket holds the files
    # of the two versions and nothing else, so no vacuum is needed after a lost race on S3.
    named, stored = _data_files(warehouse, (0, 1))
    assert stored == named, stored ^ named


# Nightly (make test-full), not in make test: its subject is Delta's own default, which no change of ours can break,
# and its two driver processes cost 43 s of the suite's budget. It stays the evidence that the log store is needed,
# checked against each new Delta release before it is pinned.
@pytest.mark.slow
@pytest.mark.full_matrix
def test_delta_default_s3_log_store_loses_a_commit_in_the_same_race(seaweedfs, spark, tmp_path):
    """What the log store is for: the same two drivers with Delta's default for s3a (an existence check, then a
    plain upload) both report version 1, and the table holds only one of them."""
    reports, warehouse, _ = _two_drivers(seaweedfs, spark, tmp_path, {
        S3A_LOG_STORE_CONF: "io.delta.storage.S3SingleDriverLogStore"})
    assert sorted(r.get("version") for r in reports) == [1, 1], reports
    kept = {row[3] for row in _sorted_rows(DeltaSparkEngine().read(spark, warehouse, SPEC.name))}
    assert len(kept) == 1 and kept < {"a", "b"}, kept


def _event_log_text(path: Path) -> str:
    """An event log file's JSON lines; Spark 4 writes them zstd-compressed by default."""
    data = path.read_bytes()
    if path.suffix == ".zstd":
        import io

        import zstandard

        data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True).read()
    return data.decode(errors="replace")


def test_credentials_are_in_no_driver_s_argv_spark_conf_or_event_log(seaweedfs, two_drivers):
    reports, warehouse, events = two_drivers
    config = seaweedfs.config()
    secrets = (config.access_key_id, config.secret_access_key)
    bucket = warehouse.uri.split("/")[2]
    logs = sorted(events.rglob("events_*"))
    assert len(logs) == 2, logs      # one event log per driver
    for report in reports:
        assert report["spark_conf"][S3A_LOG_STORE_CONF] == LOG_STORE_CLASS
        for secret in secrets:
            assert secret not in report["jvm_cmdline"]
            assert not [k for k, v in {**report["spark_conf"], **report["runtime_conf"]}.items() if secret in v]
    for log in logs:
        text = _event_log_text(log)
        # The Hadoop configuration is in the log as it was after the bucket was set up (the writer made Spark
        # post an environment update): the bucket's settings are there, its keys only redacted (Spark's
        # spark.redaction.regex matches their names)...
        assert f'"fs.s3a.bucket.{bucket}.endpoint.region":"us-east-1"' in text, log
        assert f'"fs.s3a.bucket.{bucket}.secret.key":"*********(redacted)"' in text, log
        # ...and neither credential appears anywhere in it.
        for secret in secrets:
            assert secret not in text, f"{log} holds a credential"


# -- a commit whose answer was lost ----------------------------------------------------------------------------

class LostAnswer(FaultProxy):
    """A proxy in front of SeaweedFS that passes the first upload of one Delta commit file to the server and then
    closes the client's connection without an answer, as a network that drops a response after the server acted:
    the commit landed, and the client retries an upload the server now refuses (If-None-Match: *, 412)."""

    def __init__(self, upstream: StorageConfig, key_suffix: str) -> None:
        super().__init__(upstream)
        self._suffix = key_suffix
        self.lost: list[int] = []    # the server's status for each upload whose answer was dropped
        self.uploads = 0

    def _serve(self, handler) -> None:
        if handler.command != "PUT" or not handler.path.split("?")[0].endswith(self._suffix):
            super()._serve(handler)
            return
        with self._lock:
            self.uploads += 1
            first = self.uploads == 1
        if not first:
            super()._serve(handler)
            return
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        status, _, _, _ = self._forward(handler.command, handler.path, handler.headers.items(), body)
        self.lost.append(status)
        handler.close_connection = True   # no status line: the client sees the connection end


@pytest.mark.slow
@pytest.mark.parametrize("planned", [True, False], ids=["planned_from_version_0", "blind_append"])
def test_a_commit_whose_answer_was_lost_is_found_landed_once(planned, seaweedfs, spark):
    """The upload of version 1 lands but its answer is lost; the retried create-only upload is refused because the
    object is there. That object is this write's own commit: the write reports version 1, the table holds its rows
    once, in one version, and every data file it names is still stored (a write taken for the loser of a race
    would have deleted them, and a blind append retried as version 2 would hold them twice)."""
    proxy = LostAnswer(seaweedfs.config(), "/_delta_log/00000000000000000001.json")
    try:
        warehouse = Warehouse(f"s3://{make_bucket(seaweedfs.config(), 'lost')}/wh", proxy.config)
        engine = DeltaSparkEngine()
        engine.write(spark.createDataFrame(rows("r1", "j1", [1, 2], "base")), warehouse, SPEC, mode="overwrite")
        new = rows("r2", "j2", [7, 8], "mine")
        if planned:
            result = engine.write(spark.createDataFrame(new), warehouse, SPEC, mode="replace_partitions",
                                  replace=[{"root_id": "r2", "job_dir": "j2"}], expected_version=0)
        else:
            result = engine.write(spark.createDataFrame(new), warehouse, SPEC, mode="append")
        assert proxy.lost == [200], proxy.lost   # the first upload landed and its answer never arrived
        assert proxy.uploads >= 2                # ... and the client tried again
        assert result.version == 1
        assert _delta_versions(spark, warehouse) == 1
        expected = _tuples(rows("r1", "j1", [1, 2], "base")) + _tuples(new)
        assert _sorted_rows(engine.read(spark, warehouse, SPEC.name)) == sorted(expected)
        named, stored = _data_files(warehouse, (1,))
        assert named == stored, named ^ stored
    finally:
        proxy.stop()

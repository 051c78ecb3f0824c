"""GC on S3 killed with SIGKILL mid-deletion, then re-run: it resumes, completes, and `gc_actions` accounts for
every planned key; nothing referenced is lost.

A relocated real store (2.3.0 `failed_and_orphans`: its leftovers are planted by hand, so it is a local store
uploaded, not one Flink wrote into the bucket) on the session's SeaweedFS (a real S3 server: it enforces the
conditional deletes itself, no layer of ours in front) gets 600 planted orphans in its job's `shared/`; GC runs as `spark_jobs/collect_garbage.py`
in its own process tree with a rate limit, so the deletion takes long enough to be killed half-way. Its output
goes to a file: a pipe nobody reads would block the job once 64 KiB are unread (Spark's progress bars and the
job's progress lines; more of them the slower the machine).
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

import tests.harness as harness
from statekeeper.chains.job import ComputeChains
from statekeeper.gc.job import CollectGarbage
from statekeeper.gc.options import GcOptions
from statekeeper.storage import RoutingFileIO
from statekeeper.storage.s3 import make_s3_client
from statekeeper.tables import Warehouse
from statekeeper.tables.vocabulary import GcMode
from statekeeper.uri import normalize_uri
from tests.chains.support import oracle_references, relocate_store, store_roots
from tests.gc.support import actions, runs
from tests.index.support import run_index
from tests.plugins.s3 import make_bucket, s3_env
from tests.plugins.spark import job_process_env, kill_job_when

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.s3, pytest.mark.slow]

VERSION = harness.FLINK_VERSIONS[-1]
PLANTED = 600


def test_sigkill_mid_deletion_on_s3_then_resume(spark, flink_fixture, seaweedfs, tmp_path):
    fx = flink_fixture(VERSION, "failed_and_orphans")
    s3_config = seaweedfs.config()
    bucket = make_bucket(s3_config, "gc")
    fio = RoutingFileIO(s3_config)
    copy = relocate_store(fx.root, f"s3://{bucket}/store", fio)
    roots = store_roots(copy)
    job_dir = copy + normalize_uri(fx.job("A")["job_dir"])[len(normalize_uri(str(fx.root))):]
    client = make_s3_client(s3_config.with_overrides(max_pool_connections=16))
    planted = [f"{job_dir}/shared/planted-{i:05d}" for i in range(PLANTED)]
    with ThreadPoolExecutor(max_workers=12) as pool:
        list(pool.map(lambda u: client.put_object(Bucket=bucket, Key=u.split("/", 3)[3], Body=b"x" * 64), planted))
    planted_at = time.monotonic()
    truth = oracle_references(VERSION, fx.metadata_files())
    base = normalize_uri(str(fx.root))
    referenced = {copy + f[len(base):] for files in truth.values() for f in files}
    warehouse = Warehouse(str(tmp_path / "warehouse"))
    index = run_index(spark, roots, warehouse, storage=s3_config, allow_empty_root=True)
    assert index.status == "succeeded", index.summary()
    ComputeChains(spark).warehouse(warehouse).storage(s3_config).progress_interval(0).execute()
    before = {i.uri for r in roots for i in fio.list(r)}
    # The planted objects must be older than the 1 s grace period; the index and chains usually took longer.
    time.sleep(max(0.0, planted_at + 1.5 - time.monotonic()))

    def mid_deletion() -> bool:
        present = {i.uri for i in fio.list(f"{job_dir}/shared")}
        return sum(1 for u in planted if u not in present) >= 80

    kill_job_when("collect_garbage", ["--warehouse", warehouse.uri, "--mode", "delete", "--older-than", "1s",
                                      "--allow-short-grace", "--max-deletes-per-second", "40"], mid_deletion,
                  cwd=tmp_path, env=job_process_env(**s3_env(s3_config)), what="80 planted objects deleted",
                  poll=0.5)
    newest = _newest(warehouse)
    [killed] = [rid for rid, row in newest.items() if row["status"] == "running"]
    present = {i.uri for i in fio.list(f"{job_dir}/shared")}   # one listing, not a HEAD per planted key
    remaining = sum(1 for u in planted if u in present)
    assert 0 < remaining < PLANTED, "the kill should land mid-deletion"

    result = (CollectGarbage(spark).warehouse(warehouse).storage(s3_config)
              .configure(GcOptions(mode=GcMode.DELETE, older_than=timedelta(seconds=1), allow_short_grace=True))
              .progress_interval(0).execute())
    assert result.status == "completed" and result.failed == 0, result.summary()
    assert killed in result.resumed
    after = {i.uri for r in roots for i in fio.list(r)}
    assert referenced & before <= after, "a referenced object was lost"
    assert not [u for u in after if u.rsplit("/", 1)[-1].startswith("planted-")]
    rows = actions(warehouse, killed)
    assert {r["uri"] for r in rows} >= set(planted)          # every planned key has its outcome
    assert {r["outcome"] for r in rows} <= {"deleted", "already_gone"}, {r["outcome"] for r in rows}
    assert _newest(warehouse)[killed]["status"] == "completed"

    # SeaweedFS can keep a "directory" listed after its last object is gone (AWS S3 does not list one): what GC
    # emptied (the failed checkpoint's chk-N/) may stay as an empty prefix. Indexed again and collected again, the
    # store with such prefixes gives a clean run that deletes nothing and loses nothing.
    empty = [d for d in fio.list_dirs(job_dir) if not list(fio.list(d))]
    print(f"[gc kill s3] empty prefixes listed under the job directory after GC: {empty}")
    again = run_index(spark, roots, warehouse, storage=s3_config, allow_empty_root=True)
    assert again.status == "succeeded", again.summary()
    ComputeChains(spark).warehouse(warehouse).storage(s3_config).progress_interval(0).execute()
    second = (CollectGarbage(spark).warehouse(warehouse).storage(s3_config)
              .configure(GcOptions(mode=GcMode.DELETE, older_than=timedelta(seconds=1), allow_short_grace=True))
              .progress_interval(0).execute())
    assert second.status == "completed" and second.failed == 0 and second.deleted == 0, second.summary()
    assert referenced & before <= {i.uri for r in roots for i in fio.list(r)}, "a referenced object was lost"


def _newest(warehouse: Warehouse) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for r in runs(warehouse):
        if r["run_id"] not in out or r["finished_at"] >= out[r["run_id"]]["finished_at"]:
            out[r["run_id"]] = r
    return out

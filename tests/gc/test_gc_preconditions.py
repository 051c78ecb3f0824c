"""Deletes pinned to the planned version, on every store: an object replaced under the same key between plan and
delete is kept, by the store itself (S3's conditional DeleteObjects on a moto server that enforces it as S3 does,
GCS `ifGenerationMatch` on the emulator, Azure `If-Match` on Azurite) or by the lstat against the plan (local).

The object stores get no request before the delete (no LIST re-check): only the precondition protects the
replaced object, so these tests fail if a deleter stops sending it. The listing re-check stays for S3-compatible
stores that ignore the per-key ETag (here: the fault proxy dropping it), and still keeps the replaced object.
Every planned key has exactly one outcome. A SlowDown storm slows the prefixes down and loses nothing.
"""
from __future__ import annotations

import os
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from statekeeper.gc.deleter import DeleteResult, Deleter, DeleteSettings, PlannedDelete
from statekeeper.storage import LocalFileIO, RoutingFileIO, StorageConfig
from statekeeper.storage.pacing import S3_WRITES_PER_PREFIX
from statekeeper.storage.s3 import make_s3_client
from statekeeper.tables.vocabulary import GcOutcome
from tests.plugins.object_stores import azure_uri

FAST_RETRY = {"backoff_base": 0.005, "backoff_max": 0.05}


def planned(info) -> PlannedDelete:
    return PlannedDelete(info.uri, info.size, info.mtime, info.etag)


class Store:
    """One store for these tests: a root, writes and listings through its FileIO."""

    def __init__(self, kind: str, config: StorageConfig, root: str) -> None:
        self.kind, self.config, self.root = kind, config, root
        self.fileio = RoutingFileIO(config)

    def put(self, path: str, body: bytes) -> None:
        self.fileio.write(f"{self.root}/{path}", body)

    def plan(self) -> list[PlannedDelete]:
        return [planned(i) for i in self.fileio.list(self.root)]

    def remaining(self) -> dict[str, bytes]:
        return {i.uri: self.fileio.read_bytes(i.uri) for i in self.fileio.list(self.root)}


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3), pytest.param("gcs", marks=pytest.mark.gcs),
                        pytest.param("azure", marks=pytest.mark.azure)])
def store(request, tmp_path: Path) -> Store:
    if request.param == "local":
        (tmp_path / "cp").mkdir()
        return Store("local", StorageConfig(), f"file://{tmp_path}/cp")
    if request.param == "s3":
        proxy = request.getfixturevalue("slow_s3")   # no faults: it counts the requests by kind
        return Store("s3", proxy.config, f"s3://{request.getfixturevalue('s3_bucket')}/cp")
    if request.param == "gcs":
        return Store("gcs", request.getfixturevalue("gcs_config"), f"gs://{request.getfixturevalue('gcs_bucket')}/cp")
    return Store("azure", request.getfixturevalue("azure_config"),
                 azure_uri(request.getfixturevalue("azure_container"), "cp"))


def test_an_object_replaced_after_planning_is_kept_on_every_store(store: Store, request) -> None:
    names = [f"job{j}/shared/f{i:02d}" for j in (1, 2) for i in range(8)] + ["job1/chk-4/_metadata-less-file"]
    for i, name in enumerate(names):
        store.put(name, b"A" * 100 + bytes([i]))
    items = store.plan()
    assert len(items) == len(names)
    replaced, gone = f"{store.root}/job1/shared/f03", f"{store.root}/job2/shared/f05"
    before = {i.uri: i for i in items}[replaced]
    # Same key, same size, other bytes: only the version (ETag, generation, inode) tells it apart.
    store.put("job1/shared/f03", b"B" * 101)
    if store.kind == "local":   # even the planned mtime: only the inode (a new file) tells
        ns = int(before.mtime.timestamp() * 1e9)
        os.utime(Path(replaced[len("file://"):]), ns=(ns, ns))
    store.fileio.delete_many([gone])

    proxy = request.getfixturevalue("slow_s3") if store.kind == "s3" else None
    sent_before = Counter(proxy.forwarded) if proxy is not None else Counter()
    results = list(Deleter(store.config, [store.root]).run(items))
    sent = Counter(proxy.forwarded) - sent_before if proxy is not None else Counter()

    assert sorted(r.uri for r in results) == sorted(i.uri for i in items)   # one outcome per planned key
    by_uri = {r.uri: r for r in results}
    assert by_uri[replaced].outcome is GcOutcome.CHANGED_SKIPPED, by_uri[replaced]
    assert "not deleted" in by_uri[replaced].message
    assert by_uri[gone].outcome is GcOutcome.ALREADY_GONE
    assert Counter(r.outcome for r in results)[GcOutcome.DELETED] == len(items) - 2
    assert store.remaining() == {replaced: b"B" * 101}   # the new version, untouched
    if store.kind == "s3":
        # No re-check before the delete: one DeleteObjects (each key with its planned ETag); one HEAD after the
        # refusal (to say how the object changed), no listing.
        assert (sent["list"], sent["delete"], sent["head"]) == (0, 1, 1), sent
        assert "etag" in by_uri[replaced].message and "412" in by_uri[replaced].message


def test_a_plan_row_without_a_version_is_never_deleted_unconditionally(s3_config, s3_bucket) -> None:
    fio = RoutingFileIO(s3_config)
    fio.write(f"s3://{s3_bucket}/cp/job1/shared/k", b"data")
    info = fio.stat(f"s3://{s3_bucket}/cp/job1/shared/k")
    [result] = Deleter(s3_config, [f"s3://{s3_bucket}/cp"]).run([PlannedDelete(info.uri, info.size, info.mtime, None)])
    assert result.outcome is GcOutcome.FAILED and "cannot be made conditional" in result.message
    assert fio.exists(info.uri)


def test_a_store_that_ignores_the_precondition_is_protected_by_the_listing_recheck(s3_config, s3_bucket, slow_s3):
    slow_s3.ignore_delete_preconditions = True     # an S3-compatible store that accepts the ETag and ignores it
    fio = RoutingFileIO(s3_config)
    for i in range(6):
        fio.write(f"s3://{s3_bucket}/cp/job1/shared/k{i}", b"AAAA")
    items = [planned(i) for i in fio.list(f"s3://{s3_bucket}/cp")]
    fio.write(f"s3://{s3_bucket}/cp/job1/shared/k2", b"BBBB")
    config = slow_s3.config.with_overrides(delete_recheck="listing")
    results = {r.uri: r for r in Deleter(config, [f"s3://{s3_bucket}/cp"]).run(items)}
    kept = f"s3://{s3_bucket}/cp/job1/shared/k2"
    assert results[kept].outcome is GcOutcome.CHANGED_SKIPPED and "etag" in results[kept].message
    assert Counter(r.outcome for r in results.values())[GcOutcome.DELETED] == 5
    assert {i.uri for i in fio.list(f"s3://{s3_bucket}/cp")} == {kept} and fio.read_bytes(kept) == b"BBBB"
    assert slow_s3.forwarded["list"] >= 1   # the re-check listed the directory first


def test_oss_keeps_the_listing_recheck_unless_told_otherwise() -> None:
    assert StorageConfig(oss_endpoint="https://oss-cn-hangzhou.aliyuncs.com").oss_s3_config().delete_recheck == "listing"
    assert StorageConfig().delete_recheck == "precondition"
    told = StorageConfig.from_env({"STATEKEEPER_OSS_ENDPOINT": "https://oss-cn-hangzhou.aliyuncs.com",
                                   "STATEKEEPER_OSS_DELETE_RECHECK": "precondition",
                                   "STATEKEEPER_S3_DELETE_RECHECK": "listing"})
    assert (told.delete_recheck, told.oss_s3_config().delete_recheck) == ("listing", "precondition")
    with pytest.raises(Exception, match="delete_recheck"):
        StorageConfig(delete_recheck="trust-me")


def _put_many(config: StorageConfig, bucket: str, keys: list[str]) -> None:
    client = make_s3_client(config.with_overrides(max_pool_connections=16))
    with ThreadPoolExecutor(max_workers=12) as pool:
        list(pool.map(lambda k: client.put_object(Bucket=bucket, Key=k, Body=b"x" * 8), keys))


def test_a_slowdown_storm_slows_the_prefixes_and_loses_nothing(s3_config, s3_bucket, slow_s3) -> None:
    jobs = [f"cp/job-{uuid.UUID(int=j).hex[:8]}" for j in range(3)]
    keys = [f"{job}/shared/k{i:04d}" for job in jobs for i in range(400)]
    keys += [f"{jobs[0]}/chk-{n}/f{i}" for n in range(5) for i in range(4)]
    _put_many(s3_config, s3_bucket, keys)
    items = [planned(i) for i in RoutingFileIO(s3_config).list(f"s3://{s3_bucket}/cp")]
    retried = []
    slow_s3.set_faults(share=0.5, seed=3, kinds={"delete"})   # half the DeleteObjects requests answer 503 SlowDown
    deleter = Deleter(slow_s3.config, [f"s3://{s3_bucket}/cp"],
                      DeleteSettings(batch_size=50, requests_in_flight=4, max_attempts=30, **FAST_RETRY),
                      on_progress=lambda files, size, retries: retried.append(retries))
    results: list[DeleteResult] = list(deleter.run(items))
    assert Counter(r.outcome for r in results) == {GcOutcome.DELETED: len(items)}
    assert sorted(r.uri for r in results) == sorted(i.uri for i in items)
    assert sum(retried) == slow_s3.injected > 0          # every throttled request retried, and counted
    assert not list(RoutingFileIO(s3_config).list(f"s3://{s3_bucket}/cp"))
    lanes = {r.lane: r for r in deleter.prefix_report()}
    assert set(lanes) == {f"s3://{s3_bucket}/{job}" for job in jobs}   # paced per job prefix
    assert sum(r.items for r in lanes.values()) >= len(items)
    throttled = [r for r in lanes.values() if r.throttled]
    assert throttled, "the storm never reached a prefix"
    for r in throttled:   # AIMD: a throttled prefix was slowed below S3's documented starting rate
        assert r.start_rate == S3_WRITES_PER_PREFIX and r.lowest_rate is not None
        assert r.lowest_rate < S3_WRITES_PER_PREFIX


def test_local_deletes_keep_every_guard(tmp_path: Path) -> None:
    """lstat against the plan, then unlink: a symlinked directory is never deleted through, and files outside
    the root are never touched, also when planned together with thousands of others."""
    root = tmp_path / "cp"
    shared = root / "job1" / "shared"
    shared.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_bytes(b"keep")
    (root / "job2").mkdir()
    (root / "job2" / "linked").symlink_to(outside)
    for i in range(3000):
        (shared / f"f{i:05d}").write_bytes(b"x")
    items = [planned(i) for i in LocalFileIO().list(f"file://{root}") if i.object_type.is_regular]
    through_link = PlannedDelete(f"file://{root}/job2/linked/victim", 4, items[0].mtime, None)
    beyond = PlannedDelete(f"file://{outside}/victim", 4, items[0].mtime, None)
    results = {r.uri: r for r in Deleter(StorageConfig(), [str(root)]).run(items + [through_link, beyond])}
    assert Counter(r.outcome for r in results.values()) == {GcOutcome.DELETED: 3000, GcOutcome.FAILED: 2}
    assert "symlink" in results[through_link.uri].message and "outside" in results[beyond.uri].message
    assert (outside / "victim").read_bytes() == b"keep" and not list(shared.iterdir())

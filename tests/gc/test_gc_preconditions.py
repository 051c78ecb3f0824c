"""Deletes pinned to the planned version, on every store: an object replaced under the same key between plan and
delete is kept, by the store itself (S3's conditional DeleteObjects on SeaweedFS, the session's S3 server, which
enforces it with no layer of ours in front, reached through the fault proxy that counts the requests by kind; GCS
`ifGenerationMatch` on the emulator, Azure `If-Match` on Azurite) or by the lstat against the plan (local).

Where a store's self-test (statekeeper.storage.enforcement) proved the precondition, the object stores get no
request before the delete (no LIST re-check): only the precondition protects the replaced object, so these tests
fail if a deleter stops sending it. Where the self-test finds the precondition ignored (moto as released; the
emulator as released; the fault proxy dropping the ETags) the deleter re-checks by listing, unasked, and still
keeps the replaced object. Every planned key has exactly one outcome. A SlowDown storm slows the prefixes down and
loses nothing.
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
from statekeeper.storage.enforcement import Enforcement, Guard, Verdict
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
    enforcement = Enforcement(store.config)   # proven first, as GC proves it on the driver before its tasks
    assert [p.verdict for p in enforcement.prove([store.root], [Guard.CONDITIONAL_DELETE])] == \
        ([] if store.kind == "local" else [Verdict.ENFORCED])
    sent_before = Counter(proxy.forwarded) if proxy is not None else Counter()
    results = list(Deleter(store.config, [store.root], enforcement=enforcement).run(items))
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


@pytest.mark.s3
def test_without_its_etag_the_delete_removes_the_replaced_object(s3_config, s3_bucket, slow_s3) -> None:
    """The mutation of the test above: the store proved to enforce the precondition, then the deleter's requests
    lose their per-key ETags on the way (the fault proxy drops them after the self-test). SeaweedFS deletes the
    replaced object: only the precondition our request carries keeps it, so the test above fails if it goes."""
    store = Store("s3", slow_s3.config, f"s3://{s3_bucket}/cp")
    for i in range(4):
        store.put(f"job1/shared/f{i}", b"A" * 100)
    items = store.plan()
    replaced = f"{store.root}/job1/shared/f2"
    store.put("job1/shared/f2", b"B" * 100)
    enforcement = Enforcement(store.config)
    assert [p.verdict for p in enforcement.prove([store.root], [Guard.CONDITIONAL_DELETE])] == [Verdict.ENFORCED]
    slow_s3.ignore_delete_preconditions = True
    listed = slow_s3.forwarded["list"]
    results = {r.uri: r for r in Deleter(store.config, [store.root], enforcement=enforcement).run(items)}
    assert slow_s3.forwarded["list"] == listed   # trusted the proof: nothing but the precondition stood in the way
    assert results[replaced].outcome is GcOutcome.DELETED, results[replaced]
    assert store.remaining() == {}


def test_a_plan_row_without_a_version_is_never_deleted_unconditionally(s3_config, s3_bucket) -> None:
    # A store that enforces the precondition (SeaweedFS; on one that ignores it the deleter re-checks by listing)
    fio = RoutingFileIO(s3_config)
    fio.write(f"s3://{s3_bucket}/cp/job1/shared/k", b"data")
    info = fio.stat(f"s3://{s3_bucket}/cp/job1/shared/k")
    [result] = Deleter(s3_config, [f"s3://{s3_bucket}/cp"]).run([PlannedDelete(info.uri, info.size, info.mtime, None)])
    assert result.outcome is GcOutcome.FAILED and "cannot be made conditional" in result.message
    assert fio.exists(info.uri)


@pytest.mark.parametrize("kind", [pytest.param("proxy", marks=pytest.mark.s3),
                                  pytest.param("plain_moto", marks=pytest.mark.s3),
                                  pytest.param("plain_gcs", marks=pytest.mark.gcs)])
def test_a_store_that_ignores_the_precondition_is_found_out_and_rechecked_by_listing(kind, request):
    """Nothing configured (the default, `precondition`): the store's self-test finds that it deletes what a pinned
    delete must keep, and the deleter re-checks by listing instead; the replaced object is kept. Today's stores
    that accept the precondition and ignore it: moto as released, the GCS emulator as released, and an endpoint
    that drops the per-key ETags on their way (the fault proxy)."""
    from tests.plugins.object_stores import make_gcs_bucket
    from tests.plugins.s3 import make_bucket

    if kind == "proxy":
        proxy = request.getfixturevalue("slow_s3")
        proxy.ignore_delete_preconditions = True
        config, root = proxy.config, f"s3://{request.getfixturevalue('s3_bucket')}/cp"
    elif kind == "plain_moto":
        config = request.getfixturevalue("plain_moto_server").config()
        root = f"s3://{make_bucket(config)}/cp"
    else:
        config = request.getfixturevalue("plain_gcs_emulator").config()
        root = f"gs://{make_gcs_bucket(config)}/cp"
    assert config.delete_recheck == "precondition"
    fio = RoutingFileIO(config)
    for i in range(6):
        fio.write(f"{root}/job1/shared/k{i}", b"AAAA")
    items = [planned(i) for i in fio.list(root)]
    kept = f"{root}/job1/shared/k2"
    fio.write(kept, b"BBBB")
    deleter = Deleter(config, [root])
    results = {r.uri: r for r in deleter.run(items)}
    assert results[kept].outcome is GcOutcome.CHANGED_SKIPPED, results[kept]
    assert "changed since it was planned" in results[kept].message
    assert Counter(r.outcome for r in results.values())[GcOutcome.DELETED] == 5
    assert {i.uri for i in fio.list(root)} == {kept} and fio.read_bytes(kept) == b"BBBB"
    [proof] = deleter.enforcement.prove([root], [Guard.CONDITIONAL_DELETE])
    assert proof.verdict is Verdict.IGNORED, proof
    if kind == "proxy":
        assert request.getfixturevalue("slow_s3").forwarded["list"] >= 1   # the re-check listed the directory


def test_a_store_whose_self_test_cannot_complete_is_rechecked_by_listing(s3_config, s3_bucket, slow_s3) -> None:
    """Fail closed: a self-test that cannot write its scratch object (here: every PUT answered 503) is `unknown`,
    never `enforced`: the deletes re-check by listing."""
    fio = RoutingFileIO(s3_config)
    root = f"s3://{s3_bucket}/cp"
    for i in range(3):
        fio.write(f"{root}/job1/shared/k{i}", b"AAAA")
    items = [planned(i) for i in fio.list(root)]
    slow_s3.set_faults(share=1.0, kinds={"put"})
    enforcement = Enforcement(slow_s3.config.with_overrides(max_attempts=1))
    [proof] = enforcement.prove([root], [Guard.CONDITIONAL_DELETE])
    slow_s3.set_faults()
    assert proof.verdict is Verdict.UNKNOWN and "cannot write the scratch object" in proof.detail, proof
    lists = slow_s3.forwarded["list"]
    results = list(Deleter(slow_s3.config, [root], enforcement=enforcement).run(items))
    assert Counter(r.outcome for r in results) == {GcOutcome.DELETED: 3}
    assert slow_s3.forwarded["list"] > lists   # re-checked by listing


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
    enforcement = Enforcement(slow_s3.config)
    enforcement.prove([f"s3://{s3_bucket}/cp"], [Guard.CONDITIONAL_DELETE])   # before the storm, as GC's driver
    slow_s3.set_faults(share=0.5, seed=3, kinds={"delete"})   # half the DeleteObjects requests answer 503 SlowDown
    deleter = Deleter(slow_s3.config, [f"s3://{s3_bucket}/cp"],
                      DeleteSettings(batch_size=50, requests_in_flight=4, max_attempts=30, **FAST_RETRY),
                      on_progress=lambda files, size, retries: retried.append(retries), enforcement=enforcement)
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

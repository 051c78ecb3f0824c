"""DR copies pinned to the version the index saw, on real parts (a real Flink store; local disk, SeaweedFS, a real
S3 server that enforces CopySourceIfMatch and If-Match itself with no layer of ours in front, a second SeaweedFS
as another endpoint).

A source object rewritten after the index (same key, same size, other bytes) must not reach the target: the copy
of its snapshot fails at the source (CopySourceIfMatch for a server-side copy, If-Match on the GET of a streamed
one, the local fingerprint), no target `_metadata` is written for it, and the job falls back to the next older
restorable checkpoint. Nothing is stat'ed first, so only the pin catches it: these tests fail if a mover drops it.
Every object of every attempted snapshot has its outcome in `dr_files`. A SlowDown storm on the target's writes
slows the copy down and loses nothing.

The source is prepared once, not per test (relocating it and running index, chains and validate are most of
these tests' cost): the local case checks out the session's prepared `incremental` store
(tests/plugins/prepared.py); the S3 cases share one relocation of it to SeaweedFS, indexed, chained and validated
once per module (`s3_source`), and each copies that warehouse and writes its own target prefix. A test that
rewrites a source object there puts the original bytes back (same bytes, same MD5 ETag as indexed), and the
fixture's teardown checks that the source is as indexed.
"""
from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.chains.job import ComputeChains
from statekeeper.format import extract_references, open_metadata
from statekeeper.replicate.job import CopyToDr
from statekeeper.replicate.options import DrOptions, SavepointPolicy, TargetSpec
from statekeeper.storage import RoutingFileIO, StorageConfig
from statekeeper.tables import Warehouse
from statekeeper.uri import normalize_uri
from statekeeper.validate.job import ValidateCheckpoints
from statekeeper.validate.options import ValidateOptions
from tests.chains.support import relocate_store, store_roots
from tests.index.support import run_index
from tests.plugins.s3 import make_bucket
from tests.replicate.support import copies, table

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]

VERSION = harness.FLINK_VERSIONS[-1]
SCENARIO = "incremental"


def _named(metadata: Path) -> set[str]:
    return set(extract_references(open_metadata(metadata), normalize_uri(str(metadata))).physical_files())


def _prepare(spark, roots: list[str], warehouse: Warehouse, storage: StorageConfig | None) -> None:
    index = run_index(spark, roots, warehouse, storage=storage, allow_empty_root=True)
    assert index.status == "succeeded", index.summary()
    ComputeChains(spark).warehouse(warehouse).storage(storage).progress_interval(0).execute()
    result = (ValidateCheckpoints(spark).warehouse(warehouse).storage(storage)
              .configure(ValidateOptions(roots=tuple(roots), quality_suite=False)).progress_interval(0).execute())
    assert result.status == "ok", result.summary()


def _etags(fio: RoutingFileIO, roots: list[str]) -> dict[str, str | None]:
    return {i.uri: i.etag for r in roots for i in fio.list(r)}


@dataclass
class S3Source:
    """The `incremental` store relocated to the session's SeaweedFS, indexed, chained and validated."""

    fio: RoutingFileIO
    bucket: str
    store: str                        # s3://<bucket>/store; roots are its checkpoints/ and savepoints/
    roots: list[str]
    warehouse: Path                   # the prepared warehouse (local): tests copy it, never write into it
    etags: dict[str, str | None]      # every source object's ETag as indexed

    def warehouse_for(self, tmp_path: Path) -> Warehouse:
        """The test's own copy of the prepared warehouse: its DR run writes dr_copies and dr_files there."""
        shutil.copytree(self.warehouse, tmp_path / "warehouse", symlinks=True)
        return Warehouse(str(tmp_path / "warehouse"))


@pytest.fixture(scope="module")
def s3_source(spark, flink_fixture, seaweedfs, tmp_path_factory) -> Iterator[S3Source]:
    s3_config = seaweedfs.config()
    fio = RoutingFileIO(s3_config)
    bucket = make_bucket(s3_config, "src")
    store = relocate_store(flink_fixture(VERSION, SCENARIO).root, f"s3://{bucket}/store", fio)
    roots = store_roots(store)
    warehouse = tmp_path_factory.mktemp("dr-preconditions-s3") / "warehouse"
    _prepare(spark, roots, Warehouse(str(warehouse)), s3_config)
    source = S3Source(fio, bucket, store, roots, warehouse, _etags(fio, roots))
    yield source
    # Each test left the shared source as indexed (a rewritten object has its own bytes back, so its MD5 ETag),
    # or a later test's copy would have met a changed object it did not change.
    assert _etags(fio, roots) == source.etags, "a test left the shared S3 source changed"


@pytest.mark.parametrize("kind", ["local", pytest.param("s3", marks=pytest.mark.s3),
                                  pytest.param("s3_other_endpoint", marks=pytest.mark.s3)])
def test_a_source_object_replaced_after_the_index_fails_its_snapshot_which_falls_back(kind, spark, flink_fixture,
                                                                                      tmp_path, request):
    fx = flink_fixture(VERSION, SCENARIO)
    chks = sorted(Path(fx.root).glob("checkpoints/*/chk-*"), key=lambda d: int(d.name[4:]))
    newest, older = chks[-1], chks[-2]
    only_newest = sorted(_named(newest / "_metadata") - _named(older / "_metadata"))
    assert only_newest
    base = normalize_uri(str(fx.root))
    if kind == "local":
        storage, target_storage = None, None
        co = request.getfixturevalue("prepared_store")(SCENARIO, VERSION).checkout(tmp_path, request.node.nodeid)
        store, warehouse = co.src, co.pipeline.warehouse
        # The checkout's pipeline ran as the S3 source's does: its one validation run found the store restorable.
        assert [r["status"] for r in table(warehouse, "validation_runs")] == ["ok"]
        fio = RoutingFileIO()
        target = normalize_uri(str(tmp_path / "dr"))
    else:
        source = request.getfixturevalue("s3_source")
        storage = request.getfixturevalue("seaweedfs").config()
        fio, store, warehouse = source.fio, source.store, source.warehouse_for(tmp_path)
        if kind == "s3":
            target_storage, target = None, f"s3://{source.bucket}/dr-{kind}"   # one store: server-side CopyObject
        else:
            target_storage = request.getfixturevalue("second_seaweedfs").config()
            target = f"s3://{make_bucket(target_storage, 'dr')}/dr"  # another endpoint: streamed

    # After the index: one file only the newest checkpoint names is rewritten in place, same size, other bytes.
    # (Locally FileIO.write puts a new file under the name, so the checkout's hard link to the prepared file is
    # replaced, never written through.)
    victim = store + only_newest[0][len(base):]
    original = fio.read_bytes(victim)
    fio.write(victim, bytes(b ^ 0x5A for b in original))
    try:
        result = (CopyToDr(spark).warehouse(warehouse).storage(storage).progress_interval(0)
                  .configure(DrOptions(targets=TargetSpec.parse([target]), allowed_targets=(target,),
                                       savepoints=SavepointPolicy.NONE))
                  .target_storage(target_storage).execute())
        assert result.status == "succeeded" and result.fallbacks == 1 and result.verified == 1, result.summary()
        rows = sorted(copies(warehouse, result.run_id), key=lambda r: r["checkpoint_id"])
        assert [(r["checkpoint_id"], r["status"], r["selected_by"]) for r in rows] == [
            (int(older.name[4:]), "verified", "fallback"), (int(newest.name[4:]), "failed", "latest_restorable")]
        failed, fell_back = rows[1], rows[0]
        assert failed["target_metadata_uri"] is None and victim in failed["problem"], failed["problem"]
        moved_newest = target + "/checkpoints" + normalize_uri(str(newest))[len(base + "/checkpoints"):]
        target_io = RoutingFileIO(target_storage or storage or StorageConfig())
        assert not target_io.exists(moved_newest + "/_metadata")
        assert target_io.exists(fell_back["target_metadata_uri"])
        # The rewritten bytes never reached the target.
        victim_target = target + victim[len(store):]
        assert not target_io.exists(victim_target) or target_io.read_bytes(victim_target) != fio.read_bytes(victim)

        files = [r for r in table(warehouse, "dr_files") if r["run_id"] == result.run_id]
        by_copy: dict[str, list[dict]] = {}
        for r in files:
            by_copy.setdefault(r["source_metadata_uri"], []).append(r)
        for row in rows:   # every object of every attempted snapshot has its outcome
            named = {store + u[len(base):]
                     for u in _named(Path(fx.root) / (row["source_metadata_uri"][len(store) + 1:]))}
            assert {r["source_uri"] for r in by_copy[row["source_metadata_uri"]]} == named
        [changed] = [r for r in by_copy[failed["source_metadata_uri"]] if r["source_uri"] == victim]
        assert changed["outcome"] == "source_changed" and not changed["verified"], changed
        assert all(r["verified"] for r in by_copy[fell_back["source_metadata_uri"]])
    finally:
        if kind != "local":   # the S3 source is the module's: the original bytes back (the checkout is the test's)
            fio.write(victim, original)


@pytest.mark.s3
def test_a_slowdown_storm_on_the_target_slows_the_copy_and_loses_nothing(spark, s3_source, slow_s3, tmp_path):
    # slow_s3: the fault proxy in front of the SeaweedFS the source lives on
    fio, roots = s3_source.fio, s3_source.roots
    warehouse = s3_source.warehouse_for(tmp_path)

    target = f"s3://{s3_source.bucket}/dr-slowdown"
    slow_s3.set_faults(share=0.4, seed=5, kinds={"put", "list"})   # copies, puts and listings: 503 SlowDown
    result = (CopyToDr(spark).warehouse(warehouse).storage(slow_s3.config).progress_interval(0)
              .configure(DrOptions(targets=TargetSpec.parse([target]), allowed_targets=(target,),
                                   savepoints=SavepointPolicy.NEWEST))
              .target_storage(None).execute())
    slow_s3.set_faults()
    assert result.status == "succeeded" and result.failed == 0, result.summary()
    assert slow_s3.injected > 0
    # The storm reached the copies' prefixes and was reported per prefix (the pacer slowed them down).
    assert result.prefixes and any(" 0 throttled" not in line for line in result.prefixes), result.prefixes
    files = [r for r in table(warehouse, "dr_files") if r["run_id"] == result.run_id]
    assert files and all(r["verified"] and r["outcome"] in ("copied", "skipped") for r in files)
    at_target = {i.uri: i.size for i in fio.list(target)}
    assert {r["target_uri"]: r["size"] for r in files}.items() <= at_target.items()
    assert _etags(fio, roots) == s3_source.etags   # the source untouched: as indexed


@pytest.mark.s3
@pytest.mark.parametrize("server", ["plain_moto_server", "seaweedfs"])
def test_dr_relies_on_a_stores_preconditions_only_where_its_self_test_proves_them(server, spark, flink_fixture,
                                                                                 tmp_path, request):
    """The copy to a target in the source's bucket (server-side CopyObject) after an object only the newest
    checkpoint names was rewritten (same size). SeaweedFS enforces CopySourceIfMatch and If-None-Match on PutObject
    and CopyObject: the self-test proves all three, and the store refuses the copy of the rewritten source. Moto as
    released ignores CopySourceIfMatch and If-None-Match on CopyObject: the self-test finds that out, and the copier
    reads each source's version before and after its copy and looks each target up before a create-only copy. Either
    way the newest checkpoint fails at the source and the job falls back; dr_runs records the protection per store."""
    fx = flink_fixture(VERSION, SCENARIO)
    chks = sorted(Path(fx.root).glob("checkpoints/*/chk-*"), key=lambda d: int(d.name[4:]))
    newest, older = chks[-1], chks[-2]
    only_newest = sorted(_named(newest / "_metadata") - _named(older / "_metadata"))
    base = normalize_uri(str(fx.root))
    config = request.getfixturevalue(server).config()
    fio = RoutingFileIO(config)
    bucket = make_bucket(config, "src")
    store = relocate_store(fx.root, f"s3://{bucket}/store", fio)
    warehouse = Warehouse(str(tmp_path / "warehouse"))
    _prepare(spark, store_roots(store), warehouse, config)
    victim = store + only_newest[0][len(base):]
    fio.write(victim, bytes(b ^ 0x5A for b in fio.read_bytes(victim)))
    target = f"s3://{bucket}/dr"

    result = (CopyToDr(spark).warehouse(warehouse).storage(config).progress_interval(0)
              .configure(DrOptions(targets=TargetSpec.parse([target]), allowed_targets=(target,),
                                   savepoints=SavepointPolicy.NONE))
              .target_storage(None).execute())
    assert result.status == "succeeded" and result.fallbacks == 1 and result.verified == 1, result.summary()
    rows = sorted(copies(warehouse, result.run_id), key=lambda r: r["checkpoint_id"])
    assert [(r["checkpoint_id"], r["status"]) for r in rows] == [(int(older.name[4:]), "verified"),
                                                                (int(newest.name[4:]), "failed")]
    [changed] = [r for r in table(warehouse, "dr_files") if r["run_id"] == result.run_id and r["source_uri"] == victim]
    assert changed["outcome"] == "source_changed" and not changed["verified"], changed
    enforced = server == "seaweedfs"
    assert ("the copy was refused by the store" if enforced else "re-checked because the store does not enforce "
            "CopySourceIfMatch") in changed["message"], changed["message"]
    assert all(r["method"] in ("server_side", "", None) for r in table(warehouse, "dr_files")
               if r["run_id"] == result.run_id)
    victim_target = target + victim[len(store):]
    assert not fio.exists(victim_target) or fio.read_bytes(victim_target) != fio.read_bytes(victim)

    name = f"s3://{bucket} at {config.endpoint}"
    expected = ([("pinned_copy", "enforced", "precondition"), ("create_only_write", "enforced", "precondition"),
                 ("create_only_copy", "enforced", "precondition")] if enforced else
                [("pinned_copy", "ignored", "source_recheck"), ("create_only_write", "enforced", "precondition"),
                 ("create_only_copy", "ignored", "existence_check")])
    [run] = [r for r in table(warehouse, "dr_runs") if r["run_id"] == result.run_id]
    assert [(p["store"], p["guard"], p["verdict"], p["protection"]) for p in run["protection"]] == [
        (name, *e) for e in expected]
    line = (f"protection: {name}: CopySourceIfMatch on CopyObject: {expected[0][2]} ({expected[0][1]}); If-None-Match: "
            f"* on PutObject: precondition (enforced); If-None-Match: * on CopyObject: {expected[2][2]} "
            f"({expected[2][1]})")
    assert line in result.summary(), result.summary()
    assert not [i.uri for i in fio.list(f"s3://{bucket}") if "/_statekeeper_probe/" in i.uri]

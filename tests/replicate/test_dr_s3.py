"""DR copies between two S3 endpoints (the session's SeaweedFS, then a second SeaweedFS: another endpoint, other
data), and back.

The newest version's stores of every DR scenario (the chains, file merging, unaligned, savepoints, hashmap) live
on the session's SeaweedFS: the CLAIM chain and the savepoints as real Flink wrote them into it
(tests/plugins/flink_s3.py), the others (no S3 generation of their own, to keep the session's generation cost at
two stores) as relocated copies of the cached local stores. The DR copy goes to a bucket on the second server,
reached with its own StorageConfig (as the DR region's Airflow connection would be): bytes stream get -> put,
nothing is server-side. It is verified there; then the DR bucket is indexed and validated as a
source of its own and copied down to local disk with the same job, and those copies restore in real Flink,
which here can read nothing but them (no s3:// file system).
"""
from __future__ import annotations

from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.chains.job import ComputeChains
from statekeeper.replicate.job import CopyToDr
from statekeeper.replicate.options import DrOptions, SavepointPolicy, TargetSpec, VerifyMode
from statekeeper.storage import RoutingFileIO
from statekeeper.tables import Warehouse
from statekeeper.uri import normalize_uri
from statekeeper.validate.job import ValidateCheckpoints
from statekeeper.validate.options import ValidateOptions
from tests.chains.support import relocate_store, store_roots
from tests.index.support import run_index
from tests.plugins.s3 import make_bucket
from tests.replicate.support import table
from tests.replicate.test_dr_flink import SCENARIOS

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.s3, pytest.mark.slow]

VERSION = harness.FLINK_VERSIONS[-1]
FLINK_WRITTEN = ("chain_claim", "savepoints")     # written by Flink straight into SeaweedFS, not relocated


def _index_and_validate(spark, roots, warehouse, storage):
    index = run_index(spark, roots, warehouse, storage=storage, allow_empty_root=True)
    assert index.status == "succeeded", index.summary()
    ComputeChains(spark).warehouse(warehouse).storage(storage).progress_interval(0).execute()
    result = (ValidateCheckpoints(spark).warehouse(warehouse).storage(storage)
              .configure(ValidateOptions(roots=tuple(roots), quality_suite=False)).progress_interval(0).execute())
    assert result.status == "ok", result.summary()


def test_copy_to_another_endpoint_and_back_restores(spark, flink_fixture, flink_s3_store, seaweedfs,
                                                     second_seaweedfs, tmp_path):
    s3_config = seaweedfs.config()
    written = {s: flink_s3_store(s) for s in FLINK_WRITTEN}
    fixtures = {s: flink_fixture(VERSION, s) for s in SCENARIOS
                if s in harness.scenarios_for(VERSION) and s not in written}
    src_bucket = make_bucket(s3_config, "src")
    roots = [r for s, fx in fixtures.items()
             for r in store_roots(relocate_store(fx.root, f"s3://{src_bucket}/{s}", RoutingFileIO(s3_config)))]
    roots += [r for store in written.values() for r in store.roots]
    warehouse = Warehouse(str(tmp_path / "warehouse"))
    _index_and_validate(spark, roots, warehouse, s3_config)

    dr_config = second_seaweedfs.config()
    dr_bucket = make_bucket(dr_config, "dr")
    target = f"s3://{dr_bucket}/flink"
    result = (CopyToDr(spark).warehouse(warehouse).storage(s3_config).progress_interval(0)
              .configure(DrOptions(targets=TargetSpec.parse([target]), allowed_targets=(f"s3://{dr_bucket}",),
                                   savepoints=SavepointPolicy.ALL, verify=VerifyMode.CHECKSUM))
              .target_storage(dr_config).execute())
    assert result.status == "succeeded" and result.failed == 0 and result.verified > 0, result.summary()
    files = [r for r in table(warehouse, "dr_files") if r["run_id"] == result.run_id]
    assert files and {r["method"] for r in files} == {"stream"}          # another endpoint: never server-side
    assert all(r["verified"] and r["checksum"] for r in files)
    # the DR server has every object and every copy's _metadata
    at_target = {i.uri for i in RoutingFileIO(dr_config).list(target)}
    assert {r["target_uri"] for r in files} <= at_target
    copied = table(warehouse, "dr_copies")
    assert {r["target_metadata_uri"] for r in copied if r["run_id"] == result.run_id} <= at_target

    # a second run on the DR side has nothing new to copy
    again = (CopyToDr(spark).warehouse(warehouse).storage(s3_config).progress_interval(0)
             .configure(DrOptions(targets=TargetSpec.parse([target]), allowed_targets=(f"s3://{dr_bucket}",),
                                  savepoints=SavepointPolicy.ALL))
             .target_storage(dr_config).execute())
    assert again.files_copied == 0 and again.files_skipped == result.files_copied + result.files_skipped

    # download: the DR bucket is now a source (indexed, validated) copied to local disk by the same job
    dr_roots = list(result.target_roots)
    dr_warehouse = Warehouse(str(tmp_path / "dr-warehouse"))
    _index_and_validate(spark, dr_roots, dr_warehouse, dr_config)
    local_target = normalize_uri(str(tmp_path / "restored"))
    back = (CopyToDr(spark).warehouse(dr_warehouse).storage(dr_config).progress_interval(0)
            .configure(DrOptions(targets=TargetSpec.parse([local_target]), allowed_targets=(local_target,),
                                 savepoints=SavepointPolicy.ALL))
            .target_storage(None).execute())
    assert back.status == "succeeded" and back.verified == result.verified, back.summary()

    # The sources span two buckets (the relocated stores' and the Flink-written ones'): each comes down below its
    # bucket's name.
    restored = tmp_path / "restored"
    cases = []
    for s, fx in fixtures.items():
        below = lambda d: normalize_uri(d)[len(normalize_uri(str(fx.root))) + 1:]   # noqa: E731
        for job in fx.manifest["jobs"]:
            if job["retained_checkpoints"]:
                newest = max(job["retained_checkpoints"], key=lambda d: int(d.rsplit("-", 1)[1]))
                cases.append((restored / src_bucket / s / below(newest), s, job["name"]))
        for sp in fx.manifest.get("savepoints", []):
            cases.append((restored / src_bucket / s / below(sp["dir"]), s, sp["job"]))
    for s, store in written.items():
        here = restored / store.root[len("s3://"):]
        for job in store.manifest["jobs"]:
            cases.append((here / job["retained_checkpoints"][-1][len(store.root) + 1:], s, job["name"]))
        for sp in store.manifest["savepoints"]:
            cases.append((here / sp["dir"][len(store.root) + 1:], s, sp["job"]))
    for path, _, _ in cases:
        assert (Path(path) / "_metadata").is_file(), path
    # No oracle JVM listing each copy's files to check they lie below local_target: the restore proves it. Every
    # file a `_metadata` names is read when Flink restores it, and none but those below local_target can be read
    # here: the fixtures' local paths were all rewritten into S3 (relocate_store refuses any it cannot map), the
    # Flink-written stores name only s3:// paths, and
    # the harness's Flink has no s3:// file system, so a path either copy left unrewritten fails the restore.
    results = harness.verify_restore_many(VERSION, cases)
    failed = [(str(c[0]), r.output[-2000:]) for c, r in zip(cases, results, strict=True) if not r.ok]
    assert not failed, failed

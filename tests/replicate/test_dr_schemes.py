"""DR copy between storage schemes: S3 (SeaweedFS) -> Google Cloud Storage (its emulator), `_metadata`
rewritten to gs:// paths, then down to local disk, where it restores in real Flink.

The CLAIM chain that real Flink wrote straight into the session's SeaweedFS (tests/plugins/flink_s3.py) is
indexed, validated and copied by the DR job to a GCS bucket (another store: every object streams, none is
server-side). Every copied `_metadata`, read back from GCS with the codec, names only objects under the GCS
target, and every one of them is there. The GCS copy is then downloaded (paths rewritten to the local copy) and
the newest checkpoint of each job restores in a verifier JVM that has no S3 file system at all (no plugin
loaded), so a reference left pointing at the S3 source fails it; the source, shared by the session's tests, stays.
"""
from __future__ import annotations

import io
from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.chains.job import ComputeChains
from statekeeper.format import extract_references, read_metadata
from statekeeper.replicate.job import CopyToDr
from statekeeper.replicate.options import DrOptions, SavepointPolicy, TargetSpec, VerifyMode
from statekeeper.storage import RoutingFileIO
from statekeeper.tables import Warehouse
from statekeeper.uri import normalize_uri
from statekeeper.validate.job import ValidateCheckpoints
from statekeeper.validate.options import ValidateOptions
from tests.compact.support import download_store
from tests.index.support import run_index
from tests.plugins.object_stores import make_gcs_bucket
from tests.replicate.support import table

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.s3, pytest.mark.gcs, pytest.mark.slow]

VERSION = harness.FLINK_VERSIONS[-1]


def test_s3_to_gcs_rewritten_complete_and_restorable(spark, flink_s3_store, seaweedfs, gcs_config, tmp_path):
    store = flink_s3_store("chain_claim")
    s3_config = seaweedfs.config()
    s3 = RoutingFileIO(s3_config)
    roots = [r for r in store.roots if list(s3.list(r))]
    warehouse = Warehouse(str(tmp_path / "warehouse"))
    assert run_index(spark, roots, warehouse, storage=s3_config).status == "succeeded"
    ComputeChains(spark).warehouse(warehouse).storage(s3_config).progress_interval(0).execute()
    validation = (ValidateCheckpoints(spark).warehouse(warehouse).storage(s3_config)
                  .configure(ValidateOptions(roots=tuple(roots), quality_suite=False)).progress_interval(0).execute())
    assert validation.status == "ok", validation.summary()

    gcs_bucket = make_gcs_bucket(gcs_config, "drdst")
    target = f"gs://{gcs_bucket}/dr"
    result = (CopyToDr(spark).warehouse(warehouse).storage(s3_config).progress_interval(0)
              .configure(DrOptions(targets=TargetSpec.parse([target]), allowed_targets=(f"gs://{gcs_bucket}",),
                                   savepoints=SavepointPolicy.ALL, verify=VerifyMode.CHECKSUM))
              .target_storage(gcs_config).execute())
    assert result.status == "succeeded" and result.failed == 0 and result.verified > 0, result.summary()
    files = [r for r in table(warehouse, "dr_files") if r["run_id"] == result.run_id]
    assert files and {r["method"] for r in files} == {"stream"}      # another store: never server-side
    assert all(r["verified"] for r in files)

    gcs = RoutingFileIO(gcs_config)
    at_target = {i.uri for i in gcs.list(target)}
    copies = [r for r in table(warehouse, "dr_copies") if r["run_id"] == result.run_id]
    for row in copies:
        meta = row["target_metadata_uri"]
        assert meta.startswith(target + "/") and meta in at_target, row
        refs = extract_references(read_metadata(io.BytesIO(gcs.read_bytes(meta)), meta), meta)
        named = set(refs.physical_files())
        assert named and all(u.startswith(target + "/") for u in named), (meta, sorted(named)[:3])
        assert named <= at_target, sorted(named - at_target)[:3]

    # the GCS copy, brought down to local disk, restores with no S3 reachable from the verifier's JVM
    local_root = download_store(target, tmp_path / "restored", gcs)
    cases = []
    for job in store.manifest["jobs"]:
        if job["retained_checkpoints"]:
            source_meta = normalize_uri(job["retained_checkpoints"][-1] + "/_metadata")
            row = next(r for r in copies if r["source_metadata_uri"] == source_meta)
            local_meta = local_root + row["target_metadata_uri"][len(target):]
            cases.append((Path(local_meta[len("file://"):]).parent, "chain_claim", job["name"]))
    results = harness.verify_restore_many(VERSION, cases)
    assert [r.ok for r in results] == [True] * len(cases), [r.output[-2000:] for r in results if not r.ok]

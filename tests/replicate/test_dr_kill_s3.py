"""A DR copy on the session's SeaweedFS, from the CLAIM chain real Flink wrote into it (tests/plugins/flink_s3.py)
to a bucket of its own (server-side, pinned to the indexed ETags, create-only: the server itself enforces
CopySourceIfMatch and If-None-Match, no layer of ours in front), killed with SIGKILL mid-copy, then re-run: no
target `_metadata` is ever visible before every object it names is there, the re-run finishes, and every object of
every copy has its outcome in `dr_files`. SeaweedFS can keep a "directory" listed after its last object is gone
(unlike AWS S3): a `chk-N/` prefix listed beside the retained ones holds nothing, and the index records exactly the
retained checkpoints. The killed run's output goes to a file: a pipe nobody reads would block the job once 64 KiB
are unread (tests.plugins.spark.kill_job_when).
"""
from __future__ import annotations

import pytest

import tests.harness as harness
from statekeeper.chains.job import ComputeChains
from statekeeper.format import extract_references, read_metadata
from statekeeper.replicate.job import CopyToDr
from statekeeper.replicate.options import DrOptions, SavepointPolicy, TargetSpec
from statekeeper.storage import RoutingFileIO
from statekeeper.tables import Warehouse
from statekeeper.validate.job import ValidateCheckpoints
from statekeeper.validate.options import ValidateOptions
from tests.index.support import run_index
from tests.plugins.s3 import make_bucket, s3_env
from tests.plugins.spark import job_process_env, kill_job_when
from tests.replicate.support import copies, table

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.s3, pytest.mark.slow]

VERSION = harness.FLINK_VERSIONS[-1]


def _incomplete(fio: RoutingFileIO, target: str) -> list[str]:
    """Every target `_metadata` naming an object that is not there (should be none)."""
    present = {i.uri: i.size for i in fio.list(target)}
    bad = []
    for meta in [u for u in present if u.endswith("/_metadata")]:
        with fio.open_input(meta) as stream:
            named = extract_references(read_metadata(stream, meta), meta).physical_files()
        bad += [f"{meta} names missing {u}" for u in named if u not in present]
    return bad


def test_sigkill_mid_copy_on_s3_then_rerun(spark, flink_s3_store, seaweedfs, tmp_path):
    store = flink_s3_store("chain_claim")
    s3_config = seaweedfs.config()
    fio = RoutingFileIO(s3_config)
    roots = store.roots
    warehouse = Warehouse(str(tmp_path / "warehouse"))
    index = run_index(spark, roots, warehouse, storage=s3_config, allow_empty_root=True)
    assert index.status == "succeeded", index.summary()
    # Flink subsumed A's first checkpoint (4 completed, 3 retained): a prefix SeaweedFS still lists for it holds
    # nothing, and the index records exactly the retained checkpoints
    a = store.job("A")
    listed = [d.rstrip("/") for d in fio.list_dirs(a["job_dir"]) if d.rstrip("/").rsplit("/", 1)[-1].startswith("chk-")]
    assert set(a["retained_checkpoints"]) <= set(listed), listed
    assert not [i for d in listed if d not in a["retained_checkpoints"] for i in fio.list(d)], listed
    print(f"[dr kill s3] A's chk dirs listed: {[d.rsplit('/', 1)[-1] for d in listed]}, "
          f"retained: {[d.rsplit('/', 1)[-1] for d in a['retained_checkpoints']]}")
    indexed = {r["uri"] for r in table(warehouse, "snapshots")}
    assert indexed == {f"{d}/_metadata" for d in store.retained_checkpoints()}, indexed
    ComputeChains(spark).warehouse(warehouse).storage(s3_config).progress_interval(0).execute()
    (ValidateCheckpoints(spark).warehouse(warehouse).storage(s3_config)
     .configure(ValidateOptions(roots=tuple(roots), quality_suite=False)).progress_interval(0).execute())
    target = f"s3://{make_bucket(s3_config, 'dr')}/dr"

    def mid_copy() -> bool:
        assert not _incomplete(fio, target)
        return len(list(fio.list(target))) >= 30

    kill_job_when("copy_to_dr", ["--warehouse", warehouse.uri, "--target", target, "--allowed-targets", target,
                                 "--max-copies-per-second", "15"], mid_copy,
                  cwd=tmp_path, env=job_process_env(**s3_env(s3_config)), what="30 objects at the target")
    assert not [i for i in fio.list(target) if i.uri.endswith("/_metadata")], "a _metadata before its objects"

    result = (CopyToDr(spark).warehouse(warehouse).storage(s3_config).progress_interval(0)
              .configure(DrOptions(targets=TargetSpec.parse([target]), allowed_targets=(target,),
                                   savepoints=SavepointPolicy.NEWEST))
              .target_storage(None).execute())
    assert result.status == "succeeded" and result.failed == 0, result.summary()
    # What the killed run copied is proven by content (plain-MD5 ETags of one store), not copied again.
    assert result.files_skipped >= 30, result.summary()
    assert not _incomplete(fio, target)
    rows = copies(warehouse, result.run_id)
    assert rows and all(r["status"] == "verified" for r in rows)
    files = [r for r in table(warehouse, "dr_files") if r["run_id"] == result.run_id]
    for row in rows:
        with fio.open_input(row["target_metadata_uri"]) as stream:
            named = set(extract_references(read_metadata(stream, row["target_metadata_uri"]),
                                           row["target_metadata_uri"]).physical_files())
        recorded = {r["target_uri"] for r in files if r["source_metadata_uri"] == row["source_metadata_uri"]}
        assert named <= recorded, sorted(named - recorded)[:3]
    assert all(r["verified"] and r["outcome"] in ("copied", "skipped") for r in files)

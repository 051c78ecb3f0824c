"""A DR copy is verified only when the target holds the source's bytes (issue 28, part 2).

A target that already holds an object of the same name and size but other bytes (a stale copy from an
interrupted or foreign run, bit rot, a hand copy) used to be skipped by its size in `--verify size`
mode: the copy was reported verified and did not restore (RocksDB: "Mismatch in unique ID on table
file"). Here one shared SST of the newest checkpoint of the cached `incremental` store (one RocksDB
job whose incremental checkpoints share SSTs; the newest Flink version) is pre-seeded with one byte
flipped, at a local target, on S3 (SeaweedFS) and on the GCS emulator. Each DR copy replaces it (the target
bytes are the source's afterwards), and all three copies restore in real Flink, in one JVM, with the
originals moved away. Then `--mode verify` flags an object rewritten at the target since it was
verified (same size, other bytes), and a re-run of the copy repairs it. Last, a target reached
through a symlink into a source root is refused as a configuration error (exit 2) with nothing
created.

One checkout of the session's prepared `incremental` store (tests/plugins/prepared.py: relocated,
indexed, chained and validated once) serves the whole module.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import tests.harness as harness
from statekeeper.format import extract_references, open_metadata
from statekeeper.replicate.job import CopyToDr
from statekeeper.replicate.options import DrOptions, SavepointPolicy, TargetSpec
from statekeeper.storage import RoutingFileIO, StorageConfig
from tests.compact.support import download_store
from tests.plugins.object_stores import make_gcs_bucket
from tests.plugins.s3 import make_bucket
from tests.replicate.support import DrPipeline, copies, local, table, uri

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.s3, pytest.mark.gcs, pytest.mark.slow]

VERSION = harness.FLINK_VERSIONS[-1]
SCENARIO = "incremental"


@dataclass
class Store:
    base: Path
    src: str                 # the relocated store (file:// URI); roots are its checkpoints/ and savepoints/
    pipeline: DrPipeline
    newest: Path             # the job's newest checkpoint directory: what the DR copy selects
    shared: str              # a shared SST the newest checkpoint references (file:// URI)


@dataclass
class Copied:
    target: str              # the target base the copy mirrored the roots below
    seeded: str              # the target URI of `Store.shared`, pre-seeded with other bytes
    result: dict[str, Any]   # the run's result (DrResult mapping)
    restore_dir: Path        # the newest checkpoint's copy on local disk (downloaded for object stores)


def _flipped(data: bytes) -> bytes:
    """Same size, one byte different: what a stale or rotted copy looks like to a size check."""
    out = bytearray(data)
    out[len(out) // 2] ^= 0xFF
    return bytes(out)


def _below(store: Store, source_uri: str) -> str:
    """A source object's path below the target base (`--target BASE` mirrors below the roots' parent)."""
    return source_uri[len(store.src) + 1:]


@pytest.fixture(scope="module")
def store(prepared_store, tmp_path_factory, request) -> Store:
    base = tmp_path_factory.mktemp("dr-identity")
    co = prepared_store(SCENARIO, VERSION).checkout(base, request.node.nodeid)   # indexed, chained, validated
    newest = max(local(co.src).glob("checkpoints/*/chk-*"), key=lambda d: int(d.name[4:]))
    refs = extract_references(open_metadata(newest / "_metadata"), uri(newest / "_metadata"))
    shared = sorted(u for u in refs.physical_files() if "/shared/" in u and local(u).stat().st_size >= 1024)
    assert shared, f"{newest} references no shared SST: the scenario no longer fits this test"
    return Store(base, co.src, co.pipeline, newest, shared[0])


def _copy_with(store: Store, config: StorageConfig, target: str, allowed: str) -> dict[str, Any]:
    """A size-mode DR copy of the local store to an object store, through the builder (the DR store's own
    StorageConfig, as the DAG's STATEKEEPER_DR_* connection gives it)."""
    result = (CopyToDr(store.pipeline.spark).warehouse(store.pipeline.warehouse).storage(config)
              .progress_interval(0)
              .configure(DrOptions(targets=TargetSpec.parse([target]), allowed_targets=(allowed,),
                                   savepoints=SavepointPolicy.NONE))
              .target_storage(config).execute())
    return result.to_mapping()


def _assert_replaced(store: Store, copied: Copied, target_bytes: bytes) -> None:
    r = copied.result
    assert r["status"] == "succeeded" and r["failed"] == 0 and r["verified"] == 1, r
    assert target_bytes == local(store.shared).read_bytes(), f"{copied.seeded} still holds the foreign bytes"
    rows = [f for f in table(store.pipeline.warehouse, "dr_files")
            if f["run_id"] == r["run_id"] and f["target_uri"] == copied.seeded]
    assert rows and all(f["outcome"] == "copied" and f["verified"] and f["target_version"] for f in rows), rows


@pytest.fixture(scope="module")
def local_copy(store: Store) -> Copied:
    target = uri(store.base / "dr")
    seeded = f"{target}/{_below(store, store.shared)}"
    local(seeded).parent.mkdir(parents=True)
    local(seeded).write_bytes(_flipped(local(store.shared).read_bytes()))
    code, result = store.pipeline.dr("--target", target, "--allowed-targets", target, "--savepoints", "none")
    assert code == 0, result
    restore_dir = local(target) / _below(store, uri(store.newest))
    return Copied(target, seeded, result, restore_dir)


@pytest.fixture(scope="module")
def s3_copy(store: Store, s3_config) -> Copied:
    bucket = make_bucket(s3_config, "dr-identity")
    target = f"s3://{bucket}/dr"
    seeded = f"{target}/{_below(store, store.shared)}"
    s3 = RoutingFileIO(s3_config)
    s3.write(seeded, _flipped(local(store.shared).read_bytes()))   # one PUT: a plain MD5 ETag of other bytes
    result = _copy_with(store, s3_config, target, f"s3://{bucket}")
    root = download_store(target, store.base / "from-s3", s3)
    return Copied(target, seeded, result, local(root) / _below(store, uri(store.newest)))


@pytest.fixture(scope="module")
def gcs_copy(store: Store, gcs_config) -> Copied:
    bucket = make_gcs_bucket(gcs_config, "dr-identity")
    target = f"gs://{bucket}/dr"
    seeded = f"{target}/{_below(store, store.shared)}"
    gcs = RoutingFileIO(gcs_config)
    gcs.write(seeded, _flipped(local(store.shared).read_bytes()))  # a CRC32C of other bytes
    result = _copy_with(store, gcs_config, target, f"gs://{bucket}")
    root = download_store(target, store.base / "from-gcs", gcs)
    return Copied(target, seeded, result, local(root) / _below(store, uri(store.newest)))


def test_local_target_with_a_foreign_same_size_object_is_replaced(store, local_copy):
    _assert_replaced(store, local_copy, local(local_copy.seeded).read_bytes())


def test_s3_target_with_a_foreign_same_size_object_is_replaced(store, s3_copy, s3_config):
    _assert_replaced(store, s3_copy, RoutingFileIO(s3_config).read_bytes(s3_copy.seeded))


def test_gcs_target_with_a_foreign_same_size_object_is_replaced(store, gcs_copy, gcs_config):
    _assert_replaced(store, gcs_copy, RoutingFileIO(gcs_config).read_bytes(gcs_copy.seeded))


def test_the_copies_restore_with_the_originals_moved_away(store, local_copy, s3_copy, gcs_copy):
    cases = [(c.restore_dir, SCENARIO, None) for c in (local_copy, s3_copy, gcs_copy)]
    for path, _, _ in cases:
        assert (path / "_metadata").is_file(), f"no copy of {store.newest} at {path}"
    moved_away = store.base / "src-moved-away"
    local(store.src).rename(moved_away)
    try:
        results = harness.verify_restore_many(VERSION, cases)
    finally:
        moved_away.rename(local(store.src))
    failed = [(str(case[0]), r.output[-2000:]) for case, r in zip(cases, results, strict=True) if not r.ok]
    assert not failed, failed


def test_reverify_flags_an_object_changed_since_it_was_verified(store, local_copy):
    p, target = store.pipeline, local_copy.target
    args = ["--target", target, "--allowed-targets", target]
    code, clean = p.dr("--mode", "verify", *args)
    assert code == 0 and clean["failed"] == 0, clean

    # rewritten in place, same size: a size check cannot tell, the recorded version can
    seeded = local(local_copy.seeded)
    with open(seeded, "r+b") as f:
        f.write(_flipped(seeded.read_bytes()))
    code, flagged = p.dr("--mode", "verify", *args)
    assert code == 1 and flagged["failed"] == 1, flagged
    row = next(r for r in copies(p.warehouse, flagged["run_id"]) if r["status"] == "failed")
    assert local_copy.seeded in row["problem"] and "re-run the DR copy" in row["problem"], row["problem"]

    # the re-run the message asks for replaces it; then it verifies again
    code, again = p.dr(*args, "--savepoints", "none")
    assert code == 0 and again["files_copied"] >= 1, again
    assert seeded.read_bytes() == local(store.shared).read_bytes()
    code, fixed = p.dr("--mode", "verify", *args)
    assert code == 0 and fixed["failed"] == 0, fixed


def _tree(root: Path) -> set[str]:
    return {str(Path(d) / n) for d, dirs, files in os.walk(root) for n in [*dirs, *files]}


def test_a_target_through_a_symlink_into_a_source_root_exits_2_with_nothing_created(store):
    p = store.pipeline
    checkpoints = local(store.src) / "checkpoints"
    link = store.base / "looks-like-dr"
    link.symlink_to(checkpoints, target_is_directory=True)
    before = _tree(local(store.src))
    try:
        # a base target: its roots are mapped from the index (the job's own check, before any Spark task)
        code, result = p.dr("--target", uri(link), "--allowed-targets", uri(link), "--savepoints", "none",
                            name="symlinked")
        assert code == 2, result
        assert "overlaps the source root" in result["error"] and "resolved" in result["error"], result
        # an explicit pair: refused by the entry point's preflight, before Spark is used at all
        code, result = p.dr(f"--target={store.src}/checkpoints={uri(link)}/dr", "--allowed-targets", uri(link),
                            "--savepoints", "none", name="symlinked-pair")
        assert code == 2, result
        assert _tree(local(store.src)) == before, sorted(_tree(local(store.src)) - before)
    finally:
        link.unlink()

"""Flink's own S3 filesystem plugin in the harness: the pinned jar, and the session's stores Flink wrote straight
into SeaweedFS, restored from the bucket through the same plugin. (A live job on S3, `start_job` with an s3://
root, is the DR follow test's: tests/replicate/test_dr_follow_live.py.)"""
from __future__ import annotations

import pytest

import tests.harness as harness
from statekeeper.storage import RoutingFileIO
from tests.harness import s3_plugin
from tests.plugins.flink_s3 import flink_s3_endpoint

VERSION = harness.FLINK_VERSIONS[-1]


@pytest.mark.unit
def test_a_jar_that_is_not_the_pinned_one_is_refused_by_name(tmp_path):
    name = f"{s3_plugin.PLUGIN}-{s3_plugin.plugin_version(VERSION)}.jar"
    assert name in s3_plugin.pinned()
    jar = tmp_path / name
    jar.write_bytes(b"PK\x03\x04 not the plugin")
    with pytest.raises(s3_plugin.PluginChecksumError, match=f"{name} has sha256 .* pinned"):
        s3_plugin.verify_jar(jar)
    unpinned = tmp_path / "flink-s3-fs-hadoop-0.0.1.jar"
    unpinned.write_bytes(b"x")
    with pytest.raises(s3_plugin.PluginChecksumError, match="no pinned sha256"):
        s3_plugin.verify_jar(unpinned)


@pytest.mark.flink
def test_every_harness_version_has_a_pinned_plugin_and_the_newest_is_fetched_as_pinned():
    for version in harness.FLINK_VERSIONS:   # chosen and pinned (only the newest is fetched by the suite)
        assert f"{s3_plugin.PLUGIN}-{s3_plugin.plugin_version(version)}.jar" in s3_plugin.pinned()
    jar = s3_plugin.plugins_root(VERSION) / s3_plugin.PLUGIN_DIR / \
        f"{s3_plugin.PLUGIN}-{s3_plugin.plugin_version(VERSION)}.jar"
    s3_plugin.verify_jar(jar)


@pytest.mark.flink
def test_flink_writes_a_claim_chain_and_savepoints_into_seaweedfs(seaweedfs, flink_s3_store):
    """The session's S3 stores (tests/plugins/flink_s3.py): B and C CLAIM-restored, their `_metadata` naming
    their parents' `shared/` objects by the s3:// URIs Flink wrote; every job's newest checkpoint and both
    savepoints restore from the bucket through the plugin, in one JVM."""
    from statekeeper.format import extract_references, read_metadata

    fio = RoutingFileIO(seaweedfs.config())
    chain, saved = flink_s3_store("chain_claim"), flink_s3_store("savepoints")
    a, b, c = chain.job("A"), chain.job("B"), chain.job("C")
    assert (b["claim_mode"], c["claim_mode"]) == ("CLAIM", "CLAIM")
    assert b["restored_from"].startswith(a["job_dir"] + "/chk-") and c["restored_from"].startswith(b["job_dir"])
    newest_c = c["retained_checkpoints"][-1] + "/_metadata"
    with fio.open_input(newest_c) as stream:
        named = extract_references(read_metadata(stream, newest_c), newest_c).physical_files()
    assert any(u.startswith(a["job_dir"] + "/shared/") for u in named), named
    assert any(u.startswith(b["job_dir"] + "/shared/") for u in named), named
    missing = [u for u in named if not fio.exists(u)]
    assert not missing, missing
    assert {s["format"] for s in saved.manifest["savepoints"]} == {"CANONICAL", "NATIVE"}
    cases = [(chain.retained_checkpoints(j)[-1], "chain_claim", j) for j in ("A", "B", "B_legacy", "C")]
    cases += [(d, "savepoints", "A") for d in saved.savepoint_dirs()]
    results = harness.verify_restore_many(VERSION, cases, s3=flink_s3_endpoint(seaweedfs))
    failed = [(c[0], r.output[-1500:]) for c, r in zip(cases, results, strict=True) if not r.ok]
    assert not failed, failed

"""The batch restore verifier (`verify_restore_many`, one JVM for many snapshots) gives the same
verdicts as `verify_restore`, keeps going past a failing case and leaves every snapshot untouched."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import tests.harness as harness
from tests.harness.verify import VerifyCase, _case_logs, verify_restore_many

# The newest Flink under test (2.3.0 by default): one JVM, ~2 s per snapshot.
VERSION = max(harness.FLINK_VERSIONS, key=lambda v: tuple(int(x) for x in v.split(".")))


def _tree(root: Path) -> dict:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


@pytest.mark.flink
def test_many_snapshots_restore_in_one_jvm_and_a_broken_one_fails_alone(flink_harness, flink_fixture, tmp_path):
    incremental = flink_fixture(VERSION, "incremental")
    savepoints = flink_fixture(VERSION, "savepoints")
    chain = flink_fixture(VERSION, "chain_claim")
    newest = incremental.retained_checkpoints("A")[-1]
    # A copied chk dir of an incremental checkpoint would still restore from the original shared/
    # files; a truncated _metadata cannot be read at all.
    broken = tmp_path / "broken" / newest.name
    broken.mkdir(parents=True)
    metadata = (newest / "_metadata").read_bytes()
    (broken / "_metadata").write_bytes(metadata[: len(metadata) // 2])

    retained = incremental.retained_checkpoints("A")
    sps = savepoints.savepoint_dirs()
    assert len(retained) == 3 and sorted(s["format"] for s in savepoints.manifest["savepoints"]) == \
        ["CANONICAL", "NATIVE"]
    # The broken case sits in the middle: the cases after it must still run.
    cases = [(chk, "incremental", None) for chk in retained] + [(broken, "incremental", None)] \
        + [(sp, "savepoints", None) for sp in sps] + [VerifyCase(chain.retained_checkpoints("C")[-1], "chain_claim", "C")]
    before = {fx.root: _tree(fx.root) for fx in (incremental, savepoints, chain)}
    broken_before = _tree(broken.parent)

    results = flink_harness.verify_restore_many(VERSION, cases)

    assert len(results) == len(cases)
    bad = 3
    for i, result in enumerate(results):
        if i == bad:
            continue
        assert result.ok and result.returncode == 0, f"case {i} {cases[i]}: {result.output[-3000:]}"
        assert result.output.startswith("[verify] OK: restored at element ")
        # The new checkpoint went into a temporary directory that is gone again.
        fresh = re.search(r" in (/\S+)$", result.output)
        assert fresh and not Path(fresh[1]).exists(), result.output
    failed = results[bad]
    assert not failed.ok and failed.returncode == 1
    assert failed.output.startswith("[verify] FAIL: restore or run failed"), failed.output[-3000:]
    # The tail of that case's JVM log follows the verdict.
    assert len(failed.output.splitlines()) > 1 and "[verify-many] case 3 " in failed.output
    for root, tree in before.items():
        assert _tree(root) == tree, f"verifying modified the cached store {root}"
    assert _tree(broken.parent) == broken_before


def test_case_logs_split_the_jvm_output_per_case():
    out = "boot\n[verify-many] case 0 (5 ms) OK: x\nstack\ntrace\n[verify-many] case 1 (7 ms) FAIL: y\ntrailer"
    logs = _case_logs(out)
    assert logs == {"0": "boot\n[verify-many] case 0 (5 ms) OK: x",
                    "1": "stack\ntrace\n[verify-many] case 1 (7 ms) FAIL: y"}


def test_no_cases_and_unknown_jobs_need_no_jvm(tmp_path):
    assert verify_restore_many(VERSION, []) == []
    with pytest.raises(KeyError):
        verify_restore_many(VERSION, [(tmp_path, "incremental", "no-such-job")])


def test_verify_many_source_is_not_part_of_the_fixture_hash():
    from tests.harness.flink import _NOT_GENERATOR
    assert "VerifyMany.java" in _NOT_GENERATOR   # editing it must not regenerate any fixture


@pytest.mark.flink
def test_a_harness_jvm_leaves_nothing_in_the_system_temp_dir(flink_harness, flink_fixture):
    """Flink's MiniCluster unpacks its RPC jar (24 MB) and minicluster_* dirs into java.io.tmpdir and
    never removes them; every harness JVM has a private one, removed when it exits. With /tmp as the
    default a full test run left ~1,000 jars (22 GB) there and ran out of disk."""
    import tempfile

    system_tmp = Path(tempfile.gettempdir())

    def flink_leftovers() -> set[str]:
        return {p.name for p in system_tmp.iterdir() if p.name.startswith(("flink-rpc", "minicluster_"))}

    before = flink_leftovers()
    newest = flink_fixture(VERSION, "incremental").retained_checkpoints("A")[-1]
    assert flink_harness.verify_restore(VERSION, newest).ok
    assert flink_leftovers() - before == set()

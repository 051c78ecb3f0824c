"""The Flink 2.x layout scenarios (`forst`, `changelog`, `rotated_job_id`) are what they claim, read by
Flink's own loader (the oracle), on every harness version that has them; and adding them changed no
other fixture's hash.

The restore proofs of these stores are the GC, DR and compaction tests' (tests/flink2): they restore
every retained checkpoint of every job after acting on a copy.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import tests.harness as harness
from tests.harness import flink as harness_flink
from tests.harness import promises, scenarios, store
from tests.plugins.flink import flink_dedicated_params

FORST = flink_dedicated_params(["forst"])
CHANGELOG = flink_dedicated_params(["changelog"])
ROTATED = flink_dedicated_params(["rotated_job_id"])
ALL = flink_dedicated_params(["forst", "changelog", "rotated_job_id"])


def local(path: str) -> Path:
    return Path(path[len("file:"):] if path.startswith("file:") else path)


@pytest.mark.unit
def test_new_plans_leave_every_other_fixture_hash_alone(tmp_path, monkeypatch):
    """ClusterGenerate/ExtraOptions are in no other plan's hash: changing them changes only the hashes of the
    clustered plans and of the recovering one, which runs them (the cached stores of every other scenario stay
    valid)."""
    before = {(v, s): store.generator_hash(v, s) for v in harness.FLINK_VERSIONS for s in scenarios.scenarios_for(v)}
    copy = tmp_path / "java"
    shutil.copytree(harness_flink.JAVA_SOURCES, copy)
    for name in ("ClusterGenerate.java", "ExtraOptions.java"):
        (source,) = copy.rglob(name)
        source.write_text(source.read_text() + "\n// changed\n")
    monkeypatch.setattr(harness_flink, "JAVA_SOURCES", copy)
    after = {key: store.generator_hash(*key) for key in before}
    changed = {key for key in before if before[key] != after[key]}
    assert changed == {key for key in before if scenarios.PLANS[key[1]].clustered or scenarios.PLANS[key[1]].recovering}
    assert {s for _, s in changed} == {"forst", "changelog"} | ({"recovery_checkpoints"} & {s for _, s in before})


@pytest.mark.flink
@pytest.mark.parametrize("version,scenario", ALL)
def test_store_is_consistent_by_the_oracle(flink_fixture, flink_oracle, version, scenario):
    """Every retained checkpoint loads in Flink and every file it names exists, large enough; the
    manifest's retained checkpoints are exactly the `_metadata` files on disk."""
    fx = flink_fixture(version, scenario)
    oracle = flink_oracle(version, scenario)
    assert sorted(oracle) == [str(p) for p in fx.metadata_files()]
    assert fx.metadata_files() == sorted(p / "_metadata" for p in fx.retained_checkpoints())
    for path, r in oracle.items():
        assert "error" not in r, r
        assert r["metadata_version"] == harness.metadata_version_for(version)
        for ref in r["referenced_files"]:
            assert local(ref["path"]).is_file() and local(ref["path"]).stat().st_size >= ref["size"], ref


@pytest.mark.flink
@pytest.mark.parametrize("version,scenario", FORST)
def test_forst_databases_live_in_checkpoint_storage(flink_fixture, flink_oracle, version, scenario):
    fx = flink_fixture(version, scenario)
    oracle = flink_oracle(version, scenario)
    a, b = fx.job("A"), fx.job("B")
    # The failover: every keyed subtask of A ran as attempt 0 and attempt 1, each with a database of its own.
    attempts: dict[str, set[int]] = {}
    for db in a["forst_databases"]:
        attempts.setdefault(db["operator"], set()).add(db["attempt"])
    assert len(attempts) == a["parallelism"] and all(v == {0, 1} for v in attempts.values()), attempts
    assert {db["attempt"] for db in b["forst_databases"]} == {0}
    # Checkpoints name database files by absolute path (handed over, not copied); B's, after the CLAIM
    # restore, also A's database files (linked into B's database).
    db_refs = {}
    for path, r in oracle.items():
        for h in r["handles"]:
            if h["path"] and "/db/" in h["path"]:
                assert h["role"] == "shared" and h["class"].endswith(".FileStateHandle"), h
                db_refs.setdefault(path, set()).add(local(h["path"]))
    b_refs = set().union(*(refs for p, refs in db_refs.items() if p.startswith(b["job_dir"] + "/")))
    assert any(p.is_relative_to(a["job_dir"]) for p in b_refs)
    assert any(p.is_relative_to(b["job_dir"]) for p in b_refs)
    # A's checkpoints after the failover use files of both attempts (attempt 1 links what it restored).
    a_refs = set().union(*(refs for p, refs in db_refs.items() if p.startswith(a["job_dir"] + "/")))
    assert {p.parent.parent.name.rsplit("_", 1)[1] for p in a_refs} == {"0", "1"}
    # ForSt's probe for incomplete mkdir leaves an empty `_dummy_dir_<uuid>/` in every database on a file
    # system with directories (ForStFileSystemUtils deletes the relative path "_dummy_dir_", not the probe).
    for db in a["forst_databases"] + b["forst_databases"]:
        dummies = list((Path(db["dir"]) / "db").glob("_dummy_dir_*"))
        assert len(dummies) == 1 and dummies[0].is_dir() and not any(dummies[0].iterdir()), db
    # What the GC tests delete: files of A's attempt-0 databases that no job's newest checkpoint uses. It
    # depends on ForSt compacting after the failover; generation retries until the store has it.
    keeps_promise = promises.PROMISES["forst"]
    assert keeps_promise(version, fx.manifest) is None
    assert "no job failed over" in keeps_promise(version, {**fx.manifest, "jobs": [b]})


@pytest.mark.flink
@pytest.mark.parametrize("version,scenario", CHANGELOG)
def test_changelog_checkpoints_reference_dstl_files(flink_fixture, flink_oracle, version, scenario):
    fx = flink_fixture(version, scenario)
    job_dir = Path(fx.job("A")["job_dir"])
    dstl = {p for p in (job_dir / "dstl").iterdir() if p.is_file()}
    assert dstl
    deltas = set()
    for r in flink_oracle(version, scenario).values():
        deltas |= {local(h["path"]) for h in r["handles"] if h["role"] == "delta" and h["path"]}
    # Every DSTL file a checkpoint names is one of the job's `dstl/` files, and every one there is named.
    assert deltas == dstl
    assert any(p.is_file() for p in (job_dir / "taskowned").iterdir())   # materialized RocksDB files


@pytest.mark.flink
@pytest.mark.parametrize("version,scenario", ROTATED)
def test_rotated_job_ids_use_the_old_jobs_files(flink_fixture, flink_oracle, version, scenario):
    fx = flink_fixture(version, scenario)
    a, b, legacy = fx.job("A"), fx.job("B"), fx.job("B_legacy")
    assert (b["claim_mode"], legacy["claim_mode"]) == ("CLAIM", "LEGACY")
    claimed = Path(b["restored_from"])
    assert claimed.name == f"chk-{a['completed_checkpoints'][-1]}" and not claimed.exists()
    assert Path(legacy["restored_from"]) == Path(a["retained_checkpoints"][-1])
    oracle = flink_oracle(version, scenario)
    for job in (b, legacy):
        (chk,) = job["retained_checkpoints"]
        files = {local(f["path"]) for f in oracle[str(Path(chk) / "_metadata")]["referenced_files"]}
        assert any(p.is_relative_to(Path(a["job_dir"]) / "shared") for p in files), job["name"]

"""The real-Flink harness itself: stores, the oracle and the restore verifier are what they claim.

Every other test that trusts a fixture's manifest, the oracle's JSON or the verifier's verdict
relies on the facts checked here. The stores and the oracle's reading of them are checked for every
Flink version and scenario; the verifier's restore proofs run the newest version in `make test` and
every version with `--full-matrix` (tests/README.md, "Flink versions where they matter").
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import tests.harness as harness
from tests.chains.support import relocate_store
from tests.plugins.flink import flink_params, matrix_versions

pytestmark = pytest.mark.flink

HANDLE_KEYS = {"operator_id", "subtask", "slot", "role", "local_name", "class", "path", "relative_path",
               "size", "inline_bytes", "start_pos", "logical_file_id", "managed_dirs"}
TOP_KEYS = {"path", "metadata_version", "checkpoint_id", "properties", "master_states", "operators",
            "handles", "referenced_files", "inline_bytes_total"}
SEGMENT = "org.apache.flink.runtime.state.filemerging.SegmentFileStateHandle"
EMPTY_SEGMENT = "org.apache.flink.runtime.state.filemerging.EmptySegmentFileStateHandle"
BYTE_STREAM = "org.apache.flink.runtime.state.memory.ByteStreamStateHandle"
UIDS = {"sequence-source", "sequence-gate", "keyed-invariant", "tally", "discard"}


def local(path: str) -> Path:
    """Flink's `file:/abs` spelling to a local path."""
    return Path(path[len("file:"):] if path.startswith("file:") else path)


def under(path: str, directory: str | Path) -> bool:
    return local(path).is_relative_to(Path(directory))


def results_of(oracle: dict, directory: str | Path) -> list[dict]:
    return [r for p, r in sorted(oracle.items()) if Path(p).is_relative_to(Path(directory))]


@pytest.fixture(scope="module")
def oracle_of(flink_fixture):
    """(version, scenario) -> {metadata path: Flink's reading}, as the session's `flink_oracle` gives it,
    but every store of a version read in ONE oracle JVM (3 JVM starts instead of 27): the oracle loads
    each file on its own with `Checkpoints.loadCheckpointMetadata`, so batching changes no reading."""
    cache: dict[str, dict[str, dict[str, dict]]] = {}

    def get(version: str, scenario: str) -> dict[str, dict]:
        if version not in cache:
            per_scenario = {s: flink_fixture(version, s).metadata_files() for s in harness.scenarios_for(version)}
            paths = [p for files in per_scenario.values() for p in files]
            by_path = dict(zip(map(str, paths), harness.run_oracle(version, paths), strict=True))
            cache[version] = {s: {str(p): by_path[str(p)] for p in files} for s, files in per_scenario.items()}
        return cache[version][scenario]

    return get


# --- stores and manifests -------------------------------------------------------------------------

@pytest.mark.parametrize("version,scenario", flink_params())
def test_store_layout_matches_manifest(flink_fixture, version, scenario):
    fx = flink_fixture(version, scenario)
    m = fx.manifest
    assert (m["version"], m["scenario"]) == (version, scenario)
    assert Path(m["root"]) == fx.root and len(m["generator_hash"]) == 12
    assert (fx.root / "COMPLETE").is_file()
    expected_metadata = []
    for job in m["jobs"]:
        job_dir = Path(job["job_dir"])
        assert job_dir.parent == fx.root / "checkpoints" and job_dir.name == job["job_id"]
        assert (job_dir / "shared").is_dir() and (job_dir / "taskowned").is_dir()
        completed = job["completed_checkpoints"]
        retained = [Path(d) for d in job["retained_checkpoints"]]
        want = min(job["config"]["retained"], len(completed))
        assert len(completed) >= job["config"]["checkpoints"]
        # Retention keeps the newest checkpoints; older ones were subsumed and deleted by Flink.
        assert [d.name for d in retained] == [f"chk-{i}" for i in completed[-want:]]
        for chk in retained:
            assert chk.parent == job_dir and (chk / "_metadata").is_file()
        for gone in completed[:-want]:
            assert not (job_dir / f"chk-{gone}").exists()
        expected_metadata += [chk / "_metadata" for chk in retained]
        if job["restored_from_job"]:
            parent = fx.job(job["restored_from_job"])
            assert job["restored_from"] == parent["retained_checkpoints"][-1]
            assert job["claim_mode"] in ("CLAIM", "NO_CLAIM", "LEGACY")
        else:
            assert job["restored_from"] is None and job["claim_mode"] is None
    for sp in m["savepoints"]:
        assert Path(sp["dir"]).parent == fx.root / "savepoints"
        expected_metadata.append(Path(sp["dir"]) / "_metadata")
    assert fx.metadata_files() == sorted(expected_metadata)
    if scenario == "failed_and_orphans":
        assert m["failed_checkpoint_dirs"] and m["orphan_files"]
    else:
        assert m["failed_checkpoint_dirs"] == [] and m["orphan_files"] == []


@pytest.mark.parametrize("version,scenario", flink_params())
def test_oracle_loads_every_metadata(flink_harness, oracle_of, flink_fixture, version, scenario):
    fx = flink_fixture(version, scenario)
    oracle = oracle_of(version, scenario)
    assert len(oracle) == len(fx.metadata_files()) > 0
    for path, r in oracle.items():
        assert "error" not in r, r
        assert set(r) == TOP_KEYS
        assert r["metadata_version"] == flink_harness.metadata_version_for(version)
        if Path(path).parent.name.startswith("chk-"):
            assert Path(path).parent.name == f"chk-{r['checkpoint_id']}"
            assert r["properties"]["snapshot_type"] == "checkpoint" and r["properties"]["format"] is None
        # V5+ (Flink 2.x) stores operator names and uids; V4 has neither.
        assert {o["uid"] for o in r["operators"]} == (UIDS if r["metadata_version"] >= 5 else {None})
        for handle in r["handles"]:
            assert set(handle) == HANDLE_KEYS
            if handle["relative_path"] is not None:
                # Relative handles resolve beside their _metadata.
                assert local(handle["path"]) == Path(path).parent / handle["relative_path"]
        # The store is consistent: every file a retained snapshot names exists, big enough.
        for ref in r["referenced_files"]:
            assert local(ref["path"]).is_file(), ref
            assert local(ref["path"]).stat().st_size >= ref["size"], ref
        inline = sum(h["inline_bytes"] or 0 for h in r["handles"])
        assert r["inline_bytes_total"] == inline
        coordinators = [o for o in r["operators"] if o["coordinator_inline_bytes"] is not None]
        assert [o["uid"] for o in coordinators] in (["sequence-source"], [None])


# --- scenario facts ------------------------------------------------------------------------------

@pytest.mark.parametrize("version", harness.FLINK_VERSIONS)
def test_incremental_checkpoints_share_files(flink_fixture, oracle_of, version):
    oracle = oracle_of(version, "incremental")
    fx = flink_fixture(version, "incremental")
    ref_sets = [{f["path"] for f in r["referenced_files"]} for r in oracle.values()]
    assert len(ref_sets) == 3
    # Consecutive checkpoints reuse SSTs, unless a RocksDB compaction replaced all of them.
    assert any(a & b for a, b in zip(ref_sets, ref_sets[1:])), "no SST reused across checkpoints"
    # Flink deleted what subsumed checkpoints alone used: shared/ holds exactly the live files.
    shared = {str(p) for p in (Path(fx.job("A")["job_dir"]) / "shared").iterdir()}
    assert shared == {str(local(p)) for refs in ref_sets for p in refs if "/shared/" in p}
    for r in oracle.values():
        roles = {h["role"] for h in r["handles"] if h["slot"] == "managed_keyed"}
        assert roles == {"meta", "shared", "private"}
        shared = [h for h in r["handles"] if h["role"] == "shared"]
        assert all(h["local_name"].endswith(".sst") for h in shared)
        assert any(h["path"] and "/shared/" in h["path"] for h in shared)


@pytest.mark.parametrize("version", harness.FLINK_VERSIONS)
def test_chain_claim_references_parent_jobs(flink_fixture, oracle_of, version):
    fx = flink_fixture(version, "chain_claim")
    oracle = oracle_of(version, "chain_claim")
    a_shared = Path(fx.job("A")["job_dir"]) / "shared"
    b_shared = Path(fx.job("B")["job_dir"]) / "shared"
    assert {fx.job(n)["claim_mode"] for n in ("B", "C")} == {"CLAIM"}
    assert fx.job("B_legacy")["claim_mode"] == "LEGACY"
    for name in ("B", "B_legacy", "C"):
        results = results_of(oracle, fx.job(name)["job_dir"])
        assert len(results) == 2
        for r in results:
            assert any(under(f["path"], a_shared) for f in r["referenced_files"]), (name, r["path"])
    for r in results_of(oracle, fx.job("C")["job_dir"]):
        assert any(under(f["path"], b_shared) for f in r["referenced_files"])


@pytest.mark.parametrize("version", harness.FLINK_VERSIONS)
def test_chain_noclaim_has_no_foreign_references(flink_fixture, oracle_of, version):
    fx = flink_fixture(version, "chain_noclaim")
    oracle = oracle_of(version, "chain_noclaim")
    for name in ("B", "C"):
        job = fx.job(name)
        assert job["claim_mode"] == "NO_CLAIM"
        results = results_of(oracle, job["job_dir"])
        assert len(results) == 2
        for r in results:
            assert r["referenced_files"], r["path"]
            foreign = [f["path"] for f in r["referenced_files"] if not under(f["path"], job["job_dir"])]
            assert foreign == [], (name, r["path"])


@pytest.mark.parametrize("version", harness.FLINK_VERSIONS)
def test_inline_heavy_thresholds(flink_fixture, oracle_of, version):
    fx = flink_fixture(version, "inline_heavy")
    oracle = oracle_of(version, "inline_heavy")
    big = results_of(oracle, fx.job("A")["job_dir"])
    zero = results_of(oracle, fx.job("B")["job_dir"])
    assert len(big) == len(zero) == 3
    for r in big:
        # 1 MiB threshold at parallelism 16: all state (SSTs too) is inside _metadata.
        assert r["referenced_files"] == []
        assert r["inline_bytes_total"] > 300_000
        assert {o["parallelism"] for o in r["operators"] if o["uid"] in ("keyed-invariant", None)} >= {16}
    for r in zero:
        coordinator = sum(o["coordinator_inline_bytes"] or 0 for o in r["operators"])
        # Threshold 0: only coordinator state (always inline) stays in _metadata.
        assert r["inline_bytes_total"] == coordinator
        assert [h for h in r["handles"] if h["inline_bytes"] is not None and h["slot"] != "coordinator"] == []
        assert len(r["referenced_files"]) > 50


@pytest.mark.parametrize("version", harness.FLINK_VERSIONS)
def test_hashmap_full_checkpoints_are_exclusive(flink_fixture, oracle_of, version):
    fx = flink_fixture(version, "hashmap_full")
    oracle = oracle_of(version, "hashmap_full")
    for r in oracle.values():
        keyed = [h for h in r["handles"] if h["slot"] == "managed_keyed"]
        assert keyed and {h["role"] for h in keyed} == {"delegate"}
        for f in r["referenced_files"]:
            assert local(f["path"]).parent == Path(r["path"]).parent, "full checkpoint names a file outside chk-N"
    assert not any((Path(fx.job("A")["job_dir"]) / "shared").iterdir())


@pytest.mark.parametrize("version", harness.FLINK_VERSIONS)
def test_savepoints_are_self_contained_with_format(flink_fixture, oracle_of, version):
    fx = flink_fixture(version, "savepoints")
    oracle = oracle_of(version, "savepoints")
    formats = {sp["format"]: Path(sp["dir"]) for sp in fx.manifest["savepoints"]}
    assert set(formats) == {"CANONICAL", "NATIVE"}
    for fmt, directory in formats.items():
        [r] = results_of(oracle, directory)
        assert r["properties"] == {"snapshot_type": "savepoint", "format": fmt, "sharing": "NO_SHARING"}
        assert r["referenced_files"]
        assert all(local(f["path"]).parent == directory for f in r["referenced_files"])
        roles = {h["role"] for h in r["handles"] if h["slot"] == "managed_keyed"}
        assert roles == ({"delegate"} if fmt == "CANONICAL" else {"meta", "shared", "private"})


@pytest.mark.parametrize("version", harness.FLINK_VERSIONS)
def test_unaligned_checkpoints_hold_channel_state(oracle_of, version):
    oracle = oracle_of(version, "unaligned")
    for slot in ("input_channel", "output_channel"):
        handles = [h for r in oracle.values() for h in r["handles"] if h["slot"] == slot]
        assert handles, f"no {slot} state in any unaligned checkpoint"
        assert all(h["size"] > 0 and h["role"] == "delegate" for h in handles)


@pytest.mark.parametrize("version", [v for v in harness.FLINK_VERSIONS
                                     if "file_merging" in harness.scenarios_for(v)])
def test_file_merging_uses_segments_and_managed_dirs(flink_fixture, oracle_of, version):
    fx = flink_fixture(version, "file_merging")
    job_dir = Path(fx.job("A")["job_dir"])
    oracle = oracle_of(version, "file_merging")
    for r in oracle.values():
        segments = [h for h in r["handles"] if h["class"] == SEGMENT]
        assert segments and all(h["logical_file_id"] and h["start_pos"] is not None for h in segments)
        assert any(h["class"] == EMPTY_SEGMENT and h["path"] is None for h in r["handles"])
        dirs = {tuple(h["managed_dirs"]) for h in r["handles"] if h["managed_dirs"]}
        assert dirs
        for task_owned, shared in dirs:
            assert under(task_owned, job_dir / "taskowned") and under(shared, job_dir / "shared")
            assert local(task_owned).is_dir() and local(shared).is_dir()
        # Merged state lives in the managed directories: chk-N holds only _metadata.
        assert [p.name for p in Path(r["path"]).parent.iterdir()] == ["_metadata"]
        assert all(h["inline_bytes"] is None for h in r["handles"] if h["slot"] != "coordinator")


@pytest.mark.parametrize("version", harness.FLINK_VERSIONS)
def test_failed_checkpoint_and_orphans(flink_fixture, oracle_of, version):
    fx = flink_fixture(version, "failed_and_orphans")
    oracle = oracle_of(version, "failed_and_orphans")
    job = fx.job("A")
    [planted] = fx.manifest["planted_failed_checkpoints"]
    assert fx.manifest["failed_checkpoint_dirs"] == [planted["dir"]]
    failed = Path(planted["dir"])
    assert failed.parent == Path(job["job_dir"]) and not (failed / "_metadata").exists()
    assert failed.name == f"chk-{max(job['completed_checkpoints']) + 1}"
    assert sorted(str(p) for p in failed.iterdir()) == planted["files"]
    referenced = {str(local(f["path"])) for r in oracle.values() for f in r["referenced_files"]}
    assert len(fx.manifest["orphan_files"]) == 3
    unreferenced = {str(p) for p in (Path(job["job_dir"]) / "shared").iterdir()} - referenced
    assert unreferenced == set(fx.manifest["orphan_files"])
    for orphan in fx.manifest["orphan_files"]:
        assert Path(orphan).is_file() and Path(orphan).parent == Path(job["job_dir"]) / "shared"
        assert orphan not in referenced
    assert not referenced & set(planted["files"])


# --- restore verifier ----------------------------------------------------------------------------

def _tree(root: Path) -> dict:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


# One restore per kind of snapshot. A plain incremental checkpoint is restored (from a copy, with
# the originals present) in test_verifier_detects_relocation_breakage; chain_noclaim's C is an
# incremental checkpoint over its own files only.
VERIFY_CASES = [
    ("chain_claim", "C", "checkpoint"),
    ("inline_heavy", "A", "checkpoint"),
    ("hashmap_full", "A", "checkpoint"),
    ("unaligned", "A", "checkpoint"),
    ("file_merging", "A", "checkpoint"),
    ("savepoints", "A", "CANONICAL"),
    ("savepoints", "A", "NATIVE"),
]


@pytest.fixture(scope="module")
def intact_verdicts(flink_harness, flink_fixture):
    """Callable version -> {(scenario, job, kind): (verdict, trees before, trees after)}: every intact case
    of one version restored in ONE JVM (`verify_restore_many`, which tests/harness_checks/test_verify_many.py
    holds to the same verdicts as `verify_restore`), once per version per session."""
    done: dict[str, dict] = {}

    def get(version: str) -> dict:
        if version not in done:
            keys = [(s, j, k) for s, j, k in VERIFY_CASES if s in harness.scenarios_for(version)]
            fixtures = {s: flink_fixture(version, s) for s, _, _ in keys}
            snapshots = [fixtures[s].retained_checkpoints(j)[-1] if k == "checkpoint"
                         else fixtures[s].savepoint_dirs(k)[0] for s, j, k in keys]
            before = {s: _tree(fx.root) for s, fx in fixtures.items()}
            verdicts = flink_harness.verify_restore_many(version, [(snap, s, j) for snap, (s, j, _) in
                                                                   zip(snapshots, keys, strict=True)])
            after = {s: _tree(fx.root) for s, fx in fixtures.items()}
            done[version] = {key: (v, before[key[0]], after[key[0]]) for key, v in zip(keys, verdicts, strict=True)}
        return done[version]

    return get


# The verifier's restore proofs run the newest Flink in `make test` (older ones `full_matrix`): what
# they prove of the verifier is the same on every version, and the verifier's verdicts on the older
# versions still back every-version restores elsewhere (tests/format/test_format_relocation.py).
@pytest.mark.parametrize("version,scenario,job,kind", [
    pytest.param(v.values[0], s, j, k, id=f"{v.values[0]}-{s}-{k}", marks=v.marks)
    for v in matrix_versions()
    for s, j, k in VERIFY_CASES if s in harness.scenarios_for(v.values[0])])
def test_verifier_restores_intact_snapshots(intact_verdicts, version, scenario, job, kind):
    verdict, before, after = intact_verdicts(version)[(scenario, job, kind)]
    assert verdict.ok and verdict.returncode == 0, verdict.output[-3000:]
    assert "[verify] OK" in verdict.output
    assert after == before, "verifying a snapshot modified the cached store"


@pytest.mark.parametrize("version", matrix_versions())   # Flink's behaviour, not ours: older ones nightly
def test_verifier_detects_relocation_breakage(flink_harness, flink_fixture, tmp_path, version):
    """A copied incremental checkpoint needs its originals; a copied canonical savepoint does not."""
    fx = flink_fixture(version, "savepoints")
    chk = fx.retained_checkpoints("A")[-1]
    [canonical] = fx.savepoint_dirs("CANONICAL")
    # Originals present: a copy of the cached checkpoint names the cache's shared/ files, which stay.
    present = tmp_path / "present" / chk.name
    shutil.copytree(chk, present)
    # Originals gone: the originals are a relocated copy of the cached store (every absolute path
    # rewritten into it), so they can be moved away without touching the read-only cache.
    store = tmp_path / "store"
    relocate_store(fx.root, str(store))
    job_dir = store / Path(fx.job("A")["job_dir"]).relative_to(fx.root)
    relocated_canonical = store / canonical.relative_to(fx.root)
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(store / chk.relative_to(fx.root), elsewhere / chk.name)
    shutil.copytree(relocated_canonical, elsewhere / canonical.name)
    # A path the relocation missed would still name the cache, which stays: the copied checkpoint would
    # then restore and the moved savepoint could pass by reading the cache. Flink's own reading of the
    # copies must name no file there (not a byte search: inline handles keep their would-be file name
    # as a label that Flink never opens).
    for r in harness.run_oracle(version, sorted(elsewhere.rglob("_metadata"))):
        assert "error" not in r, r
        named = harness.named_paths(r)
        assert named and not [p for p in named if under(p, fx.root)], r["path"]
    os.rename(job_dir / "shared", tmp_path / "shared-moved-away")
    os.rename(relocated_canonical, tmp_path / "canonical-moved-away")

    # All three restores in one JVM: each case restores on its own (test_verify_many.py).
    silent, broken, moved = flink_harness.verify_restore_many(version, [
        (present, "savepoints", None), (elsewhere / chk.name, "savepoints", None),
        (elsewhere / canonical.name, "savepoints", None)])
    # The copy "restores" silently from the original absolute paths.
    assert silent.ok, silent.output[-3000:]
    assert not broken.ok and broken.returncode != 0
    assert "[verify] FAIL" in broken.output and "FileNotFoundException" in broken.output, broken.output[-3000:]
    assert moved.ok, moved.output[-3000:]

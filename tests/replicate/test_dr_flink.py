"""DR copies of real Flink snapshots restore in real Flink with the source roots renamed away.

Per Flink version, relocated copies of the chain (CLAIM with a LEGACY branch; NO_CLAIM), file
merging, unaligned, savepoint (canonical and native) and hashmap stores share one source warehouse:
one index, chains and validation run, one DR copy run (`--savepoints all`) to a second local root.
Then the source directory is renamed away and the restore verifier restores, in one JVM per
version, every job's copied latest restorable checkpoint (chain members C and B_legacy reference
A's and B's `shared/`) and every copied savepoint, from the target only.
"""
from __future__ import annotations

import pytest

import tests.harness as harness
from statekeeper.uri import normalize_uri
from tests.plugins.flink import matrix_versions
from tests.replicate.support import copies, dr_pipeline, listing, local, relocated, uri

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]

SCENARIOS = ("chain_claim", "chain_noclaim", "file_merging", "unaligned", "savepoints", "hashmap_full")


@pytest.fixture(scope="module", params=matrix_versions())
def copied(request, spark, flink_fixture, tmp_path_factory):
    version = request.param
    base = tmp_path_factory.mktemp(f"dr-{version}")
    scenarios = [s for s in SCENARIOS if s in harness.scenarios_for(version)]
    fixtures = {s: flink_fixture(version, s) for s in scenarios}
    sources = {s: relocated(fx, base / "src" / s) for s, fx in fixtures.items()}
    roots = [r for s in scenarios for r in (f"{sources[s]}/checkpoints", f"{sources[s]}/savepoints")]
    p = dr_pipeline(spark, base, roots)
    p.prepare()
    target = uri(base / "dr")
    pairs = [f"--target={r}={target}/{r[len(uri(base / 'src')) + 1:]}" for r in roots]
    code, result = p.dr(*pairs, "--allowed-targets", target, "--savepoints", "all")
    return {"version": version, "base": base, "fixtures": fixtures, "sources": sources, "target": target,
            "pipeline": p, "code": code, "result": result}


def _moved(copy_root: str, fixture_root, path: str, target: str, base) -> str:
    """Where `path` (a directory of the cached fixture) is in the DR target."""
    in_source = copy_root + uri(path)[len(uri(fixture_root)):]
    return target + in_source[len(uri(base / "src")):]


def test_every_selected_snapshot_is_verified_at_the_target(copied):
    c = copied
    assert c["code"] == 0, c["result"]
    r = c["result"]
    assert r["status"] == "succeeded" and r["failed"] == 0 and r["verified"] == r["snapshots"] > 0
    rows = copies(c["pipeline"].warehouse, r["run_id"])
    assert rows and all(row["status"] == "verified" for row in rows)
    for row in rows:
        assert row["target_metadata_uri"].startswith(c["target"] + "/")
        assert local(row["target_metadata_uri"]).is_file()
    # the source is never modified: nothing written below it
    source_files = listing([uri(c["base"] / "src")])
    assert not any(u.startswith(c["target"]) for u in source_files)


def test_copies_restore_with_the_originals_moved_away(copied):
    c = copied
    cases = []
    for s, fx in c["fixtures"].items():
        for job in fx.manifest["jobs"]:
            retained = job["retained_checkpoints"]
            if retained:
                cases.append((local(_moved(c["sources"][s], fx.root, max(retained, key=lambda d: int(d.rsplit("-", 1)[1])),
                                           c["target"], c["base"])), s, job["name"]))
        for sp in fx.manifest.get("savepoints", []):
            cases.append((local(_moved(c["sources"][s], fx.root, sp["dir"], c["target"], c["base"])), s, sp["job"]))
    assert {s for _, s, _ in cases} == set(c["fixtures"])
    for path, _, _ in cases:
        assert (path / "_metadata").is_file(), f"no DR copy of {path}"
    # every absolute path in a copied _metadata points into the target
    truth = harness.run_oracle(c["version"], [p / "_metadata" for p, _, _ in cases])
    for (path, _, _), reading in zip(cases, truth, strict=True):
        assert "error" not in reading, reading
        for f in reading["referenced_files"]:
            assert normalize_uri(f["path"]).startswith(c["target"] + "/"), (path, f["path"])
    moved_away = c["base"] / "src-moved-away"
    (c["base"] / "src").rename(moved_away)
    try:
        results = harness.verify_restore_many(c["version"], cases)
    finally:
        moved_away.rename(c["base"] / "src")
    failed = [(str(case[0]), r.output[-2000:]) for case, r in zip(cases, results, strict=True) if not r.ok]
    assert not failed, failed

"""DR copy and compaction of the Flink 2.x layouts (ForSt database in checkpoint storage, changelog), proven
by restore in real Flink with the settings each job ran with.

Per harness version (the newest by default, the others behind `full_matrix`), relocated copies of the
`forst` (2.0+) and `changelog` stores share one warehouse: one index, chains and validation, one compaction
run (`--snapshot` each job's newest retained checkpoint, into new `compacted/chk-N/` directories) and one DR
copy run to a second root. ForSt's B was restored from A by CLAIM, so B's checkpoints use files of A's
databases (A's failed-over `attempt_1`): the DR closure must carry them. The changelog job's checkpoints
use DSTL files under `<job>/dstl/`.

Two restore batches, one JVM each: the compacted snapshots (they still use the source's files), then the
DR copies with the source directory renamed away (so a restore that reads one source file fails).
"""
from __future__ import annotations

import pytest

import tests.harness as harness
from statekeeper.uri import normalize_uri
from tests.compact.support import compact_pipeline, compactions, local, relocated, sha256, uri
from tests.plugins.flink import matrix_versions
from tests.replicate.support import copies, listing

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]

SCENARIOS = ("forst", "changelog")


def _newest(job: dict) -> str:
    return max(job["retained_checkpoints"], key=lambda d: int(d.rsplit("-", 1)[1]))


@pytest.fixture(scope="module", params=matrix_versions())
def run(request, spark, flink_fixture, tmp_path_factory):
    version = request.param
    base = tmp_path_factory.mktemp(f"flink2-dr-compact-{version}")
    fixtures = {s: flink_fixture(version, s) for s in SCENARIOS if harness.supports(version, s)}
    sources = {s: relocated(fx, base / "src" / s) for s, fx in fixtures.items()}
    roots = [r for s in fixtures for r in (f"{sources[s]}/checkpoints", f"{sources[s]}/savepoints")]
    p = compact_pipeline(spark, base, roots)
    p.prepare()

    def moved(s: str, path: str) -> str:
        return sources[s] + uri(path)[len(uri(fixtures[s].root)):]

    newest = {(s, job["name"]): moved(s, _newest(job)) for s, fx in fixtures.items() for job in fx.manifest["jobs"]}
    before = listing(roots)
    metadata = {u: sha256(local(u)) for u in before if u.endswith("/_metadata")}
    compact = p.compact(*(a for d in newest.values() for a in ("--snapshot", d)))
    after_compact = listing(roots)
    target = uri(base / "dr")
    pairs = [f"--target={r}={target}/{r[len(uri(base / 'src')) + 1:]}" for r in roots]
    dr = p.dr(*pairs, "--allowed-targets", target)
    return {"version": version, "base": base, "fixtures": fixtures, "sources": sources, "roots": roots, "p": p,
            "newest": newest, "metadata": metadata, "compact": compact,
            "written": set(after_compact) - set(before), "dr": dr, "target": target}


def test_compaction_moves_the_inline_state_out_and_leaves_the_source_alone(run):
    code, result = run["compact"]
    assert code == 0, result
    rows = {r["source_metadata_uri"]: r for r in compactions(run["p"].warehouse, result["run_id"])}
    assert set(rows) == {d + "/_metadata" for d in run["newest"].values()}
    for src, row in rows.items():
        # ForSt and changelog checkpoints inline their small database files and metadata handles
        assert row["status"] == "compacted", row
        out = local(row["result_metadata_uri"])
        assert out.parent.parent.name == "compacted" and row["files_written"] > 0
        assert row["metadata_bytes_after"] < row["metadata_bytes_before"]
        assert sha256(local(src)) == run["metadata"][src]
    # compaction writes beside the snapshots, never into a ForSt database or a DSTL directory
    written = run["written"]
    assert written and all("/compacted/" in u for u in written), sorted(written)[:5]
    assert len(written) == sum(r["files_written"] + 1 for r in rows.values())


def test_dr_copy_carries_every_database_and_changelog_file_the_snapshots_use(run):
    code, result = run["dr"]
    assert code == 0, result
    assert result["status"] == "succeeded" and result["failed"] == 0 and result["verified"] == result["snapshots"]
    rows = copies(run["p"].warehouse, result["run_id"])
    # each job's latest restorable checkpoint: here its newest retained one
    assert {r["source_metadata_uri"] for r in rows} == {d + "/_metadata" for d in run["newest"].values()}
    at_target = _target_cases(run)
    truth = harness.run_oracle(run["version"], [path / "_metadata" for path, _, _ in at_target])
    kinds = set()
    used = {}
    for (path, s, job), reading in zip(at_target, truth, strict=True):
        assert "error" not in reading, reading
        used[(s, job)] = {normalize_uri(f["path"]) for f in reading["referenced_files"]}
        for name in used[(s, job)]:
            assert name.startswith(run["target"] + "/"), (path, name)
            assert local(name).is_file(), name
            kinds.add((s, "db" if "/db/" in name else "dstl" if "/dstl/" in name else "other"))
    # the copies hold what the layouts are about (files read from Flink's reading, not ours)
    assert ("changelog", "dstl") in kinds
    if "forst" in run["fixtures"]:
        assert ("forst", "db") in kinds
        # B, restored from A by CLAIM, uses A's database files: their copies, at the target
        src = uri(run["base"] / "src")
        a_dir = run["target"] + (run["sources"]["forst"] + uri(run["fixtures"]["forst"].job("A")["job_dir"])
                                 [len(uri(run["fixtures"]["forst"].root)):])[len(src):]
        assert any(n.startswith(a_dir + "/shared/") and "/db/" in n for n in used[("forst", "B")])


def _target_cases(run) -> list[tuple]:
    src = uri(run["base"] / "src")
    return [(local(run["target"] + d[len(src):]), s, job) for (s, job), d in sorted(run["newest"].items())]


def test_compacted_snapshots_restore(run):
    code, result = run["compact"]
    assert code == 0, result
    rows = compactions(run["p"].warehouse, result["run_id"])
    by_source = {r["source_metadata_uri"]: r for r in rows}
    cases = [harness.VerifyCase(local(by_source[d + "/_metadata"]["result_metadata_uri"]).parent, s, job)
             for (s, job), d in sorted(run["newest"].items())]
    results = harness.verify_restore_many(run["version"], cases)
    failed = [(str(c.snapshot_dir), r.output[-2000:]) for c, r in zip(cases, results, strict=True) if not r.ok]
    assert not failed, failed


def test_dr_copies_restore_with_the_originals_moved_away(run):
    code, result = run["dr"]
    assert code == 0, result
    cases = [harness.VerifyCase(path, s, job) for path, s, job in _target_cases(run)]
    moved_away = run["base"] / "src-moved-away"
    (run["base"] / "src").rename(moved_away)
    try:
        results = harness.verify_restore_many(run["version"], cases)
    finally:
        moved_away.rename(run["base"] / "src")
    failed = [(str(c.snapshot_dir), r.output[-2000:]) for c, r in zip(cases, results, strict=True) if not r.ok]
    assert not failed, failed

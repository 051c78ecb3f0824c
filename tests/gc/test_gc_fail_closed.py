"""GC fails closed, and expiry keeps what other jobs use: real Flink stores, real Spark, real Delta.

Each case is a relocated copy of a cached 2.3.0 store (the newest configured version) with its own
warehouse, damaged or extended in one way, then indexed, chained and garbage-collected with
`--mode delete` and a 1 s grace period through the entry point:

* a corrupt `_metadata` under a root: blocked (exit 1), the message names the object, nothing deleted; run as
  its own process (`python spark_jobs/collect_garbage.py`), whose log ends with the summary: no Spark job of the
  run still running fails on a frame the run released;
* a `_metadata` written after the index that references a planned orphan: that file survives
  (`changed_skipped`), the other garbage goes; the same for every placement the layout classifier
  calls a snapshot (`compacted/<dir>/`, savepoint directories, nested self-contained snapshots);
* a stored path with `..` segments that resolves inside the root, and one outside every root: the
  files it names stay, nothing outside the roots is touched;
* a relative stored path naming no knowable object (`file:../../etc/passwd`): a parse error, blocked;
* expiry on the chain store (keep the newest checkpoint of each job): A's old checkpoints go, A's
  `shared/` files that B or C use stay, and `statekeeper explain` says why; B and C restore.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.format import read_metadata, rewrite_prefixes, to_bytes
from tests.chains.support import oracle_references
from tests.gc.support import SHORT, actions, listing, local, pipeline, relocated, uri
from tests.plugins.spark import job_process_env

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]

VERSION = harness.FLINK_VERSIONS[-1]


def craft(source: Path, target: Path, mapping: dict[str, str]) -> None:
    """Write `source`'s `_metadata`, every absolute path re-prefixed by `mapping`, to `target`."""
    model = read_metadata(source, uri(source))
    result = rewrite_prefixes(model, mapping)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(to_bytes(result.model, inline_source=source))


@pytest.fixture()
def store(spark, flink_fixture, tmp_path):
    fx = flink_fixture(VERSION, "failed_and_orphans")
    copy = relocated(fx, tmp_path / "store")
    p = pipeline(spark, tmp_path, [copy])
    moved = lambda q: local(copy + uri(q)[len(uri(fx.root)):])   # noqa: E731
    job = fx.job("A")
    return {"fx": fx, "copy": copy, "p": p, "moved": moved,
            "retained": [moved(d) for d in job["retained_checkpoints"]],
            "orphans": sorted(moved(o) for o in fx.manifest["orphan_files"]),
            "job_dir": moved(job["job_dir"])}


REPO = Path(__file__).resolve().parents[2]


def gc_process(p, *args: str) -> tuple[int, dict, list[str]]:
    """GC as a user starts it by hand, in a process of its own: exit code, --result-json, its whole log (stdout,
    stderr and its JVM's, in the order written)."""
    out, log = p.base / "gc-process.json", p.base / "gc-process.log"
    with log.open("wb") as f:
        code = subprocess.run([sys.executable, str(REPO / "spark_jobs" / "collect_garbage.py"), "--warehouse",
                               p.warehouse.uri, "--master", "local[2]", "--progress-interval", "0", "--result-json",
                               str(out), *args], env=job_process_env(), cwd=p.base, stdout=f,
                              stderr=subprocess.STDOUT, timeout=600).returncode
    return code, (json.loads(out.read_text()) if out.exists() else {}), log.read_text(errors="replace").splitlines()


def test_corrupt_metadata_blocks_every_deletion(store):
    p, victim = store["p"], store["retained"][0] / "_metadata"
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])
    p.refresh()
    before = listing(p.roots)
    code, result, log = gc_process(p, "--mode", "delete", *SHORT)
    assert code == 1, "\n".join(log[-50:])
    assert result["status"] == "blocked" and result["deleted"] == 0
    text = " ".join(result["blocked"])
    assert "snapshot_not_ok" in text and uri(victim) in text
    assert listing(p.roots) == before
    # Nothing of the run fails after its summary: a query that returned while a broadcast job it started still ran
    # left that job reading the run's kept frames after they were released (a task error, logged after it).
    summary = next(i for i, line in enumerate(log) if f"gc run {result['run_id']} (delete) blocked" in line)
    after = [line for line in log[summary:] if "ERROR" in line or "Exception" in line]
    assert after == [], "\n".join(log[summary:])


def test_metadata_written_after_the_index_keeps_its_files(store):
    p, orphans = store["p"], store["orphans"]
    p.refresh()
    # A checkpoint completes after the index: it references one of the files the plan calls orphans
    # (as an incremental checkpoint reuses an older SST). Crafted from the newest real `_metadata`,
    # with one of its shared files swapped for the orphan.
    newest = store["retained"][-1] / "_metadata"
    shared = sorted(f for f in oracle_references(VERSION, [newest])[uri(newest)] if "/shared/" in f)
    victim = orphans[0]
    chk = store["job_dir"] / "chk-999"
    craft(newest, chk / "_metadata", {shared[0]: uri(victim)})
    code, result = p.gc("--mode", "delete", *SHORT)
    assert code == 0, result
    assert result["new_snapshots"] == 1
    assert victim.exists(), "a file referenced by a _metadata written after the index was deleted"
    assert not any(o.exists() for o in orphans[1:])
    rows = {r["uri"]: r for r in actions(p.warehouse, result["run_id"])}
    assert rows[uri(victim)]["outcome"] == "changed_skipped"
    assert "written after the index" in rows[uri(victim)]["message"]


def test_metadata_in_every_placement_after_the_index_keeps_its_files(store):
    """Issue 28: the re-list looked only at `<dir>/` and `<dir>/chk-N/`, so a `compacted/chk-N/_metadata`
    written after the index (compaction's own placement) lost its files. Every placement the classifier
    calls a snapshot is written here after the index, each referencing another planned orphan."""
    p, job_dir = store["p"], store["job_dir"]
    newest = store["retained"][-1] / "_metadata"
    shared = sorted(f for f in oracle_references(VERSION, [newest])[uri(newest)] if "/shared/" in f)
    # More orphans than the scenario leaves: copies of a real shared file under names nothing references.
    planted = []
    for i in range(6):
        twin = job_dir / "shared" / f"planted-orphan-{i}"
        shutil.copyfile(local(shared[0]), twin)
        planted.append(twin)
    orphans = sorted(store["orphans"] + planted)
    p.refresh()
    checkpoints = job_dir.parent
    placements = [
        job_dir / "compacted" / "chk-998",                        # compaction beside a checkpoint
        checkpoints / "compacted" / "savepoint-abcdef-0123456789ab",   # compaction beside a savepoint
        checkpoints / f"savepoint-{job_dir.name[:6]}-0123456789ab",    # a savepoint under the checkpoint root
        job_dir / "state-processor" / "out" / "v1",               # a self-contained snapshot, nested
        checkpoints / "exports" / "nightly",                      # a directory of no Flink layout
    ]
    assert len(orphans) > len(placements)
    victims = orphans[:len(placements)]
    for where, victim in zip(placements, victims, strict=True):
        craft(newest, where / "_metadata", {shared[0]: uri(victim)})
    code, result = p.gc("--mode", "delete", *SHORT)
    assert code == 0, result
    assert result["new_snapshots"] == len(placements)
    lost = [str(v) for v in victims if not v.exists()]
    assert not lost, f"files referenced by a _metadata written after the index were deleted: {lost}"
    assert not any(o.exists() for o in orphans[len(placements):])
    rows = {r["uri"]: r for r in actions(p.warehouse, result["run_id"])}
    assert {rows[uri(v)]["outcome"] for v in victims} == {"changed_skipped"}


def test_dot_dot_and_outside_paths_delete_nothing_live(store, tmp_path):
    p = store["p"]
    newest = store["retained"][-1] / "_metadata"
    refs = oracle_references(VERSION, [newest])[uri(newest)]
    # 1. the same files spelled through `x/..`: Flink resolves the dots, so do we; they stay live.
    checkpoints = uri(store["job_dir"].parent)
    dotted = store["job_dir"] / "chk-900" / "_metadata"
    craft(newest, dotted, {checkpoints: checkpoints + "/x/.."})
    # 2. a copy of the files outside every root, referenced from inside one.
    outside = tmp_path / "outside"
    shutil.copytree(store["job_dir"], outside / store["job_dir"].name,
                    ignore=shutil.ignore_patterns("chk-*", "taskowned"))
    far = store["job_dir"] / "chk-901" / "_metadata"
    craft(newest, far, {checkpoints: uri(outside)})
    outside_before = listing([uri(outside)])
    p.refresh()
    code, result = p.gc("--mode", "delete", *SHORT)
    assert code == 0, result
    after = listing(p.roots)
    assert all(f in after for f in refs), "a file referenced through x/.. was deleted"
    assert uri(dotted) in after and uri(far) in after
    assert listing([uri(outside)]) == outside_before
    assert not any(o.exists() for o in store["orphans"])


def test_unresolvable_relative_path_blocks(store):
    p = store["p"]
    newest = store["retained"][-1] / "_metadata"
    checkpoints = uri(store["job_dir"].parent)
    # The codec only writes absolute paths: write a marker prefix, then swap it for a relative path
    # of the same length (Java's modified UTF-8 strings carry their length).
    target = store["job_dir"] / "chk-902" / "_metadata"
    craft(newest, target, {checkpoints: "file:///RELATIVEMARK"})
    data = target.read_bytes()
    assert b"file:///RELATIVEMARK" in data
    target.write_bytes(data.replace(b"file:///RELATIVEMARK", b"file:../../etc/aaaaa"))
    p.refresh()
    before = listing(p.roots)
    code, result = p.gc("--mode", "delete", *SHORT)
    assert code == 1 and result["status"] == "blocked"
    assert "chk-902/_metadata" in " ".join(result["blocked"])
    assert listing(p.roots) == before
    # The run returned after every Spark job it started had ended (none reads a frame it released any more).
    assert p.spark.sparkContext.statusTracker().getActiveJobsIds() == []


def test_expire_keeps_what_other_jobs_use(spark, flink_fixture, tmp_path):
    fx = flink_fixture(VERSION, "chain_claim")
    copy = relocated(fx, tmp_path / "store")
    moved = lambda q: local(copy + uri(q)[len(uri(fx.root)):])   # noqa: E731
    p = pipeline(spark, tmp_path, [copy])
    before = listing(p.roots)
    metadata = sorted(local(u) for u in before if u.endswith("/_metadata"))
    truth = oracle_references(VERSION, metadata)
    a = fx.job("A")
    jobs = {j["name"]: [moved(d) for d in j["retained_checkpoints"]] for j in fx.manifest["jobs"]}
    expired = {uri(d / "_metadata") for dirs in jobs.values() for d in dirs[:-1]}
    assert len(jobs["A"]) > 1, "job A should retain several checkpoints"
    p.refresh()
    code, result = p.gc("--mode", "delete", "--retain-last", "1", *SHORT)
    assert code == 0, result
    assert result["expired_snapshots"] == len(expired)
    after = listing(p.roots)
    kept_meta = {u for u in before if u.endswith("/_metadata")} - expired
    assert kept_meta <= set(after) and not expired & set(after)
    # every older A checkpoint's directory is gone (its _metadata first, then its exclusive files)
    for d in jobs["A"][:-1]:
        assert not any(u.startswith(uri(d) + "/") for u in after), d
    # whatever a remaining _metadata references is still there; what went, nothing remaining references
    needed = {f for m, files in truth.items() if m in kept_meta for f in files}
    assert needed <= set(after)
    a_shared = uri(moved(a["job_dir"])) + "/shared/"
    a_name = Path(a["job_dir"]).name
    used_by_others = {f for m, files in truth.items() if m in kept_meta and f"/{a_name}/" not in m
                      for f in files if f.startswith(a_shared)}
    assert used_by_others, "the chain store should have B/C referencing A's shared files"
    rows = {r["uri"]: r for r in actions(p.warehouse, result["run_id"])}
    assert {rows[m]["reason"] for m in expired} == {"expired_snapshot"}
    assert {rows[m]["delete_order"] for m in expired} == {0}
    # explain (on a fresh index, where A's expired checkpoints are gone) says why A's shared/ stays
    p.refresh()
    from statekeeper.cli import main as cli

    report = tmp_path / "explain.json"
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli(["explain", a_shared.rstrip("/"), "--warehouse", p.warehouse.uri, "--json"])
    text = out.getvalue()
    report.write_text(text)
    explained = json.loads(text)
    assert explained and any(job in text for job in (Path(fx.job("B")["job_dir"]).name, Path(fx.job("C")["job_dir"]).name))
    # B and C still restore, every retained checkpoint of theirs
    cases = [(dirs[-1], "chain_claim", name) for name, dirs in jobs.items()]
    results = harness.verify_restore_many(VERSION, cases)
    assert all(r.ok for r in results), [(str(c[0]), r.output[-1500:]) for c, r in zip(cases, results) if not r.ok]

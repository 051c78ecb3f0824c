"""GC, the report and `statekeeper explain` on the Flink 2.x layouts; every retained checkpoint still restores.

Per harness version, relocated copies of the `forst` (2.0+), `changelog` and `rotated_job_id` stores share
one warehouse. The rotated store's old job A is backdated 10 days (the Kubernetes operator redeployed it as
B and B_legacy); everything else is seconds old, and the grace period is 1 s (so all of it is past it).

1. GC `--retain-last 1 --inactive-after 7d`: each job keeps its newest checkpoint. Expected deletions come
   from Flink's own reading (the oracle) of the `_metadata` that remain, and from the directories on disk:
   every listed file those do not reference, except the files of ForSt databases that may still be written
   (the newest attempt of each subtask of a job that is not inactive). The superseded `attempt_0` databases
   of the failed-over job lose their unreferenced files; the rest is reported, with its bytes, as left alone.
   Changelog (DSTL) files only the expired checkpoints used go; A's files that B and B_legacy use stay.
2. The report page lists A as idle with B and B_legacy as live users, and the ForSt databases' dead and
   left-alone bytes per job; `statekeeper explain --inactive-after 7d` says the same.
3. GC `--inactive-after 1s --roots-complete` (every job declared inactive, and these roots every root any job
   restores from): now every unreferenced ForSt database file goes.
4. Every retained checkpoint of every job restores in real Flink (one JVM): the ForSt job after its failover
   and the ForSt job restored by CLAIM included, with the ForSt settings they ran with.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import time
from pathlib import Path

import pytest

import tests.harness as harness
from tests.chains.support import oracle_references
from tests.gc.support import SHORT, actions, listing, local, pipeline, relocated, uri
from tests.plugins.flink import matrix_versions

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]

SCENARIOS = ("forst", "changelog", "rotated_job_id")
_DB = re.compile(r"/shared/op_(.+)_attempt_(\d+)/db/")
TEN_DAYS = 10 * 86400


def _moved(fx, copy: str):
    return lambda p: copy + uri(p)[len(uri(fx.root)):]


def _kept_metadata(fx, copy: str) -> set[str]:
    """The `_metadata` of each job's newest retained checkpoint (what --retain-last 1 keeps)."""
    moved = _moved(fx, copy)
    return {moved(j["retained_checkpoints"][-1]) + "/_metadata" for j in fx.manifest["jobs"]}


def _newest_attempts(fx, copy: str) -> dict[tuple[str, str], int]:
    """(job dir, operator) -> the highest attempt number of its databases, from the directories Flink made."""
    moved = _moved(fx, copy)
    out: dict[tuple[str, str], int] = {}
    for job in fx.manifest["jobs"]:
        for db in job.get("forst_databases", []):
            key = (moved(job["job_dir"]), db["operator"])
            out[key] = max(out.get(key, -1), db["attempt"])
    return out


def _may_be_written(file_uri: str, newest: dict[tuple[str, str], int]) -> bool:
    """A file of the newest database of its subtask (possibly live unless its job is declared inactive)."""
    m = _DB.search(file_uri)
    if m is None:
        return False
    job_dir = file_uri[: m.start()]
    return int(m.group(2)) == newest[(job_dir, m.group(1))]


def _backdate(directory: Path, seconds: int) -> None:
    when = time.time() - seconds
    for dirpath, _dirs, names in os.walk(directory):
        for name in names:
            os.utime(os.path.join(dirpath, name), (when, when))


def _cli(*args: str) -> tuple[int, str]:
    from statekeeper.cli import main as cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli(list(args))
    return code, out.getvalue()


@pytest.fixture(scope="module", params=matrix_versions())
def run(request, spark, flink_fixture, tmp_path_factory):
    version = request.param
    base = tmp_path_factory.mktemp(f"flink2-gc-{version}")
    fixtures = {s: flink_fixture(version, s) for s in SCENARIOS if harness.supports(version, s)}
    copies = {s: relocated(fx, base / s) for s, fx in fixtures.items()}
    rotated, rcopy = fixtures["rotated_job_id"], copies["rotated_job_id"]
    old_job = local(_moved(rotated, rcopy)(rotated.job("A")["job_dir"]))
    _backdate(old_job, TEN_DAYS)
    time.sleep(1.5)                     # everything else past the 1 s grace period
    p = pipeline(spark, base, list(copies.values()))
    before = listing(p.roots)
    kept = set().union(*(_kept_metadata(fx, copies[s]) for s, fx in fixtures.items()))
    truth = oracle_references(version, [local(m) for m in sorted(kept)])
    referenced = {f for files in truth.values() for f in files}
    newest = {}
    for s, fx in fixtures.items():
        newest.update(_newest_attempts(fx, copies[s]))

    p.refresh()
    code1, gc1 = p.gc("--mode", "delete", "--retain-last", "1", "--inactive-after", "7d", *SHORT)
    after1 = listing(p.roots)
    report = _report(spark, p)
    explain_code, explain_out = _cli("explain", "--inactive-after", "7d", "--warehouse", p.warehouse.uri, "--json")

    p.refresh()
    # every root of these stores is given: the newest databases are judged dead by inactivity only so
    code2, gc2 = p.gc("--mode", "delete", "--inactive-after", "1s", "--roots-complete", *SHORT)
    after2 = listing(p.roots)
    return {"version": version, "fixtures": fixtures, "copies": copies, "p": p, "before": before, "kept": kept,
            "referenced": referenced, "newest": newest, "gc1": (code1, gc1), "after1": after1, "report": report,
            "explain": (explain_code, explain_out), "gc2": (code2, gc2), "after2": after2, "old_job": old_job}


def _report(spark, p) -> dict:
    from statekeeper.report.job import BuildReport
    from statekeeper.report.options import ReportOptions

    out = p.base / "report"
    result = (BuildReport(spark).warehouse(p.warehouse.uri).progress_interval(0)
              .configure(ReportOptions(out=str(out))).execute())
    assert result.status == "succeeded", result.summary()
    return {"page": (out / "index.html").read_text(), "data": json.loads((out / "report.json").read_text())}


def test_gc_deletes_what_nothing_references_but_never_a_database_that_may_be_written(run):
    code, result = run["gc1"]
    assert code == 0, result.get("blocked") or result
    before, after = set(run["before"]), set(run["after1"])
    unreferenced = before - run["referenced"] - run["kept"]
    left_alone = {f for f in unreferenced if _may_be_written(f, run["newest"])}
    assert unreferenced - left_alone <= set(run["before"])
    assert before - after == unreferenced - left_alone, (sorted((before - after) ^ (unreferenced - left_alone))[:10])
    assert run["referenced"] & before <= after
    rows = {r["uri"]: r for r in actions(run["p"].warehouse, result["run_id"])}
    assert all(rows[u]["outcome"] == "deleted" for u in before - after)
    if "forst" in run["fixtures"]:
        forst = run["copies"]["forst"]
        dead = {u for u in before - after if u.startswith(forst) and _DB.search(u)}
        # the failed-over job's superseded databases lost files, named by the oracle's reading, not ours
        assert dead and all(int(_DB.search(u).group(2)) == 0 for u in dead)
        assert {rows[u]["reason"] for u in dead} <= {"dead_database", "expired_snapshot"}
        reported = {d["job_dir"]: d for d in result["forst"]}
        a = Path(run["fixtures"]["forst"].job("A")["job_dir"]).name
        b = Path(run["fixtures"]["forst"].job("B")["job_dir"]).name
        assert (reported[a]["databases"], reported[a]["dead_databases"]) == (8, 4)
        assert (reported[b]["databases"], reported[b]["dead_databases"]) == (4, 0)
        assert sum(d["dead_bytes"] for d in reported.values()) == sum(run["before"][u] for u in dead)
        assert sum(d["unjudged_bytes"] for d in reported.values()) == sum(run["before"][u] for u in left_alone) > 0
    # changelog: DSTL files only the expired checkpoints used are gone, those the newest uses stay
    changelog = run["copies"]["changelog"]
    dstl_gone = {u for u in before - after if u.startswith(changelog) and "/dstl/" in u}
    assert dstl_gone and {rows[u]["reason"] for u in dstl_gone} == {"expired_snapshot"}
    assert {u for u in after if u.startswith(changelog) and "/dstl/" in u} <= run["referenced"]


def test_the_old_job_is_idle_and_its_users_are_named(run):
    rotated = run["fixtures"]["rotated_job_id"]
    a, users = rotated.job("A"), {Path(rotated.job(n)["job_dir"]).name for n in ("B", "B_legacy")}
    a_dir = Path(a["job_dir"]).name
    idle = run["report"]["data"]["idle_jobs"]
    assert [d["job_dir"] for d in idle] == [a_dir]          # only the backdated job is idle
    assert {p["job_dir"] for p in idle[0]["pinned_by"] if p["live"]} == users
    assert f'data-idle-dir="{a_dir}"' in run["report"]["page"]
    code, text = run["explain"]
    listed = json.loads(text)["idle_job_dirs"]
    assert code == 0 and [d["job_dir"] for d in listed] == [a_dir]
    assert {p["job_dir"] for p in listed[0]["pinned_by"] if p["live"]} == users
    # (both read the index cut GC planned on: the store as it was before that run)
    stored = sum(s for u, s in run["before"].items() if u.startswith(uri(run["old_job"]) + "/"))
    assert listed[0]["bytes"] == idle[0]["bytes"] == stored
    if "forst" in run["fixtures"]:
        page = run["report"]["page"]
        assert 'id="gc-forst"' in page and "data-dead-bytes=" in page


def test_declared_inactive_every_unreferenced_database_file_goes(run):
    code, result = run["gc2"]
    assert code == 0, result.get("blocked") or result
    gone = set(run["after1"]) - set(run["after2"])
    expected = {f for f in set(run["after1"]) - run["referenced"] - run["kept"]}
    assert gone == expected, (sorted(gone ^ expected)[:10])
    if "forst" in run["fixtures"]:
        assert gone and all(_DB.search(u) for u in gone)
        assert sum(d["unjudged_bytes"] for d in result["forst"]) == 0


def test_every_retained_checkpoint_restores(run):
    cases = []
    for s, fx in run["fixtures"].items():
        moved = _moved(fx, run["copies"][s])
        for job in fx.manifest["jobs"]:
            cases.append(harness.VerifyCase(local(moved(job["retained_checkpoints"][-1])), s, job["name"]))
    results = harness.verify_restore_many(run["version"], cases)
    failed = [(str(c.snapshot_dir), r.output[-2000:]) for c, r in zip(cases, results, strict=True) if not r.ok]
    assert not failed, failed

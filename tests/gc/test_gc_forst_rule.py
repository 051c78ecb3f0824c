"""Which ForSt databases GC may judge, and what the sweep plans in them and in changelog directories, on
small hand-made tables (the real-Flink proof is tests/flink2/test_flink2_gc.py).

Every case is a case the rule must decide without knowing whether Flink still runs the job: a job that
wrote anything within the grace period keeps every database live (a job resubmitted under its job id
counts attempts from 0 again and reuses the directories); a quiet job's superseded attempts are dead; its
newest attempt only when the job is declared inactive (--inactive-after) and the roots complete.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from statekeeper.gc import forst, plan
from statekeeper.tables.vocabulary import DatabaseVerdict, FileKind

pytestmark = [pytest.mark.spark]

NOW = datetime(2026, 11, 26, 12, tzinfo=timezone.utc)
GRACE = NOW - timedelta(days=3)
OLD, OLDER, RECENT = NOW - timedelta(days=4), NOW - timedelta(days=30), NOW - timedelta(hours=1)
QUIET, BUSY, GONE = "a" * 32, "b" * 32, "c" * 32
OP1 = "KeyedProcessOperator_b7da0024f392e292504661302df974d6__1_2_"
OP2 = "KeyedProcessOperator_b7da0024f392e292504661302df974d6__2_2_"

FILES = "uri string, root string, root_id string, job_dir string, bucket string, relative_path string, kind string, " \
        "job_id string, checkpoint_id long, size long, mtime timestamp, etag string"
SNAPSHOTS = "uri string, root_id string, job_dir string, snapshot_type string, metadata_mtime timestamp"
REFERENCES = "snapshot_uri string, root_id string, job_dir string, file_uri string, file_kind string"


def _file(job: str, rel: str, kind: FileKind, mtime: datetime, size: int = 10) -> tuple:
    return (f"file:///r/{job}/{rel}", "file:///r", "r", job, "00", f"{job}/{rel}", kind.value, job, None, size,
            mtime.replace(tzinfo=None), None)


def _db(job: str, op: str, attempt: int, name: str, mtime: datetime = OLD) -> tuple:
    return _file(job, f"shared/op_{op}_attempt_{attempt}/db/{name}", FileKind.FORST_WORKING, mtime)


@pytest.fixture(scope="module")
def tables(spark):
    files = [
        # QUIET: no object within the grace period; OP1 failed over once, OP2 never; last checkpoint 4 days old
        _db(QUIET, OP1, 0, "old-0"), _db(QUIET, OP1, 1, "new-1"), _db(QUIET, OP2, 0, "only-0"),
        _file(QUIET, "chk-9/_metadata", FileKind.CHECKPOINT_METADATA, OLD),
        _file(QUIET, "dstl/d-1", FileKind.CHANGELOG, OLD),
        # BUSY: the same shape, but something was written an hour ago (a running job, or one restarted under
        # its job id that reopened attempt_0)
        _db(BUSY, OP1, 0, "old-0"), _db(BUSY, OP1, 1, "new-1", RECENT),
        _file(BUSY, "chk-3/_metadata", FileKind.CHECKPOINT_METADATA, OLD),
        _file(BUSY, "dstl/d-1", FileKind.CHANGELOG, OLD),
        # GONE: no checkpoint left (a CLAIM restore deleted it), its newest object a month old
        _db(GONE, OP1, 0, "only-0", OLDER),
        # a path of kind forst_working the pattern does not take apart names no database
        _file(QUIET, "shared/op_x_attempt_/db/odd", FileKind.FORST_WORKING, OLD),
    ]
    snapshots = [(f"file:///r/{QUIET}/chk-9/_metadata", "r", QUIET, "checkpoint", OLD.replace(tzinfo=None)),
                 (f"file:///r/{BUSY}/chk-3/_metadata", "r", BUSY, "checkpoint", OLD.replace(tzinfo=None))]
    return (spark.createDataFrame(files, FILES), spark.createDataFrame(snapshots, SNAPSHOTS),
            spark.createDataFrame([], REFERENCES))


def _verdicts(tables, inactive_cutoff, roots_complete=True):
    files, snapshots, _ = tables
    active = plan.active_jobs(files, GRACE)
    rows = forst.database_verdicts(files, snapshots, active, inactive_cutoff, roots_complete).collect()
    return {(r["job_dir"], r["operator"], r["attempt"]): r["verdict"] for r in rows}


def test_only_superseded_attempts_of_quiet_jobs_are_dead_by_default(tables):
    assert _verdicts(tables, None) == {
        (QUIET, OP1, 0): DatabaseVerdict.SUPERSEDED, (QUIET, OP1, 1): DatabaseVerdict.LIVE,
        (QUIET, OP2, 0): DatabaseVerdict.LIVE,
        (BUSY, OP1, 0): DatabaseVerdict.LIVE, (BUSY, OP1, 1): DatabaseVerdict.LIVE,
        (GONE, OP1, 0): DatabaseVerdict.LIVE,
    }


def test_the_inactivity_rule_kills_the_newest_attempts_of_quiet_jobs_only(tables):
    # inactive after 2 days: QUIET's last checkpoint (4 days) and GONE's newest object (30 days) are older
    assert _verdicts(tables, NOW - timedelta(days=2)) == {
        (QUIET, OP1, 0): DatabaseVerdict.SUPERSEDED, (QUIET, OP1, 1): DatabaseVerdict.JOB_INACTIVE,
        (QUIET, OP2, 0): DatabaseVerdict.JOB_INACTIVE,
        (BUSY, OP1, 0): DatabaseVerdict.LIVE, (BUSY, OP1, 1): DatabaseVerdict.LIVE,
        (GONE, OP1, 0): DatabaseVerdict.JOB_INACTIVE,
    }
    # inactive after 10 days: only GONE
    assert {k for k, v in _verdicts(tables, NOW - timedelta(days=10)).items()
            if v == DatabaseVerdict.JOB_INACTIVE} == {(GONE, OP1, 0)}


def test_without_the_roots_declared_complete_inactivity_kills_no_newest_attempt(tables):
    # A job in a root the run was not given may have been restored in CLAIM mode from the newest checkpoint of a
    # quiet job, and read its newest attempt's database still (issue 73): only superseded attempts are dead.
    assert _verdicts(tables, NOW - timedelta(days=2), roots_complete=False) == {
        (QUIET, OP1, 0): DatabaseVerdict.SUPERSEDED, (QUIET, OP1, 1): DatabaseVerdict.HELD_BACK,
        (QUIET, OP2, 0): DatabaseVerdict.HELD_BACK,
        (BUSY, OP1, 0): DatabaseVerdict.LIVE, (BUSY, OP1, 1): DatabaseVerdict.LIVE,
        (GONE, OP1, 0): DatabaseVerdict.HELD_BACK,
    }
    files, snapshots, references = tables
    verdicts = forst.database_verdicts(files, snapshots, plan.active_jobs(files, GRACE), NOW - timedelta(days=2))
    assert forst.dead_database_files(files, verdicts).collect() == [
        (f"file:///r/{QUIET}/shared/op_{OP1}_attempt_0/db/old-0",)]
    held = forst.held_back_files(files, references.select("file_uri"), verdicts).collect()
    # the held-back databases' unreferenced files, named with the claimable tails (none is referenced here)
    assert sorted((r["job"], r["verdict"]) for r in held) == sorted([(QUIET, "held_back"), (QUIET, "held_back"),
                                                                     (GONE, "held_back")])


def test_the_sweep_plans_dead_database_files_and_quiet_changelog_files_only(tables):
    files, snapshots, references = tables
    active = plan.active_jobs(files, GRACE)
    verdicts = forst.database_verdicts(files, snapshots, active, None)
    expired = files.sparkSession.createDataFrame([], "uri string, root string, root_id string, job_dir string, rule string")
    swept = plan.sweep_all(plan.SweepInputs(files, snapshots, references), expired, run_id="gc-1", grace_cutoff=GRACE,
                           dead_databases=forst.dead_database_files(files, verdicts))
    planned = {r["relative_path"]: r["reason"] for r in swept.collect()}
    assert planned == {f"{QUIET}/shared/op_{OP1}_attempt_0/db/old-0": "dead_database", f"{QUIET}/dstl/d-1": "orphan"}
    # without the dead-database frame no ForSt file is ever planned
    bare = plan.sweep_all(plan.SweepInputs(files, snapshots, references), expired, run_id="gc-1", grace_cutoff=GRACE)
    assert {r["relative_path"] for r in bare.collect()} == {f"{QUIET}/dstl/d-1"}
    rows = {r["job_dir"]: r for r in forst.per_job(files, references.select("file_uri"), verdicts, swept).collect()}
    assert (rows[QUIET]["databases"], rows[QUIET]["dead_databases"], rows[QUIET]["dead_files"]) == (3, 1, 1)
    # left alone: the newest attempts, and the file that names no database (counted, never skipped silently)
    assert (rows[QUIET]["unjudged_files"], rows[QUIET]["unjudged_bytes"]) == (3, 30)
    assert (rows[BUSY]["dead_files"], rows[BUSY]["unjudged_files"]) == (0, 2)


def test_a_directory_of_database_files_without_a_snapshot_is_ownerless(tables):
    files, snapshots, _ = tables
    rows = plan.ownerless_dirs(files, snapshots, plan.OwnerlessRule()).collect()
    assert {(r["job"], r["verdict"]) for r in rows} == {(GONE, "held_back")}


def test_in_a_root_that_is_the_jobs_own_directory_the_databases_are_judged_by_the_whole_job(spark):
    # chk-N/ and shared/ straight in the root (create-subdir off, or a root given at the job's directory): the
    # databases' files are old, but the job wrote a checkpoint an hour ago, so it is running; by shared/'s own
    # files the superseded attempt was dead and, with --inactive-after, the newest one too
    def flat(rel: str, kind: FileKind, mtime: datetime) -> tuple:
        return (f"file:///f/{rel}", "file:///f", "f", rel.split("/")[0], "00", rel, kind.value, None, None, 10,
                mtime.replace(tzinfo=None), None)

    files = spark.createDataFrame([
        flat(f"shared/op_{OP1}_attempt_0/db/old-0", FileKind.FORST_WORKING, OLD),
        flat(f"shared/op_{OP1}_attempt_1/db/new-1", FileKind.FORST_WORKING, OLD),
        flat("chk-7/_metadata", FileKind.CHECKPOINT_METADATA, RECENT)], FILES)
    snapshots = spark.createDataFrame([("file:///f/chk-7/_metadata", "f", "chk-7", "checkpoint",
                                        RECENT.replace(tzinfo=None))], SNAPSHOTS)
    verdicts = forst.database_verdicts(files, snapshots, plan.active_jobs(files, GRACE), NOW - timedelta(days=2),
                                       roots_complete=True)
    assert {(r["attempt"], r["verdict"]) for r in verdicts.collect()} == {(0, DatabaseVerdict.LIVE),
                                                                        (1, DatabaseVerdict.LIVE)}
    assert plan.ownerless_dirs(files, snapshots, plan.OwnerlessRule()).collect() == []

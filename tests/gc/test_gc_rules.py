"""GC's options, retention policy and fail-closed rules on small hand-made inputs."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from statekeeper.gc.guards import Rule, chains_blockers, index_blockers
from statekeeper.gc.options import GcOptions, GcOptionsError, RetentionPolicy, format_duration, parse_duration
from statekeeper.tables.vocabulary import GcMode

NOW = datetime(2026, 11, 23, 12, tzinfo=timezone.utc)


@pytest.mark.parametrize("text,seconds", [("90s", 90), ("30m", 1800), ("12h", 43200), ("3d", 259200),
                                          ("2w", 1209600), ("1.5", 5400), (" 4D ", 345600)])
def test_durations(text, seconds):
    assert parse_duration(text).total_seconds() == seconds
    assert parse_duration(format_duration(parse_duration(text))) == parse_duration(text)


@pytest.mark.parametrize("text", ["", "3 days", "-1h", "h", "1y"])
def test_bad_durations_name_the_format(text):
    with pytest.raises(GcOptionsError, match="e.g. 90s"):
        parse_duration(text)


def test_defaults_are_safe():
    opts = GcOptions()
    opts.check()
    assert opts.mode is GcMode.PLAN and opts.older_than == timedelta(days=3)
    assert not opts.policy.expires_anything
    assert not opts.roots_complete and opts.ownerless_older_than is None    # ownerless directories: never


def test_the_summary_names_held_back_ownerless_directories_and_what_releases_them():
    from statekeeper.gc.job import GcResult, OwnerlessDir
    from statekeeper.tables.vocabulary import OwnerlessVerdict

    now = datetime(2026, 11, 26, tzinfo=timezone.utc)
    held = OwnerlessDir("file:///ckpt/deployA", "a" * 32, 24, 3 * 2**20, OwnerlessVerdict.HELD_BACK)
    freed = OwnerlessDir("file:///ckpt/deployA", "b" * 32, 2, 10, OwnerlessVerdict.OLDER_THAN)
    result = GcResult(run_id="gc-1", status="planned", started_at=now, finished_at=now, warehouse="w",
                      mode=GcMode.PLAN, plan_run_id="gc-1", roots=("file:///ckpt/deployA",), options="{}", ownerless=(held, freed),
                      external_locations=1, external_examples=("file:///ckpt/deployB",))
    text = result.summary()
    assert "held back: 1 ownerless job directory, 3.0 MiB in 24 file(s)" in text, text
    assert f"file:///ckpt/deployA/{'a' * 32}: 24 file(s)" in text
    assert "--roots-complete" in text and "--ownerless-older-than" in text
    assert f"{'b' * 32}: 2 file(s), 10 B (older than --ownerless-older-than)" in text, text
    assert "1 location(s) outside the given roots (e.g. file:///ckpt/deployB)" in text
    audit = result.audit_values()["ownerless"]
    assert [(d["job_dir"], d["verdict"]) for d in audit] == [("a" * 32, "held_back"), ("b" * 32, "older_than")]


@pytest.mark.parametrize("options,match", [
    (GcOptions(older_than=timedelta(minutes=30)), "allow-short-grace"),
    (GcOptions(mode=GcMode.EXECUTE), "--execute RUN_ID"),
    (GcOptions(plan_run_id="gc-1"), "only taken in execute mode"),
    (GcOptions(policy=RetentionPolicy(retain_last=0)), "newest checkpoint is always kept"),
    (GcOptions(policy=RetentionPolicy(inactive_after=timedelta(days=1), inactive_retain=0)), "always kept"),
    (GcOptions(max_deletes_per_second=0), "positive"),
    (GcOptions(index_not_before=datetime(2026, 1, 1)), "timezone"),
    (GcOptions(ownerless_older_than=timedelta(days=3)), "must be longer than the grace period"),
])
def test_unsafe_options_are_refused(options, match):
    with pytest.raises(GcOptionsError, match=match):
        options.check()
    GcOptions(older_than=timedelta(minutes=30), allow_short_grace=True).check()


def test_partial_or_old_index_blocks():
    partial = {"run_id": "idx-2", "status": "partial", "finished_at": NOW}
    [b] = index_blockers(partial, "idx-1", NOW - timedelta(hours=1), None)
    assert b.rule is Rule.INDEX_NOT_SUCCEEDED and "idx-2" in b.message and "idx-1" in b.message
    assert index_blockers({"run_id": "idx-1", "status": "succeeded", "finished_at": NOW}, "idx-1", NOW, None) == []
    [b] = index_blockers(None, "idx-1", NOW - timedelta(hours=5), NOW - timedelta(hours=1))
    assert b.rule is Rule.INDEX_TOO_OLD and "index_checkpoints" in b.message


def test_missing_or_stale_chains_block():
    assert chains_blockers((), True) == []
    assert chains_blockers((), False)[0].rule is Rule.CHAINS_STALE
    assert "compute_chains" in chains_blockers(("dependencies (snapshots 3 != 4)",), True)[0].message


@pytest.fixture(scope="module")
def snapshots(spark):
    """Job j1 active (newest 1 h old), j2 inactive (newest 10 days old), one young checkpoint, savepoints."""
    rows = []
    for job, newest_age_h in (("j1", 1), ("j2", 240)):
        for i in range(5):
            rows.append((f"file:///r/{job}/chk-{10 - i}/_metadata", "file:///r", "rid", job, "checkpoint_metadata",
                         "checkpoint", 10 - i, NOW - timedelta(hours=newest_age_h + i)))
    rows.append(("file:///r/j3/chk-2/_metadata", "file:///r", "rid", "j3", "checkpoint_metadata", "checkpoint", 2,
                 NOW - timedelta(minutes=1)))
    rows.append(("file:///r/j3/chk-1/_metadata", "file:///r", "rid", "j3", "checkpoint_metadata", "checkpoint", 1,
                 NOW - timedelta(minutes=2)))
    rows.append(("file:///s/savepoint-a/_metadata", "file:///s", "sid", "savepoint-a", "savepoint_metadata",
                 "savepoint", 7, NOW - timedelta(days=40)))
    rows.append(("file:///s/savepoint-b/_metadata", "file:///s", "sid", "savepoint-b", "savepoint_metadata",
                 "savepoint", 9, NOW - timedelta(days=2)))
    return spark.createDataFrame(rows, "uri string, root string, root_id string, job_dir string, layout_kind string, "
                                       "snapshot_type string, checkpoint_id long, metadata_mtime timestamp")


def expire(snapshots, policy: RetentionPolicy, grace=timedelta(minutes=30)) -> dict[str, str]:
    from statekeeper.gc.policy import expired_snapshots

    return {r["uri"]: r["rule"] for r in expired_snapshots(snapshots, policy, NOW, NOW - grace).collect()}


@pytest.mark.spark
def test_policy_expires_nothing_by_default(snapshots):
    assert expire(snapshots, RetentionPolicy()) == {}


@pytest.mark.spark
def test_retain_last_keeps_the_newest_and_the_young(snapshots):
    out = expire(snapshots, RetentionPolicy(retain_last=2))
    assert set(out) == {f"file:///r/{j}/chk-{n}/_metadata" for j in ("j1", "j2") for n in (6, 7, 8)}
    assert all("--retain-last" in rule for rule in out.values())
    out = expire(snapshots, RetentionPolicy(retain_last=1))
    assert "file:///r/j3/chk-1/_metadata" not in out       # younger than the grace period
    assert not any(u.endswith("chk-10/_metadata") for u in out)   # a job's newest: never


@pytest.mark.spark
def test_inactive_jobs_keep_only_their_newest(snapshots):
    out = expire(snapshots, RetentionPolicy(inactive_after=timedelta(days=7), inactive_retain=1))
    assert set(out) == {f"file:///r/j2/chk-{n}/_metadata" for n in (6, 7, 8, 9)}
    assert all("inactive since" in rule for rule in out.values())


@pytest.mark.spark
def test_savepoints_only_with_their_own_option(snapshots):
    assert not any("savepoint" in u for u in expire(snapshots, RetentionPolicy(retain_last=1)))
    out = expire(snapshots, RetentionPolicy(expire_savepoints_older_than=timedelta(days=30)))
    assert set(out) == {"file:///s/savepoint-a/_metadata"}

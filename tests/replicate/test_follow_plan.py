"""Follow mode's pure decisions (statekeeper.replicate.follow): which directories are checkpoints and
jobs, and when a closure is complete. The store-backed half is tests/replicate/test_follow_discovery.py."""
from __future__ import annotations

from datetime import datetime, timezone

from statekeeper.layout.classify import checkpoint_dirs
from statekeeper.replicate.follow import FollowProblemKind, closure_objects, job_dirs
from statekeeper.storage import FileInfo

JOB = "file:///store/checkpoints/" + "ab" * 16
NOW = datetime(2026, 11, 27, tzinfo=timezone.utc)


def _info(uri: str, size: int) -> FileInfo:
    return FileInfo(uri=uri, size=size, mtime=NOW, etag=f"e-{size}")


def test_checkpoint_dirs_are_the_chk_directories_newest_first_by_number_not_by_name():
    dirs = [f"{JOB}/chk-9", f"{JOB}/chk-10", f"{JOB}/shared", f"{JOB}/taskowned", f"{JOB}/chk-x",
            f"{JOB}/chk-2/", "file:///elsewhere/chk-11"]
    assert checkpoint_dirs(JOB, dirs) == [(10, f"{JOB}/chk-10"), (9, f"{JOB}/chk-9"), (2, f"{JOB}/chk-2")]


def test_job_dirs_are_job_ids_and_a_flat_layout_is_named_not_skipped():
    root = "s3://b/checkpoints"
    jobs, flat = job_dirs(root, [f"{root}/{'cd' * 16}", f"{root}/{'ab' * 16}/", f"{root}/chk-3", f"{root}/shared",
                                 f"{root}/savepoint-abcdef-0123456789ab", f"{root}/tmp"])
    assert jobs == ["ab" * 16, "cd" * 16]
    assert flat == ["chk-3", "shared"]


def test_a_complete_closure_carries_each_listed_size_and_version():
    other = "file:///store/checkpoints/" + "cd" * 16 + "/shared/a.sst"   # another job's shared file (CLAIM)
    named = {f"{JOB}/chk-4/x": 10, other: 30, f"{JOB}/shared/seg": 5}
    listed = {f"{JOB}/chk-4/x": _info(f"{JOB}/chk-4/x", 10), other: _info(other, 30),
              f"{JOB}/shared/seg": _info(f"{JOB}/shared/seg", 8)}   # a segment file is longer than its segments
    objects, problems = closure_objects(named, listed, ["file:///store/checkpoints"], f"{JOB}/chk-4/_metadata")
    assert problems == []
    assert [(o.uri, o.size, o.etag) for o in objects] == sorted((u, i.size, i.etag) for u, i in listed.items())


def test_missing_short_and_outside_objects_are_each_named_with_what_to_do():
    meta = f"{JOB}/chk-4/_metadata"
    named = {f"{JOB}/shared/gone": 10, f"{JOB}/shared/short": 10, "file:///elsewhere/x": 1, f"{JOB}/chk-4/ok": 2}
    listed = {f"{JOB}/shared/short": _info(f"{JOB}/shared/short", 9), f"{JOB}/chk-4/ok": _info(f"{JOB}/chk-4/ok", 2)}
    objects, problems = closure_objects(named, listed, ["file:///store/checkpoints/"], meta)
    assert [o.uri for o in objects] == [f"{JOB}/chk-4/ok"]
    by_kind = {p.kind: p for p in problems}
    assert set(by_kind) == {FollowProblemKind.MISSING_OBJECT, FollowProblemKind.SHORT_OBJECT,
                            FollowProblemKind.OUTSIDE_ROOTS}
    assert by_kind[FollowProblemKind.MISSING_OBJECT].uri == f"{JOB}/shared/gone"
    assert "subsumed" in by_kind[FollowProblemKind.MISSING_OBJECT].message
    short = by_kind[FollowProblemKind.SHORT_OBJECT].message
    assert "holds 9" in short and meta in short
    assert "add its root" in by_kind[FollowProblemKind.OUTSIDE_ROOTS].message

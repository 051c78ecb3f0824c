"""Follow mode's discovery on a store real Flink wrote: for each job directory, the newest completed
checkpoint and its closure, read from the store and the codec alone (no index), against Flink's own
reading of the same `_metadata` (the harness oracle).

The store is a relocated copy of the newest harness version's `chain_claim`: B was restored from A's
retained checkpoint in CLAIM mode and C from B's, so the closures of B and C span other jobs'
directories (FLINK-24149). No Spark and no copy here: what a follow round would hand to the copy.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.replicate.follow import (
    FollowProblemKind,
    FollowStatus,
    first_look,
    follow_job,
    job_dirs,
)
from statekeeper.replicate.relocate import target_of
from statekeeper.storage import RoutingFileIO, StorageConfig
from statekeeper.uri import normalize_uri
from tests.gc.support import relocated
from tests.plugins.prepared import replace_bytes

pytestmark = [pytest.mark.flink]

VERSION = harness.FLINK_VERSIONS[-1]


@pytest.fixture(scope="module")
def store(flink_fixture, flink_oracle, tmp_path_factory):
    """(fixture, copy's checkpoints root URI, job name -> job dir name, metadata URI in the copy -> the files
    Flink's reader says it references, also in the copy)."""
    fx = flink_fixture(VERSION, "chain_claim")
    base = tmp_path_factory.mktemp("follow")
    copy = relocated(fx, base / "src")
    old = normalize_uri(str(fx.root))
    oracle = {normalize_uri(path).replace(old, copy, 1):
              {normalize_uri(f["path"]).replace(old, copy, 1): f["size"] for f in reading["referenced_files"]}
              for path, reading in flink_oracle(VERSION, "chain_claim").items()}
    names = {j["name"]: Path(j["job_dir"]).name for j in fx.manifest["jobs"]}
    return fx, f"{copy}/checkpoints", names, oracle


def _newest_id(fx, name: str) -> int:
    return max(int(Path(d).name[4:]) for d in fx.job(name)["retained_checkpoints"])


def _local(uri: str) -> Path:
    return Path(uri[len("file://"):])


def test_each_jobs_newest_completed_checkpoint_and_its_closure_as_flink_reads_it(store, tmp_path):
    fx, root, names, oracle = store
    io = RoutingFileIO(StorageConfig())
    mapping = {root: normalize_uri(str(tmp_path / "dr"))}
    jobs, flat = job_dirs(root, io.list_dirs(root))
    assert flat == [] and set(jobs) >= set(names.values()), (jobs, names)
    spans = 0
    for name, job_dir in names.items():
        found = follow_job(io, [root], root, job_dir, last_copied=None)
        assert found.status is FollowStatus.DUE, found.problems
        assert found.completed.checkpoint_id == _newest_id(fx, name), (name, found.completed)
        truth = oracle[found.completed.metadata_uri]
        assert {o.uri: o.size >= truth[o.uri] for o in found.objects} == dict.fromkeys(truth, True), name
        spans += any(not o.uri.startswith(f"{root}/{job_dir}/") for o in found.objects)
        # the job's newest checkpoint already copied: nothing to do this round
        again = follow_job(io, [root], root, job_dir, last_copied=found.completed.checkpoint_id)
        assert again.status is FollowStatus.UP_TO_DATE and again.objects == ()
        newest = found.completed.checkpoint_id
        look = first_look(io, io, root, job_dir, mapping)
        assert (look.newest, look.published, look.unpublished) == (newest, False, True)
        assert look.due_after(None) and look.due_after(newest - 1) and not look.due_after(newest)
        published = _local(target_of(found.completed.metadata_uri, mapping))
        published.parent.mkdir(parents=True)
        published.write_bytes(b"the copy's rewritten _metadata, written last")
        look = first_look(io, io, root, job_dir, mapping)
        assert (look.newest, look.published, look.unpublished) == (newest, True, False)
        assert look.due_after(None), "published but not recorded in dr_copies: due again, to be recorded"
    assert spans >= 2, "B's and C's closures should reach into other jobs' directories (CLAIM)"


def test_a_checkpoint_in_progress_is_passed_over_for_the_newest_completed_one(store):
    fx, root, names, _ = store
    job_dir = names["A"]
    newer = _local(f"{root}/{job_dir}/chk-{_newest_id(fx, 'A') + 1}")
    newer.mkdir()
    (newer / "some-state-file").write_bytes(b"x" * 10)     # Flink writes state first and _metadata last
    try:
        found = follow_job(RoutingFileIO(StorageConfig()), [root], root, job_dir, last_copied=None)
        assert found.status is FollowStatus.DUE and found.completed.checkpoint_id == _newest_id(fx, "A")
    finally:
        (newer / "some-state-file").unlink()
        newer.rmdir()


def test_an_unparseable_metadata_is_named_and_nothing_of_it_is_copied(store):
    fx, root, names, _ = store
    job_dir = names["B"]
    meta = _local(f"{root}/{job_dir}/chk-{_newest_id(fx, 'B')}/_metadata")
    good = meta.read_bytes()
    replace_bytes(meta, good[: len(good) // 2])
    try:
        found = follow_job(RoutingFileIO(StorageConfig()), [root], root, job_dir, last_copied=None)
    finally:
        replace_bytes(meta, good)
    assert found.status is FollowStatus.REFUSED and found.objects == ()
    problem, = found.problems
    assert problem.kind is FollowProblemKind.UNPARSEABLE and problem.uri == normalize_uri(str(meta))
    assert "statekeeper inspect" in problem.message


def test_a_closure_object_that_is_a_symlink_refuses_the_checkpoint_named_as_a_symlink(store):
    """A data file replaced by a symlink to the same bytes: never followed, so refused, and called what it is (its
    listed size is the length of the link's target path, which once made it "a truncated object")."""
    fx, root, names, _ = store
    io = RoutingFileIO(StorageConfig())
    job_dir = names["A"]
    found = follow_job(io, [root], root, job_dir, last_copied=None)
    victim_uri = max(found.objects, key=lambda o: o.size).uri
    victim = _local(victim_uri)
    real = victim.with_name(victim.name + ".real")
    victim.rename(real)
    victim.symlink_to(real)
    try:
        linked = follow_job(io, [root], root, job_dir, last_copied=None)
    finally:
        victim.unlink()
        real.rename(victim)
    assert linked.status is FollowStatus.REFUSED and linked.objects == ()
    problem, = linked.problems
    assert problem.uri == victim_uri
    assert "is a symlink, not a regular file" in problem.message and "truncated" not in problem.message, problem
    assert problem.kind is FollowProblemKind.NOT_REGULAR


def test_a_closure_object_gone_from_another_jobs_shared_dir_refuses_the_checkpoint(store):
    fx, root, names, _ = store
    io = RoutingFileIO(StorageConfig())
    job_dir = names["C"]
    found = follow_job(io, [root], root, job_dir, last_copied=None)
    foreign = sorted(o.uri for o in found.objects if not o.uri.startswith(f"{root}/{job_dir}/"))
    assert foreign, "C's newest checkpoint should use other jobs' files"
    victim = _local(foreign[0])
    hidden = victim.with_name(victim.name + ".hidden")
    victim.rename(hidden)
    try:
        gone = follow_job(io, [root], root, job_dir, last_copied=None)
    finally:
        hidden.rename(victim)
    assert gone.status is FollowStatus.REFUSED and gone.objects == ()
    assert [(p.kind, p.uri) for p in gone.problems] == [(FollowProblemKind.MISSING_OBJECT, foreign[0])]

"""Classification of objects by Flink's directory layout (format spec §6, §10, §11)."""
from __future__ import annotations

import pytest

from statekeeper.layout.classify import LocationKind, classify, classify_child
from statekeeper.tables.vocabulary import FileKind

JOB = "a1b2c3d4e5f60718293a4b5c6d7e8f90"


@pytest.mark.parametrize("path, kind, job_dir, job_id, chk", [
    (f"{JOB}/chk-42/_metadata", FileKind.CHECKPOINT_METADATA, JOB, JOB, 42),
    (f"{JOB}/chk-42/3f0c1a2b-0000-4000-8000-000000000001", FileKind.EXCLUSIVE, JOB, JOB, 42),
    (f"{JOB}/chk-7/._metadata.inprogress.5b8e-11", FileKind.INPROGRESS_METADATA, JOB, JOB, 7),
    (f"{JOB}/shared/0a3e7bd1-8d2c-4b61-9d0c-5c9e0c3f2a11", FileKind.SHARED, JOB, JOB, None),
    (f"{JOB}/taskowned/0a3e7bd1-8d2c", FileKind.TASK_OWNED, JOB, JOB, None),
    (f"{JOB}/shared/job_{JOB}_op_90bea66de1c231edf33913ecd54406c1_0_2/f-1", FileKind.FILE_MERGING_MANAGED,
     JOB, JOB, None),
    (f"{JOB}/taskowned/job_{JOB}_tm_localhost-34567-6d1b2a/f-2", FileKind.FILE_MERGING_MANAGED, JOB, JOB, None),
    (f"{JOB}/shared/op_StreamMap_3_attempt_1/db/000012.sst", FileKind.FORST_WORKING, JOB, JOB, None),
    (f"{JOB}/shared/op_KeyedProcessOperator_b7da0024f392e292504661302df974d6__3_4__attempt_1/db/"
     "dde8980f-35f5-42d1-ad60-dad448f5fa0a", FileKind.FORST_WORKING, JOB, JOB, None),
    (f"{JOB}/dstl/0856cf6b-8918-4cfd-8b27-4823189d4948", FileKind.CHANGELOG, JOB, JOB, None),
    (f"{JOB}/dstl/_metadata", FileKind.SAVEPOINT_METADATA, JOB, JOB, None),   # a `_metadata` is a snapshot anywhere
    (f"{JOB}/dstl/sub/x", FileKind.UNKNOWN, JOB, JOB, None),
    ("dstl/abc", FileKind.UNKNOWN, "dstl", None, None),                       # DSTL always has a job-id level
    (f"{JOB}/shared/weird/nested", FileKind.UNKNOWN, JOB, JOB, None),
    (f"{JOB}/chk-3/sub/dir", FileKind.UNKNOWN, JOB, JOB, 3),
    (f"{JOB}/orphan.txt", FileKind.UNKNOWN, JOB, JOB, None),
    ("savepoint-a1b2c3-0123456789ab/_metadata", FileKind.SAVEPOINT_METADATA, "savepoint-a1b2c3-0123456789ab",
     None, None),
    ("savepoint-a1b2c3-0123456789ab/6a1f0e8c-aaaa", FileKind.SAVEPOINT_DATA, "savepoint-a1b2c3-0123456789ab",
     None, None),
    ("chk-5/_metadata", FileKind.CHECKPOINT_METADATA, "chk-5", None, 5),   # create-subdir=false
    ("shared/abc", FileKind.SHARED, "shared", None, None),
    ("my-exported-state/_metadata", FileKind.SAVEPOINT_METADATA, "my-exported-state", None, None),
    ("my-exported-state/abc", FileKind.UNKNOWN, "my-exported-state", None, None),
    ("README", FileKind.UNKNOWN, None, None, None),
    ("_metadata", FileKind.SAVEPOINT_METADATA, None, None, None),
])
def test_classify(path, kind, job_dir, job_id, chk):
    loc = classify(path)
    assert (loc.kind, loc.job_dir, loc.job_id, loc.checkpoint_id) == (kind, job_dir, job_id, chk)


def test_savepoint_dir_carries_job_prefix():
    assert classify("savepoint-a1b2c3-0123456789ab/_metadata").savepoint_job_prefix == "a1b2c3"


def test_job_id_must_be_32_lowercase_hex():
    assert classify(f"{JOB.upper()}/chk-1/_metadata").job_id is None
    assert classify(f"{JOB[:-1]}/chk-1/_metadata").job_id is None


@pytest.mark.parametrize("name, kind", [
    (None, LocationKind.ROOT_FILES), (JOB, LocationKind.JOB),
    ("savepoint-a1b2c3-0123456789ab", LocationKind.SAVEPOINT), ("chk-12", LocationKind.FLAT_CHECKPOINT),
    ("shared", LocationKind.FLAT_CHECKPOINT), ("backup", LocationKind.OTHER),
])
def test_classify_child(name, kind):
    assert classify_child(name) == kind


def test_metadata_kinds():
    assert FileKind.CHECKPOINT_METADATA.is_metadata and FileKind.SAVEPOINT_METADATA.is_metadata
    assert not FileKind.INPROGRESS_METADATA.is_metadata


@pytest.mark.parametrize("path, database", [
    (f"{JOB}/shared/op_KeyedProcessOperator_b7da0024f392e292504661302df974d6__3_4__attempt_1/db/f-1",
     (f"{JOB}/shared/op_KeyedProcessOperator_b7da0024f392e292504661302df974d6__3_4__attempt_1",
      "KeyedProcessOperator_b7da0024f392e292504661302df974d6__3_4_", 1)),
    (f"{JOB}/shared/op_StreamMap_3_attempt_12/db/000012.sst", (f"{JOB}/shared/op_StreamMap_3_attempt_12", "StreamMap_3", 12)),
    ("shared/op_x_attempt_0/db/_dummy_dir_1/", ("shared/op_x_attempt_0", "x", 0)),      # create-subdir=false
    (f"{JOB}/shared/op_x_attempt_/db/f", None), (f"{JOB}/shared/f", None), (f"{JOB}/taskowned/op_x_attempt_1/f", None),
])
def test_forst_database_of_a_path(path, database):
    from statekeeper.layout.forst import database_of

    got = database_of(path)
    assert (None if got is None else (got.directory, got.operator, got.attempt)) == database

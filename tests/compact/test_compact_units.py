"""Compaction without Spark or a JVM: placement, the codec edit, idempotent re-runs, and the verifier
refusing every candidate that is not its source with payloads moved.

Stores are relocated copies of cached harness fixtures (newest Flink version); the verifier's input is
what `apply` would install, tampered with in one way per test.
"""
from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.compact.apply import SnapshotRequest, compact_snapshot
from statekeeper.tables.vocabulary import CompactionStatus
from statekeeper.compact.plan import CANDIDATE_NAME, Placement, plan_compaction, result_metadata_uri
from statekeeper.compact.verify import CompactionVerifyError, verify_candidate
from statekeeper.format import (IncrementalKeyedHandle, RelativeFileHandle, absolutize_relative, extract_references,
                                read_metadata, to_bytes, transform)
from statekeeper.layout.classify import classify
from statekeeper.storage import file_io
from statekeeper.tables.vocabulary import FileKind
from tests.compact.support import local, relocated, uri

pytestmark = pytest.mark.flink
VERSION = harness.FLINK_VERSIONS[-1]


def _newest(store: str, fixture, job: str = "A") -> Path:
    return local(store) / fixture.retained_checkpoints(job)[-1].relative_to(fixture.root) / "_metadata"


def _request(path: Path, placement=Placement.NEW_DIRECTORY) -> SnapshotRequest:
    info = file_io().stat(uri(path))
    return SnapshotRequest(uri(path), info.size, info.etag, placement, 1024)


@pytest.fixture
def heavy(flink_fixture, tmp_path):
    fixture = flink_fixture(VERSION, "inline_heavy")
    return _newest(relocated(fixture, tmp_path / "store"), fixture)


def test_where_results_go_and_how_the_index_sees_them():
    src = "s3://b/ck/0123456789abcdef0123456789abcdef/chk-42/_metadata"
    assert result_metadata_uri(src, Placement.NEW_DIRECTORY) == \
        "s3://b/ck/0123456789abcdef0123456789abcdef/compacted/chk-42/_metadata"
    assert result_metadata_uri(src, Placement.IN_PLACE) == src
    assert result_metadata_uri("file:///sp/savepoint-012345-0123456789ab/_metadata", Placement.NEW_DIRECTORY) == \
        "file:///sp/compacted/savepoint-012345-0123456789ab/_metadata"
    job = "0123456789abcdef0123456789abcdef"
    assert classify(f"{job}/compacted/chk-42/_metadata").kind is FileKind.SAVEPOINT_METADATA
    assert classify(f"{job}/compacted/chk-42/0b1c").kind is FileKind.SAVEPOINT_DATA
    assert classify(f"{job}/compacted/chk-42/{CANDIDATE_NAME}").kind is FileKind.SAVEPOINT_DATA
    assert classify("compacted/savepoint-012345-0123456789ab/x").kind is FileKind.SAVEPOINT_DATA
    assert classify(f"{job}/elsewhere/chk-42/x").kind is FileKind.UNKNOWN


def test_absolutize_keeps_every_reference(flink_fixture):
    fixture = flink_fixture(VERSION, "savepoints")
    sp = fixture.savepoint_dirs()[0] / "_metadata"
    model = read_metadata(sp, uri(sp))
    res = absolutize_relative(model, uri(sp))
    assert res.changes and all(c.handle_kind == "RELATIVE_STREAM_STATE_HANDLE" for c in res.changes)
    relatives = []
    transform(res.model, lambda s, r, n, node: relatives.append(node) or node
              if type(node) is RelativeFileHandle else node)
    assert not relatives
    before = {f.uri for f in extract_references(model, uri(sp)).files}
    elsewhere = uri(sp.parent.parent / "other" / "_metadata")
    assert {f.uri for f in extract_references(res.model, elsewhere).files} == before


def test_a_rerun_finds_the_result_and_a_foreign_result_is_refused(heavy):
    first = compact_snapshot(file_io(), _request(heavy))
    assert first.outcome is CompactionStatus.COMPACTED, first
    again = compact_snapshot(file_io(), _request(heavy))
    assert again.outcome is CompactionStatus.ALREADY_COMPACTED and again.result_sha256 == first.result_sha256
    result = local(first.result_uri)
    result.write_bytes(result.read_bytes() + b"x")
    other = compact_snapshot(file_io(), _request(heavy))
    assert other.outcome is CompactionStatus.FAILED and "exists and is not the compaction" in other.problem


def test_a_source_changed_since_the_index_is_refused(heavy):
    req = _request(heavy)
    heavy.write_bytes(heavy.read_bytes())          # same bytes, new version
    out = compact_snapshot(file_io(), dataclasses.replace(req, expected_etag="stale"))
    assert out.outcome is CompactionStatus.FAILED and "changed since it was indexed" in out.problem
    assert not (heavy.parent.parent / "compacted").exists()


def _planned(path: Path):
    """The source model, the plan, and the new files written from it (what apply does before verifying)."""
    src = uri(path)
    model = read_metadata(path, src)
    plan = plan_compaction(model, src, Placement.NEW_DIRECTORY, min_bytes=1024, fingerprint="t")
    for f in plan.files:
        p = local(f.uri)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(f.payload.read(path))
    return model, plan


def _verify(path: Path, model, plan, candidate_model) -> None:
    data = to_bytes(candidate_model, inline_source=path)
    cand = read_metadata(io.BytesIO(data), plan.result_uri)
    with open(path, "rb") as source:
        verify_candidate(model, uri(path), source, cand, io.BytesIO(data), plan.result_uri, plan.file_uris,
                         lambda u: open(local(u), "rb"))


def test_the_verifier_accepts_the_plan(heavy):
    model, plan = _planned(heavy)
    _verify(heavy, model, plan, plan.model)


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_the_verifier_refuses_a_damaged_new_file(heavy, damage):
    model, plan = _planned(heavy)
    victim = local(sorted(plan.file_uris)[len(plan.files) // 2])
    data = bytearray(victim.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x01
    else:
        data = data[:-1]
    victim.write_bytes(bytes(data))
    with pytest.raises(CompactionVerifyError, match="does not hold its inline payload"):
        _verify(heavy, model, plan, plan.model)


def test_the_verifier_refuses_a_changed_key_group_range(heavy):
    model, plan = _planned(heavy)
    # A field of a keyed handle, not a handle itself: only the model comparison can catch it.
    ops = list(plan.model.operators)
    i, op = next((i, op) for i, op in enumerate(ops)
                 if any(type(st.managed_keyed) is IncrementalKeyedHandle for st in op.subtasks))
    j, st = next((j, st) for j, st in enumerate(op.subtasks) if type(st.managed_keyed) is IncrementalKeyedHandle)
    subs = list(op.subtasks)
    subs[j] = dataclasses.replace(st, managed_keyed=dataclasses.replace(
        st.managed_keyed, key_group_start=st.managed_keyed.key_group_start + 1))
    ops[i] = dataclasses.replace(op, subtasks=tuple(subs))
    tampered = dataclasses.replace(plan.model, operators=tuple(ops))
    with pytest.raises(CompactionVerifyError, match="outside the moved handles"):
        _verify(heavy, model, plan, tampered)


def test_the_verifier_refuses_a_payload_pointed_at_the_wrong_file(heavy):
    model, plan = _planned(heavy)
    # swap the targets of two moved payloads of different content
    a, b = plan.files[0], plan.files[1]
    assert a.payload.read(heavy) != b.payload.read(heavy)
    swapped = {a.name: b.name, b.name: a.name}

    def swap(site, role, name, node):
        if type(node) is RelativeFileHandle and node.relative_path in swapped:
            return RelativeFileHandle(swapped[node.relative_path], node.size)
        return node

    with pytest.raises(CompactionVerifyError):
        _verify(heavy, model, plan, transform(plan.model, swap))

"""Pure chain logic: where a referenced file lives, how it relates to its snapshot, and lineage."""
from __future__ import annotations

import pyarrow as pa
import pytest

from statekeeper.chains import graph
from statekeeper.layout.locate import (
    annotate,
    job_location,
    lineage_nodes,
    location_job_dir,
    parent_dir,
    relation_of,
    target_of,
    unit_kind,
)
from statekeeper.storage.roots import root_id_of
from statekeeper.tables.vocabulary import Relation, TargetKind, UnitKind

ROOT = "s3://b/ckpt"
SP_ROOT = "s3://b/sp"
A = "a" * 32
B = "b" * 32
SP = "savepoint-aaaaaa-0123456789ab"


def meta(*parts: str, root: str = ROOT) -> str:
    return "/".join((root, *parts, "_metadata"))


def test_job_location_and_flat_layouts():
    assert job_location(ROOT, A) == f"{ROOT}/{A}"
    for flat in ("chk-12", "shared", "taskowned", "."):
        assert job_location(ROOT, flat) == ROOT
        assert location_job_dir(flat) == "."
    assert location_job_dir(A) == A
    assert unit_kind(A) == UnitKind.JOB and unit_kind("shared") == UnitKind.JOB and unit_kind(SP) == UnitKind.SAVEPOINT
    assert unit_kind("my-backup") == UnitKind.DIRECTORY


@pytest.mark.parametrize("file_uri, root, job_dir, parent, parent_type, kind, uri, job", [
    # shared/ and taskowned/ belong to the job
    (f"{ROOT}/{A}/shared/x", ROOT, A, None, None, TargetKind.JOB, f"{ROOT}/{A}", A),
    (f"{ROOT}/{A}/taskowned/job_x_tm_y/z", ROOT, A, None, None, TargetKind.JOB, f"{ROOT}/{A}", A),
    # a file beside an indexed _metadata belongs to that snapshot
    (f"{ROOT}/{A}/chk-4/x", ROOT, A, meta(A, "chk-4"), "checkpoint", TargetKind.CHECKPOINT, f"{ROOT}/{A}/chk-4", A),
    (f"{SP_ROOT}/{SP}/x", SP_ROOT, SP, meta(SP, root=SP_ROOT), "savepoint", TargetKind.SAVEPOINT, f"{SP_ROOT}/{SP}", "."),
    # a chk-N whose _metadata is gone (subsumed) is just part of the job
    (f"{ROOT}/{A}/chk-1/x", ROOT, A, None, None, TargetKind.JOB, f"{ROOT}/{A}", A),
    # a savepoint-named directory without an indexed _metadata is still a savepoint
    (f"{SP_ROOT}/{SP}/x", SP_ROOT, SP, None, None, TargetKind.SAVEPOINT, f"{SP_ROOT}/{SP}", "."),
    (f"{SP_ROOT}/backup-1/x", SP_ROOT, "backup-1", None, None, TargetKind.DIRECTORY, f"{SP_ROOT}/backup-1", "."),
    # create-subdir=false: the root plays the job
    (f"{ROOT}/shared/x", ROOT, "shared", None, None, TargetKind.JOB, ROOT, "."),
])
def test_target_of(file_uri, root, job_dir, parent, parent_type, kind, uri, job):
    job_id = A if job == A else None
    t = target_of(file_uri, root, job_dir, job_id, parent, parent_type)
    assert (t.kind, t.uri, t.snapshot_uri, t.root) == (kind, uri, parent, root)
    assert t.root_id == root_id_of(root)
    assert t.job_dir == location_job_dir(job_dir)


def test_external_target_is_the_parent_directory():
    t = target_of("s3://other/entropy/ab12/x", None, None, None, None, None)
    assert (t.kind, t.uri, t.root, t.root_id, t.job_dir) == (TargetKind.EXTERNAL, "s3://other/entropy/ab12", None, "external", ".")


def test_relations():
    s = meta(B, "chk-6")
    own_shared = target_of(f"{ROOT}/{B}/shared/x", ROOT, B, B, None, None)
    own_chk = target_of(f"{ROOT}/{B}/chk-6/x", ROOT, B, B, s, "checkpoint")
    older_chk = target_of(f"{ROOT}/{B}/chk-5/x", ROOT, B, B, meta(B, "chk-5"), "checkpoint")
    other = target_of(f"{ROOT}/{A}/shared/x", ROOT, A, A, None, None)
    other_chk = target_of(f"{ROOT}/{A}/chk-4/x", ROOT, A, A, meta(A, "chk-4"), "checkpoint")
    sp = target_of(f"{SP_ROOT}/{SP}/x", SP_ROOT, SP, None, meta(SP, root=SP_ROOT), "savepoint")
    ext = target_of("s3://x/y/z", None, None, None, None, None)
    assert relation_of(s, ROOT, B, own_chk) == Relation.SELF
    assert relation_of(s, ROOT, B, own_shared) == Relation.OWN_JOB
    assert relation_of(s, ROOT, B, older_chk) == Relation.OWN_JOB
    assert relation_of(s, ROOT, B, other) == Relation.OTHER_JOB
    assert relation_of(s, ROOT, B, other_chk) == Relation.OTHER_JOB
    assert relation_of(s, ROOT, B, sp) == "savepoint"
    assert relation_of(s, ROOT, B, ext) == "external"
    # a savepoint's own files are its own directory, whatever the savepoint directory is called
    assert relation_of(meta(SP, root=SP_ROOT), SP_ROOT, SP, sp) == Relation.SELF
    # flat layout: chk-N and shared/ directly in the root are one job
    flat_shared = target_of(f"{ROOT}/shared/x", ROOT, "shared", None, None, None)
    assert relation_of(f"{ROOT}/chk-3/_metadata", ROOT, "chk-3", flat_shared) == Relation.OWN_JOB
    assert lineage_nodes(f"{ROOT}/chk-3/_metadata", ROOT, "chk-3") == (f"{ROOT}/chk-3", ROOT)
    assert lineage_nodes(meta(SP, root=SP_ROOT), SP_ROOT, SP) == (f"{SP_ROOT}/{SP}",)


def test_annotate_matches_the_scalar_rules():
    rows = [
        (meta(B, "chk-6"), ROOT, B, f"{ROOT}/{A}/shared/1", ROOT, A, A, None, None),
        (meta(B, "chk-6"), ROOT, B, f"{ROOT}/{A}/shared/2", ROOT, A, A, None, None),
        (meta(B, "chk-6"), ROOT, B, f"{ROOT}/{B}/chk-6/3", ROOT, B, B, meta(B, "chk-6"), "checkpoint"),
        (meta(B, "chk-6"), ROOT, B, "s3://far/away/4", None, None, None, None, None),
    ]
    cols = ("snapshot_uri", "root", "job_dir", "file_dir", "file_root", "file_job_dir", "file_job_id",
            "parent_snapshot_uri", "parent_snapshot_type")
    table = pa.table({c: [parent_dir(r[i]) if c == "file_dir" else r[i] for r in rows] for i, c in enumerate(cols)})
    out = annotate(table).to_pylist()
    assert [r["relation"] for r in out] == [Relation.OTHER_JOB, Relation.OTHER_JOB, Relation.SELF, "external"]
    assert [r["target_uri"] for r in out] == [f"{ROOT}/{A}", f"{ROOT}/{A}", f"{ROOT}/{B}/chk-6", "s3://far/away"]
    assert {r["snapshot_dir"] for r in out} == {f"{ROOT}/{B}/chk-6"}
    assert {r["snapshot_job_location"] for r in out} == {f"{ROOT}/{B}"}
    assert out[0]["target_job_location"] == f"{ROOT}/{A}" and out[3]["target_job_location"] is None


def test_annotate_decides_every_row_as_the_scalar_rules_do():
    # annotate decides each distinct directory, snapshot and (snapshot, target) pair once and indexes the rows
    # into them: every row must still get what the scalar rules give each of its files, nulls and repeats
    # included, whatever the table's chunks.
    snapshots = [(meta(B, "chk-6"), ROOT, B), (meta(A, "chk-4"), ROOT, A), (meta(SP, root=SP_ROOT), SP_ROOT, SP),
                 (f"{ROOT}/chk-3/_metadata", ROOT, "chk-3")]
    files = [(f"{ROOT}/{A}/shared/{n}", ROOT, A, A, None, None) for n in range(3)]
    files += [(f"{ROOT}/{B}/chk-6/x", ROOT, B, B, meta(B, "chk-6"), "checkpoint"),
              (f"{ROOT}/{B}/chk-6/y", ROOT, B, B, None, None),            # the same directory, no parent snapshot
              (f"{ROOT}/{A}/chk-4/x", ROOT, A, A, meta(A, "chk-4"), "checkpoint"),
              (f"{SP_ROOT}/{SP}/d", SP_ROOT, SP, None, meta(SP, root=SP_ROOT), "savepoint"),
              (f"{SP_ROOT}/backup-1/d", SP_ROOT, "backup-1", None, None, None),
              (f"{ROOT}/shared/z", ROOT, "shared", None, None, None),
              ("s3://far/away/4", None, None, None, None, None), ("s3://far/away/5", None, None, None, None, None),
              ("file:///mnt/other/x", None, None, None, None, None)]
    rows = [(*s, *f) for i, s in enumerate(snapshots) for j, f in enumerate(files) if (i + j) % 3 != 1] * 2
    cols = ("snapshot_uri", "root", "job_dir", "file_dir", "file_root", "file_job_dir", "file_job_id",
            "parent_snapshot_uri", "parent_snapshot_type")
    whole = pa.table({c: pa.array([parent_dir(r[i]) if c == "file_dir" else r[i] for r in rows], pa.string())
                      for i, c in enumerate(cols)})
    chunked = pa.Table.from_batches(whole.to_batches(max_chunksize=7))
    for table in (whole, chunked, whole.to_batches()[0]):
        out = annotate(table).to_pylist()
        assert len(out) == len(rows)
        for row, got in zip(rows, out, strict=True):
            s_uri, s_root, s_job = row[:3]
            t = target_of(*row[3:])
            expected = {"target_kind": t.kind, "target_uri": t.uri, "target_snapshot_uri": t.snapshot_uri,
                        "target_root": t.root, "target_root_id": t.root_id, "target_job_dir": t.job_dir,
                        "target_job_id": t.job_id,
                        "target_job_location": None if t.root is None else job_location(t.root, t.job_dir),
                        "relation": relation_of(s_uri, s_root, s_job, t), "snapshot_dir": s_uri[:-len("/_metadata")],
                        "snapshot_job_location": job_location(s_root, s_job)}
            assert {k: got[k] for k in expected} == expected, row
            assert got["file_dir"] == parent_dir(row[3]) and got["snapshot_uri"] == s_uri
    empty = annotate(whole.slice(0, 0))
    assert empty.num_rows == 0 and empty.schema.names[len(cols):] == list(expected)
    with pytest.raises(ValueError, match="not a _metadata URI"):
        annotate(whole.set_column(0, "snapshot_uri", pa.array([f"{ROOT}/x"] * len(rows))))
    # an external file whose URI had no parent (the Spark side computes an empty directory) is refused
    with pytest.raises(ValueError, match="not the parent directory of a file"):
        annotate(whole.set_column(3, "file_dir", pa.array([""] * len(rows))))


# -- lineage --------------------------------------------------------------------------------------

def edge(snapshot: str, job: str, target: str, foreign: bool = True) -> graph.DirectEdge:
    return graph.DirectEdge(snapshot, (f"{snapshot}-dir", job), target, foreign)


def test_lineage_of_a_restore_chain():
    # C's checkpoint uses B's files only; B's checkpoints use A's; A uses its own job.
    edges = [edge("A1", "A", "A", foreign=False),
             edge("B1", "B", "A"), edge("B1", "B", "B", foreign=False),
             edge("C1", "C", "B"), edge("C1", "C", "C", foreign=False)]
    assert graph.lineage(edges) == [graph.Lineage("C1", "A", 2, ("B",))]


def test_direct_dependency_wins_and_cycles_terminate():
    edges = [edge("C1", "C", "B"), edge("C1", "C", "A"), edge("B1", "B", "A"),
             # A was restored from C at some point (a cycle through job directories)
             edge("A1", "A", "C")]
    rows = {(r.snapshot_uri, r.target_uri): (r.depth, r.via) for r in graph.lineage(edges)}
    assert ("C1", "A") not in rows            # direct
    assert ("C1", "C") not in rows            # its own job
    assert rows[("B1", "C")] == (2, ("A",))
    assert rows[("A1", "B")] == (2, ("C",))
    assert ("A1", "A") not in rows            # back to its own job through the cycle


def test_shortest_then_smallest_path():
    edges = [edge("S", "J", "X"), edge("S", "J", "Y"), edge("X1", "X", "Z"), edge("Y1", "Y", "Z"),
             edge("Z1", "Z", "T"), edge("X1", "X", "T2"), edge("T21", "T2", "T")]
    rows = {(r.snapshot_uri, r.target_uri): (r.depth, r.via) for r in graph.lineage(edges)}
    assert rows[("S", "Z")] == (2, ("X",))          # X < Y
    assert rows[("S", "T")] == (3, ("X", "T2"))     # both length 3: ("X","T2") < ("X","Z")
    assert rows[("S", "T2")] == (2, ("X",))

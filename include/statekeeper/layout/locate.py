"""Where a referenced file lives, relative to the snapshot that references it. Pure functions.

A referenced file belongs to exactly one *target*, the directory whose owner keeps it alive:

* ``checkpoint`` / ``savepoint`` - the file sits directly in an indexed snapshot's directory
  (`<job>/chk-N/`, `savepoint-*/`): its owner is that snapshot;
* ``job``       - anywhere else below a job directory (`shared/`, `taskowned/`, a chk-N whose
  `_metadata` is gone): its owner is the job (for roots written with create-subdir=false the
  root itself plays the job);
* ``savepoint`` - below a savepoint-named directory without an indexed `_metadata`;
* ``directory`` - below any other top-level directory of a root (custom snapshot names);
* ``external``  - outside every indexed root (entropy injection, a foreign store): its target is
  the file's parent directory.

The *relation* of a target to the referencing snapshot: ``self`` (the snapshot's own directory),
``own_job`` (its own job's shared/taskowned or other chk-N), ``other_job`` (another job's files),
``savepoint`` (a savepoint's files), ``external``. The last three are cross-directory dependencies,
the ones FLINK-24149 is about.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from statekeeper.layout.classify import LocationKind, classify_child, is_flat_checkpoint_dir
from statekeeper.storage.roots import root_id_of
from statekeeper.tables.vocabulary import Relation, SnapshotType, TargetKind, UnitKind
from statekeeper.uri import is_scheme_only

METADATA_SUFFIX = "/_metadata"
# The job_dir of objects directly inside a root (classify_child(None): LocationKind.ROOT_FILES).
ROOT_LEVEL = "."
EXTERNAL_ROOT_ID = "external"


def snapshot_dir(snapshot_uri: str) -> str:
    """The directory of a snapshot, given its `_metadata` URI (normalized)."""
    if not snapshot_uri.endswith(METADATA_SUFFIX):
        raise ValueError(f"not a _metadata URI: {snapshot_uri!r}")
    return snapshot_uri[: -len(METADATA_SUFFIX)]


def parent_dir(uri: str) -> str:
    head, sep, _ = uri.rpartition("/")
    if not sep or is_scheme_only(head):
        raise ValueError(f"{uri!r} has no parent directory")
    return head


def _directory(directory: str | None) -> str:
    """`directory` as a target: what `parent_dir` can answer (a computed parent that is empty or a bare
    scheme means the file's URI had none)."""
    if not directory or is_scheme_only(directory):
        raise ValueError(f"{directory!r} is not the parent directory of a file")
    return directory


def is_flat(job_dir: str) -> bool:
    """True for a root's own files and for chk-N/shared/taskowned written without a job-id level."""
    return job_dir == ROOT_LEVEL or is_flat_checkpoint_dir(job_dir)


def location_job_dir(job_dir: str) -> str:
    """The job directory a unit belongs to: itself, or "." (the root) for flat-layout units."""
    return ROOT_LEVEL if is_flat(job_dir) else job_dir


def job_location(root: str, job_dir: str) -> str:
    """URI of the directory that plays the job for a unit (the root itself for flat layouts)."""
    if is_flat(job_dir):
        return root
    return root.rstrip("/") + "/" + job_dir


@dataclass(frozen=True, slots=True)
class Target:
    kind: str                   # TargetKind
    uri: str                    # a directory URI
    snapshot_uri: str | None    # the `_metadata` of a checkpoint/savepoint target
    root: str | None            # None for external targets
    root_id: str                # partition value ("external" for external targets)
    job_dir: str                # partition value: the job directory, "." for flat layouts/external
    job_id: str | None


def target_of(file_uri: str, file_root: str | None, file_job_dir: str | None, file_job_id: str | None,
              parent_snapshot_uri: str | None, parent_snapshot_type: str | None,
              _root_ids: dict[str, str] | None = None) -> Target:
    """The target a referenced file belongs to.

    `parent_snapshot_*` describe the indexed snapshot whose `_metadata` sits in the file's parent
    directory, if there is one (the caller joins it in; references do not carry it).
    """
    return target_in(parent_dir(file_uri), file_root, file_job_dir, file_job_id, parent_snapshot_uri,
                     parent_snapshot_type, _root_ids)


def target_in(directory: str | None, file_root: str | None, file_job_dir: str | None, file_job_id: str | None,
              parent_snapshot_uri: str | None, parent_snapshot_type: str | None,
              _root_ids: dict[str, str] | None = None) -> Target:
    """The target of the files in `directory` (`parent_dir` of their URIs) that have this root, job and
    parent snapshot: all of them share it, which is what lets the Spark jobs decide it once per directory."""
    if file_root is None or file_job_dir is None:
        return Target(TargetKind.EXTERNAL, _directory(directory), None, None, EXTERNAL_ROOT_ID, ROOT_LEVEL, None)
    if _root_ids is not None:
        rid = _root_ids.get(file_root)
        if rid is None:
            rid = _root_ids[file_root] = root_id_of(file_root)
    else:
        rid = root_id_of(file_root)
    job_dir = location_job_dir(file_job_dir)
    if parent_snapshot_uri is not None:
        kind = TargetKind.SAVEPOINT if parent_snapshot_type == SnapshotType.SAVEPOINT else TargetKind.CHECKPOINT
        return Target(kind, _directory(directory), parent_snapshot_uri, file_root, rid, job_dir, file_job_id)
    child = classify_child(None if file_job_dir == ROOT_LEVEL else file_job_dir)
    if child == LocationKind.SAVEPOINT:
        kind = TargetKind.SAVEPOINT
    elif child == LocationKind.OTHER:
        kind = TargetKind.DIRECTORY
    else:
        kind = TargetKind.JOB
    return Target(kind, job_location(file_root, file_job_dir), None, file_root, rid, job_dir, file_job_id)


def relation_of(snapshot_uri: str, root: str, job_dir: str, target: Target) -> str:
    """How `target` relates to the snapshot `snapshot_uri` (which sits in unit (root, job_dir))."""
    if target.kind == TargetKind.EXTERNAL:
        return Relation.EXTERNAL
    if target.uri == snapshot_dir(snapshot_uri):
        return Relation.SELF
    if target.kind in (TargetKind.JOB, TargetKind.CHECKPOINT) and target.root is not None \
            and job_location(target.root, target.job_dir) == job_location(root, job_dir):
        return Relation.OWN_JOB
    if target.kind == TargetKind.SAVEPOINT:
        return Relation.SAVEPOINT
    return Relation.OTHER_JOB


def lineage_nodes(snapshot_uri: str, root: str, job_dir: str) -> tuple[str, ...]:
    """The target URIs a snapshot is a member of: its own directory and its job location. Lineage
    follows a dependency on a target to the dependencies of the target's member snapshots."""
    own = snapshot_dir(snapshot_uri)
    job = job_location(root, job_dir)
    return (own,) if own == job else (own, job)


# -- vectorized form used by the Spark job (mapInArrow) and `statekeeper explain` ----------------

ANNOTATION_FIELDS = (
    pa.field("target_kind", pa.string()),
    pa.field("target_uri", pa.string()),
    pa.field("target_snapshot_uri", pa.string()),
    pa.field("target_root", pa.string()),
    pa.field("target_root_id", pa.string()),
    pa.field("target_job_dir", pa.string()),
    pa.field("target_job_id", pa.string()),
    pa.field("target_job_location", pa.string()),
    pa.field("relation", pa.string()),
    pa.field("snapshot_dir", pa.string()),
    pa.field("snapshot_job_location", pa.string()),
)
# What a file's target depends on (`target_in`'s arguments): file_dir is the directory holding the file
# (`parent_dir` of its URI).
TARGET_INPUTS = ("file_dir", "file_root", "file_job_dir", "file_job_id", "parent_snapshot_uri", "parent_snapshot_type")
SNAPSHOT_INPUTS = ("snapshot_uri", "root", "job_dir")   # the referencing snapshot and its unit
ANNOTATION_INPUTS = (*SNAPSHOT_INPUTS, *TARGET_INPUTS)


def annotate(table: pa.Table | pa.RecordBatch) -> pa.Table:
    """Append the target and relation columns (and the snapshot's lineage nodes: its directory and
    job location) to rows carrying ANNOTATION_INPUTS.

    The scalar rules above decide every value, each once per distinct input: a target per distinct file
    directory (with the files' root, job and parent snapshot), a snapshot's nodes per distinct snapshot, a
    relation per distinct (snapshot, target) pair; the rows only index into those.
    """
    result = table if isinstance(table, pa.Table) else pa.Table.from_batches([table])
    if result.num_rows == 0:
        for f in ANNOTATION_FIELDS:
            result = result.append_column(f, pa.array([], f.type))
        return result
    cols = {name: result.column(name).combine_chunks() for name in ANNOTATION_INPUTS}
    t_row, t_first = _distinct(*(cols[n] for n in TARGET_INPUTS))
    root_ids: dict[str, str] = {}
    targets = [target_in(*args, root_ids)
               for args in zip(*(cols[n].take(t_first).to_pylist() for n in TARGET_INPUTS), strict=True)]
    s_row, s_first = _distinct(*(cols[n] for n in SNAPSHOT_INPUTS))
    snapshots = list(zip(*(cols[n].take(s_first).to_pylist() for n in SNAPSHOT_INPUTS), strict=True))
    pair = pc.add(pc.multiply(s_row, len(targets)), t_row)
    p_row, p_first = _distinct(pair)
    relations = [relation_of(*snapshots[p // len(targets)], targets[p % len(targets)])
                 for p in pair.take(p_first).to_pylist()]
    per_target = {
        "target_kind": [t.kind for t in targets], "target_uri": [t.uri for t in targets],
        "target_snapshot_uri": [t.snapshot_uri for t in targets], "target_root": [t.root for t in targets],
        "target_root_id": [t.root_id for t in targets], "target_job_dir": [t.job_dir for t in targets],
        "target_job_id": [t.job_id for t in targets],
        "target_job_location": [None if t.root is None else job_location(t.root, t.job_dir) for t in targets]}
    per_snapshot = {"snapshot_dir": [snapshot_dir(s) for s, _, _ in snapshots],
                    "snapshot_job_location": [job_location(r, j) for _, r, j in snapshots]}
    for f in ANNOTATION_FIELDS:
        if f.name in per_target:
            values, rows = per_target[f.name], t_row
        elif f.name in per_snapshot:
            values, rows = per_snapshot[f.name], s_row
        else:
            values, rows = relations, p_row
        result = result.append_column(f, pa.array(values, f.type).take(rows))
    return result


def _distinct(*columns: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Per row, the number of its distinct combination of the columns' values (a null is a value here),
    numbered in order of first appearance; and per combination, the first row that has it."""
    if not columns:
        raise ValueError("_distinct needs at least one column")
    combined = pa.repeat(pa.scalar(0, pa.int64()), len(columns[0]))
    for column in columns:
        codes = pc.add(pc.fill_null(pc.dictionary_encode(column).indices.cast(pa.int64()), -1), 1)
        # both factors are below the row count: no overflow for any batch that fits in memory
        codes = pc.add(pc.multiply(combined, pc.max(codes).as_py() + 1), codes)
        combined = pc.dictionary_encode(codes).indices.cast(pa.int64())
    # index_in answers the first position of each value
    first = pc.index_in(pa.array(range(pc.max(combined).as_py() + 1), pa.int64()), value_set=combined)
    return combined, first


def annotate_batches(batches: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
    """mapInArrow adapter of `annotate`."""
    for batch in batches:
        if batch.num_rows:
            yield from annotate(batch).to_batches()


RELATION_INPUTS = ("snapshot_uri", "root", "job_dir", "target_kind", "target_uri", "target_snapshot_uri",
                   "target_root", "target_root_id", "target_job_dir", "target_job_id")


def relate_batches(batches: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
    """mapInArrow: append `relation` to rows that carry a snapshot and an already located target."""
    for batch in batches:
        if not batch.num_rows:
            continue
        cols = [batch.column(n).to_pylist() for n in RELATION_INPUTS]
        rel = [relation_of(s, r, j, Target(k, u, su, tr, tri, tj, tji))
               for s, r, j, k, u, su, tr, tri, tj, tji in zip(*cols, strict=True)]
        yield batch.append_column(pa.field("relation", pa.string()), pa.array(rel, pa.string()))


def unit_kind(job_dir: str) -> str:
    """What a unit's job directory is, for per-job reports: job, savepoint or directory."""
    if is_flat(job_dir):
        return UnitKind.JOB
    child = classify_child(job_dir)
    if child == LocationKind.SAVEPOINT:
        return UnitKind.SAVEPOINT
    if child == LocationKind.JOB:
        return UnitKind.JOB
    return UnitKind.DIRECTORY

"""The consistent cut of the index tables: what readers read and what the index repairs to.

Delta has no multi-table transactions, so the index commits `files`, `snapshots`, `references` and
`inline_state` one after another and only then appends its `index_runs` row, which names the
version of each table it committed (`table_versions`). That row is the commit point of the run:

* readers (chains, validation, explain, GC) read every index table at the versions named by the
  newest `succeeded` row, never at the tables' latest versions, so a run that died between two
  table commits is invisible to them;
* the index itself starts by comparing each table's latest version with the newest audited run
  (`succeeded` or `partial`: both committed all tables) and restores any table that is ahead of
  it (`delta_log.restore`) before planning. Unchanged storage therefore never "blesses" a torn
  state: the rows of the dead run are gone from the latest version and are rebuilt from storage.
  Commits that keep the rows (compaction and vacuum by `statekeeper.tables.maintenance`) do not
  put a table ahead in this sense.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from statekeeper.tables import delta_log
from statekeeper.tables.errors import CutError, NoCutError
from statekeeper.tables.spec import TableSpec
from statekeeper.tables.vocabulary import IndexRunStatus, SnapshotStatus
from statekeeper.tables.warehouse import Warehouse

log = logging.getLogger("statekeeper.tables")

AUDIT_TABLE = "index_runs"
# Runs whose table commits all landed before their audit row: a base the index may build on.
COMMITTED = (IndexRunStatus.SUCCEEDED, IndexRunStatus.PARTIAL)
# Audit rows are one data file per run: read the newest few files first and stop at a match.
_FILES_PER_READ = 8


@dataclass(frozen=True)
class IndexCut:
    """The index tables at the versions one audited run committed."""

    run_id: str
    status: str
    finished_at: datetime
    versions: dict[str, int] = field(default_factory=dict)
    roots: tuple[str, ...] = ()     # the roots the run indexed
    objects: int = 0                # the objects it listed below them

    def version(self, table: str) -> int | None:
        return self.versions.get(table)


@dataclass(frozen=True)
class Repair:
    """One index table restored to the newest audited cut before a run planned."""

    table: str
    from_version: int
    to_version: int | None          # the cut's version; None: the table had no audited version
    committed_version: int | None   # the restore commit (None: the state was already equal)

    def describe(self) -> str:
        target = "empty" if self.to_version is None else f"version {self.to_version}"
        return f"{self.table}: v{self.from_version} restored to {target}"


def latest_cut(warehouse: Warehouse, statuses: Iterable[str] = (IndexRunStatus.SUCCEEDED,)) -> IndexCut | None:
    """The newest audited run with one of `statuses`, or None (no such run, or no audit table)."""
    from statekeeper.tables.catalog import INDEX_RUNS
    from statekeeper.tables.files import read_data_file

    wanted = set(statuses)
    state = delta_log.load_state(warehouse, AUDIT_TABLE)
    if state is None:
        return None
    io_ = warehouse.file_io()
    files = sorted(state.files, key=lambda f: (f.modification_time, f.path), reverse=True)
    best: dict[str, Any] | None = None
    columns = ["run_id", "status", "finished_at", "table_versions", "roots", "objects_listed"]
    for start in range(0, len(files), _FILES_PER_READ):
        for f in files[start:start + _FILES_PER_READ]:
            table = read_data_file(warehouse, INDEX_RUNS.schema, (), f.path, {}, fileio=io_,
                                   table_name=AUDIT_TABLE, columns=columns)
            for row in table.to_pylist():
                if row["status"] in wanted and row["table_versions"] and (
                        best is None or row["finished_at"] > best["finished_at"]):
                    best = row
        if best is not None:
            break  # files are newest first: a later batch cannot hold a newer run
    if best is None:
        return None
    return IndexCut(best["run_id"], best["status"], best["finished_at"], dict(best["table_versions"]),
                    tuple(best["roots"] or ()), int(best["objects_listed"] or 0))


def pin_cut(warehouse: Warehouse, names: Iterable[str]) -> tuple[IndexCut, dict[str, int]]:
    """The newest succeeded cut and the versions of `names` in it, checked to exist.

    Raises NoCutError (a configuration error: run the index first) when no index run has
    succeeded, CutError when the cut names a version the table does not have."""
    cut = latest_cut(warehouse)
    if cut is None:
        raise NoCutError(
            f"warehouse {warehouse.uri} has no succeeded index run: run index_checkpoints first")
    versions: dict[str, int] = {}
    missing = []
    for name in names:
        version = cut.version(name)
        if version is None:
            missing.append(name)
            continue
        latest = delta_log.latest_version(warehouse, name)
        if latest is None or latest < version:
            raise CutError(
                f"index run {cut.run_id} names {name} version {version}, but the table is at "
                f"{'no version' if latest is None else f'version {latest}'}: the warehouse was altered "
                "outside Statekeeper; re-run index_checkpoints")
        versions[name] = version
    if missing:
        raise NoCutError(
            f"the newest succeeded index run {cut.run_id} of {warehouse.uri} has no version of "
            f"{', '.join(missing)}: run index_checkpoints against it")
    return cut, versions


def heal(warehouse: Warehouse, specs: Iterable[TableSpec], run_id: str) -> tuple[IndexCut | None, list[Repair]]:
    """Restore every table of `specs` that is ahead of the newest audited run to that run's version
    (to no files when no audited run names it). A table ahead only by commits that keep its rows
    (compaction and vacuum by warehouse maintenance) is not torn and stays as it is. Returns the
    cut healed to and what was restored."""
    cut = latest_cut(warehouse, COMMITTED)
    repairs: list[Repair] = []
    for spec in specs:
        latest = delta_log.latest_version(warehouse, spec.name)
        if latest is None:
            continue
        target = None if cut is None else cut.version(spec.name)
        if target is not None and latest <= target:
            continue
        if target is not None and not delta_log.rows_changed_since(warehouse, spec.name, target):
            continue  # ahead only by compaction / vacuum commits (warehouse maintenance): same rows
        outcome = delta_log.restore(
            warehouse, spec, target, expected_version=latest,
            metadata={"statekeeper.runId": run_id, "statekeeper.operation": "restore_cut",
                      "statekeeper.restoredTo": -1 if target is None else target,
                      "statekeeper.cutRunId": "" if cut is None else cut.run_id})
        repair = Repair(spec.name, latest, target, outcome.version)
        log.warning("index table %s was ahead of the last audited run %s (a run died between its table "
                    "commits or before its audit row): %s", warehouse.table_uri(spec.name),
                    "none" if cut is None else cut.run_id, repair.describe())
        repairs.append(repair)
    return cut, repairs


def behind(sources: dict[str, int], versions: dict[str, int | None]) -> list[str]:
    """The tables a derived table was computed from (`sources`, its producer's audit row) at other
    versions than `versions` (the cut now read), as "name vS (now vV)"."""
    return [f"{name} v{sources[name]} (now v{v})" for name, v in versions.items()
            if v is not None and sources.get(name) is not None and sources[name] != v]


def reference_count_mismatches(snapshots: Any, references: Any, limit: int = 5) -> list[str]:
    """Snapshots of a cut whose `reference_count` differs from their rows in `references` (Spark
    DataFrames of the same cut). Empty for a consistent cut; a grouped count and a join, no collect of rows
    beyond `limit` examples."""
    from pyspark.sql import functions as F

    counted = references.groupBy("snapshot_uri").agg(F.count(F.lit(1)).alias("rows"))
    expected = (snapshots.where(F.col("status") == SnapshotStatus.OK)
                .select(F.col("uri").alias("snapshot_uri"), F.coalesce("reference_count", F.lit(0)).alias("stated")))
    bad = (expected.join(counted, "snapshot_uri", "full_outer")
           .where(F.coalesce("stated", F.lit(-1)) != F.coalesce("rows", F.lit(0)))
           .orderBy("snapshot_uri").limit(limit).collect())
    return [f"{r['snapshot_uri']}: reference_count {r['stated']}, rows {r['rows'] or 0}" for r in bad]

"""Pinned reads of a job's input tables.

A job reads every index table at the version the newest succeeded index run committed
(`statekeeper.tables.cut`), never at the tables' latest versions: an index run that died between
two table commits is invisible, and a concurrent index run cannot hand it half-old, half-new
tables. Before any work the cut is checked for consistency (every parsed snapshot's references
are all there). The versions go into the run's audit row and its commits' metadata.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from statekeeper.tables import cut, delta_log
from statekeeper.tables.engine import TableEngine
from statekeeper.tables.errors import CutError
from statekeeper.tables.warehouse import Warehouse


@dataclass(frozen=True)
class PinnedInputs:
    """The versions a run reads: index tables from the cut, optional derived tables as found."""

    versions: dict[str, int]              # required index tables, from the newest succeeded cut
    optional: dict[str, int]              # optional tables present in the warehouse
    stale: tuple[str, ...] = ()           # optional derived tables computed from another index cut

    def read(self, spark: Any, engine: TableEngine, warehouse: Warehouse, *,
             optional: bool = False) -> dict[str, Any]:
        """DataFrames of the required (or the optional) tables at their pinned versions."""
        pinned = self.optional if optional else self.versions
        return {name: engine.read(spark, warehouse, name, version=version) for name, version in pinned.items()}


def pin_inputs(warehouse: Warehouse, index_tables: tuple[str, ...],
               optional: tuple[str, ...] = ()) -> PinnedInputs:
    """Pin the index tables `index_tables` to the newest succeeded index run (NoCutError, a
    configuration error, when there is none). Optional index tables come from the same cut;
    optional derived tables (written by other jobs) are read at their latest version when present."""
    from statekeeper.tables.catalog import INDEX_TABLES

    index_cut, versions = cut.pin_cut(warehouse, index_tables)
    index_names = {spec.name for spec in INDEX_TABLES}
    found: dict[str, int] = {}
    for name in optional:
        version = (index_cut.version(name) if name in index_names
                   else delta_log.latest_version(warehouse, name))
        if version is not None:
            found[name] = version
    derived = [name for name in found if name not in index_names]
    return PinnedInputs(versions, found, _stale(warehouse, derived, versions))


def _stale(warehouse: Warehouse, derived: list[str], versions: dict[str, int]) -> tuple[str, ...]:
    """Derived tables whose producer's newest run read other index versions than `versions`
    (its audit row's `source_versions`): what they say may miss the newest snapshots."""
    from statekeeper.jobs.registry import job
    from statekeeper.tables.catalog import spec
    from statekeeper.tables.reader import TableReader

    reader = TableReader(warehouse)
    newest: dict[str, dict[str, Any] | None] = {}   # one read per producer's audit table
    found: list[str] = []
    for name in derived:
        audit = job(spec(name).producer).audit_table
        if audit not in newest:
            newest[audit] = reader.newest(audit, columns=["source_versions"])
        run = newest[audit]
        if run is None:
            found.append(f"{name} (no {audit} row)")
        elif behind := cut.behind(dict(run["source_versions"] or []), versions):
            found.append(f"{name} ({', '.join(behind)})")
    return tuple(found)


def check_consistent(snapshots: Any, references: Any, versions: dict[str, int]) -> None:
    """Refuse to work from a cut whose `references` do not hold every parsed snapshot's references
    (what a torn cut looks like): one grouped count joined to the snapshots, over the pinned DataFrames."""
    bad = cut.reference_count_mismatches(snapshots, references)
    if bad:
        raise CutError(
            f"the index tables at versions {versions} are not a consistent cut: {'; '.join(bad)}. "
            "Re-run index_checkpoints (it repairs a torn cut) and then this job")

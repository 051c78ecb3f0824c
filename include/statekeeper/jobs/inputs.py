"""Pinned reads of a job's input tables.

A job reads every index table at the version the newest succeeded index run committed
(`statekeeper.tables.cut`), never at the tables' latest versions: an index run that died between
two table commits is invisible, and a concurrent index run cannot hand it half-old, half-new
tables. Before any work the cut is checked for consistency (every parsed snapshot's references
are all there). The versions go into the run's audit row and its commits' metadata.

What every job derives from the cut lives here too, computed once: the roots it covers, and
whether the derived tables a job needs are there and were computed from this very cut.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from statekeeper.tables import cut, delta_log
from statekeeper.tables.cut import IndexCut
from statekeeper.tables.delta_spark import DeltaSparkEngine as TableEngine
from statekeeper.tables.errors import CutError
from statekeeper.tables.warehouse import Warehouse


# What validation writes from a cut: the verdicts the action jobs (compaction, DR copy) select by.
VALIDATION_TABLES = ("validation_results", "validation_jobs")


@dataclass(frozen=True)
class PinnedInputs:
    """The versions a run reads: index tables from the cut, optional derived tables as found."""

    cut: IndexCut                         # the newest succeeded index run: its id, time, versions and roots
    versions: dict[str, int]              # required index tables, from the newest succeeded cut
    optional: dict[str, int]              # optional tables present in the warehouse
    stale: tuple[str, ...] = ()           # optional derived tables computed from another index cut

    @property
    def roots(self) -> list[str]:
        """The roots the cut covers (what the index run was given), sorted."""
        return sorted(self.cut.roots)

    def require_validation(self, warehouse: Warehouse, *, because: str, then: str) -> None:
        """Refuse (CutError) unless the validation tables (optional sources of the job) are present and
        were computed from this cut: a job that acts on validation's verdicts must not act on a verdict
        about another index state. `because` says why the job needs them, `then` names the job."""
        missing = [t for t in VALIDATION_TABLES if t not in self.optional]
        if missing:
            raise CutError(f"{warehouse.uri} has no {', '.join(missing)}: run validate_checkpoints first ({because})")
        if self.stale:
            raise CutError(f"the validation tables were computed from an older index run ({', '.join(self.stale)}):"
                           f" run validate_checkpoints, then {then}")

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
    return PinnedInputs(index_cut, versions, found, _stale(warehouse, derived, versions))


def _stale(warehouse: Warehouse, derived: list[str], versions: dict[str, int]) -> tuple[str, ...]:
    """Derived tables whose producer's newest run read other index versions than `versions`
    (its audit row's `source_versions`): what they say may miss the newest snapshots."""
    from statekeeper.registry import job
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

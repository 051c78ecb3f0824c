"""Reading the index tables a downstream job works from: the consistent cut, pinned.

A run reads every index table at the version the newest succeeded index run committed
(`statekeeper.tables.cut`), never at the tables' latest versions: an index run that died between
two table commits is invisible, and a concurrent index run cannot hand it half-old, half-new
tables. The versions go into the run's audit row.
"""
from __future__ import annotations

from typing import Any

from statekeeper.tables import cut
from statekeeper.tables.errors import CutError
from statekeeper.tables.warehouse import Warehouse


def pin_versions(warehouse: Warehouse, names: tuple[str, ...]) -> dict[str, int]:
    """Versions of the index tables `names` in the newest succeeded index run (NoCutError, a
    configuration error, when there is none)."""
    _, versions = cut.pin_cut(warehouse, names)
    return versions


def read_pinned(spark: Any, engine: Any, warehouse: Warehouse, versions: dict[str, int]) -> dict[str, Any]:
    """DataFrames of the tables at the pinned versions."""
    return {name: engine.read(spark, warehouse, name, version=version) for name, version in versions.items()}


def check_consistent(snapshots: Any, references: Any, versions: dict[str, int]) -> None:
    """Refuse to work from a cut whose `references` do not hold every parsed snapshot's references
    (what a torn cut looks like): one grouped count joined to the snapshots, over the pinned DataFrames."""
    bad = cut.reference_count_mismatches(snapshots, references)
    if bad:
        raise CutError(
            f"the index tables at versions {versions} are not a consistent cut: {'; '.join(bad)}. "
            "Re-run index_checkpoints (it repairs a torn cut) and then this job")

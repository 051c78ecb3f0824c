"""Reading the index tables a downstream job works from, pinned to one version each.

A run reads every input at the version it saw when it started, so a concurrent index run cannot
hand it half-old, half-new tables; the versions go into the run's audit row.
"""
from __future__ import annotations

from typing import Any

from statekeeper.chains.errors import MissingTableError
from statekeeper.tables import delta_log
from statekeeper.tables.warehouse import Warehouse


def pin_versions(warehouse: Warehouse, names: tuple[str, ...], producer: str = "index_checkpoints") -> dict[str, int]:
    """Latest version of each table; MissingTableError names the job that creates a missing one."""
    versions: dict[str, int] = {}
    missing = []
    for name in names:
        version = delta_log.latest_version(warehouse, name)
        if version is None:
            missing.append(name)
        else:
            versions[name] = version
    if missing:
        raise MissingTableError(
            f"warehouse {warehouse.uri} has no table(s) {', '.join(missing)}: run {producer} against it first")
    return versions


def read_pinned(spark: Any, engine: Any, warehouse: Warehouse, versions: dict[str, int]) -> dict[str, Any]:
    """DataFrames of the tables at the pinned versions."""
    return {name: engine.read(spark, warehouse, name, version=version) for name, version in versions.items()}

"""What a single-table write commits against, fixed before any data file is written.

Both writers of a table (the `statekeeper_delta` data source and Spark's own parquet writer for local
warehouses, `statekeeper.tables.parquet_write`) plan here: the version read, the files the write removes,
and whether the commit must be strict against that version.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from statekeeper.tables import delta_log
from statekeeper.tables.errors import ConcurrentCommitError, TableError
from statekeeper.tables.files import DataFile
from statekeeper.tables.spec import TableSpec
from statekeeper.tables.warehouse import Warehouse

MODES = ("append", "overwrite", "replace_partitions")


@dataclass(frozen=True)
class WritePlan:
    spec: TableSpec
    read_version: int | None
    removes: tuple[DataFile, ...]
    strict: bool


def plan_write(warehouse: Warehouse, spec: TableSpec, mode: str, *, replace: list[dict[str, Any]] | None = None,
               expected_version: int | None = None, declared: bool = True) -> WritePlan:
    """The plan of writing `spec`'s rows with `mode`. `declared`: `spec` is the catalog's (an existing table
    gains its trailing columns and must match it); otherwise an existing table's own schema is written."""
    name = spec.name
    state = delta_log.load_state(warehouse, name)
    if state is not None:
        if not declared:
            spec = TableSpec(name, state.schema, state.partition_by)
        state = delta_log.add_missing_columns(warehouse, state, spec)
        delta_log.check_compatible(state, spec)
    if expected_version is not None:
        current = None if state is None else state.version
        if current != expected_version:
            raise ConcurrentCommitError(warehouse.table_uri(name), expected_version, current,
                                        "the table moved before the write started")
    removes: tuple[DataFile, ...] = ()
    if mode == "overwrite" and state is not None:
        removes = state.files
    elif mode == "replace_partitions":
        if not spec.partition_by:
            raise TableError(f"replace_partitions on unpartitioned table {name}")
        keys = {tuple(str(p[c]) for c in spec.partition_by) for p in replace or []}
        if state is not None:
            removes = tuple(f for f in state.files if f.partition_key(spec.partition_by) in keys)
    elif mode not in MODES:
        raise TableError(f"unknown write mode {mode!r} (append, overwrite, replace_partitions)")
    # Plain appends commute; anything that removes files must not race another writer.
    strict = mode != "append" or expected_version is not None
    return WritePlan(spec, None if state is None else state.version, removes, strict)

"""Driver-side half of a Delta write through delta-rs: read table state, commit once, roll back.

Every commit is optimistic against the version the writer planned with. In strict mode any commit
by someone else in between fails the write (ConcurrentCommitError) and its files are removed:
appends that "commute" for Delta (two runs both adding the same new job partition) would
otherwise duplicate rows.
"""
from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from statekeeper.storage import DeleteReport
from statekeeper.tables.errors import ConcurrentCommitError, TableError, TableSchemaError, UnsupportedTableError
from statekeeper.tables.files import DataFile
from statekeeper.tables.spec import TableSpec, same_shape
from statekeeper.tables.warehouse import Warehouse
from statekeeper.uri import join_uri

COMMIT_ID_KEY = "statekeeper.commitId"


@dataclass(frozen=True)
class TableState:
    """A table at one version: schema, partitioning and its live data files."""

    uri: str
    version: int
    schema: pa.Schema
    partition_by: tuple[str, ...]
    files: tuple[DataFile, ...]

    def files_by_partition(self) -> dict[tuple[str, ...], list[DataFile]]:
        grouped: dict[tuple[str, ...], list[DataFile]] = {}
        for f in self.files:
            grouped.setdefault(f.partition_key(self.partition_by), []).append(f)
        return grouped


@dataclass(frozen=True)
class CommitResult:
    table: str
    version: int | None            # None when there was nothing to commit
    files_added: int = 0
    files_removed: int = 0
    rows_added: int = 0

    def to_mapping(self) -> dict[str, Any]:
        return {"table": self.table, "version": self.version, "files_added": self.files_added,
                "files_removed": self.files_removed, "rows_added": self.rows_added}


def _deltalake() -> Any:
    import deltalake  # noqa: F401 - imported lazily: never initialise delta-rs in forked workers

    return deltalake


def table_exists(warehouse: Warehouse, name: str) -> bool:
    dl = _deltalake()
    return bool(dl.DeltaTable.is_deltatable(warehouse.delta_location(name), storage_options=warehouse.storage_options()))


def open_table(warehouse: Warehouse, name: str, version: int | None = None) -> Any:
    dl = _deltalake()
    try:
        return dl.DeltaTable(warehouse.delta_location(name), version=version,
                             storage_options=warehouse.storage_options())
    except dl.exceptions.TableNotFoundError as exc:
        raise TableError(f"Delta table {warehouse.table_uri(name)} does not exist") from exc
    except Exception as exc:  # deltalake raises plain OSError/ValueError/DeltaError for broken logs
        raise TableError(f"cannot open Delta table {warehouse.table_uri(name)}"
                         f"{'' if version is None else f' at version {version}'}: {exc}") from exc


def check_readable(dt: Any, uri: str) -> None:
    protocol = dt.protocol()
    if protocol.min_reader_version > 1 or protocol.reader_features:
        raise UnsupportedTableError(
            f"Delta table {uri} needs reader version {protocol.min_reader_version} "
            f"(features {protocol.reader_features}); Statekeeper's reader supports version 1 tables only"
        )


def load_state(warehouse: Warehouse, name: str, version: int | None = None) -> TableState | None:
    """State of table `name` (latest, or at `version`); None when the table does not exist."""
    if version is None and not table_exists(warehouse, name):
        return None
    dt = open_table(warehouse, name, version)
    uri = warehouse.table_uri(name)
    check_readable(dt, uri)
    partition_by = tuple(dt.metadata().partition_columns)
    actions = pa.table(dt.get_add_actions(flatten=True))
    cols = actions.column_names
    paths = actions.column("path").to_pylist()
    sizes = actions.column("size_bytes").to_pylist()
    mtimes = actions.column("modification_time").to_pylist()
    records = actions.column("num_records").to_pylist() if "num_records" in cols else [None] * len(paths)
    pvalues = {c: actions.column(f"partition.{c}").to_pylist() for c in partition_by}
    files = tuple(
        DataFile(path=unquote(paths[i]), size=int(sizes[i]),
                 partition_values={c: _partition_str(pvalues[c][i]) for c in partition_by},
                 modification_time=int(mtimes[i]), num_records=int(records[i] or 0))
        for i in range(len(paths))
    )
    return TableState(uri, dt.version(), pa.schema(dt.schema().to_arrow()), partition_by, files)


def _partition_str(value: Any) -> str:
    if value is None:
        raise UnsupportedTableError("null partition values are not supported by Statekeeper's tables")
    return value if isinstance(value, str) else str(value)


def check_compatible(state: TableState | None, spec: TableSpec) -> None:
    if state is None:
        return
    if state.partition_by != spec.partition_by:
        raise TableSchemaError(
            f"Delta table {state.uri} is partitioned by {list(state.partition_by)}, expected "
            f"{list(spec.partition_by)}; it was not created by this version of Statekeeper"
        )
    if not same_shape(state.schema, spec.schema):
        raise TableSchemaError(
            f"Delta table {state.uri} has schema {state.schema.names} / types that differ from the declared "
            f"schema of {spec.name!r} ({spec.schema.names}); migrate or point at a new warehouse"
        )


def latest_version(warehouse: Warehouse, name: str) -> int | None:
    if not table_exists(warehouse, name):
        return None
    return open_table(warehouse, name).version()


def commit(warehouse: Warehouse, spec: TableSpec, adds: Iterable[DataFile], removes: Iterable[DataFile], *,
           read_version: int | None, strict: bool = True,
           metadata: dict[str, Any] | None = None) -> CommitResult:
    """Commit `adds`/`removes` to `spec` as one Delta transaction planned at `read_version`
    (None: the table did not exist and is created by this commit).

    A partition replace or full overwrite is expressed as explicit removes of the files seen at
    `read_version` (delta-rs' overwrite with partition filters does not check that new files match
    the filter). On any failure the added files are deleted and the error re-raised:
    ConcurrentCommitError when someone else committed since `read_version`.
    """
    dl = _deltalake()
    from deltalake.transaction import AddAction

    adds = list(adds)
    removes = list(removes)
    if not adds and not removes and read_version is not None:
        return CommitResult(spec.name, None)
    commit_id = uuid.uuid4().hex
    custom = {COMMIT_ID_KEY: commit_id, **(metadata or {})}
    location = warehouse.delta_location(spec.name)
    options = warehouse.storage_options()
    add_actions = [AddAction(f.path, f.size, dict(f.partition_values), f.modification_time, True,
                             f.stats or json.dumps({"numRecords": f.num_records})) for f in adds]
    now_ms = int(time.time() * 1000)
    attempts = 1 if strict or removes else 3
    for attempt in range(1, attempts + 1):
        try:
            _commit_once(dl, location, options, spec, add_actions, removes, read_version, strict, custom, now_ms)
            break
        except Exception as exc:
            current = latest_version(warehouse, spec.name)
            moved = (read_version is None and current is not None) or (
                read_version is not None and current is not None and current > read_version)
            if moved and attempt < attempts:
                # A non-strict pure append commutes with whatever landed meanwhile (e.g. a table
                # created by a concurrent run's audit row): retry against the new version.
                read_version = current
                continue
            abort_files(warehouse, spec, adds)
            if moved:
                raise ConcurrentCommitError(warehouse.table_uri(spec.name), read_version, current, str(exc)) from exc
            if isinstance(exc, TableError):
                raise
            raise TableError(f"commit to Delta table {warehouse.table_uri(spec.name)} failed: {exc}") from exc
    version = _find_commit(warehouse, spec.name, commit_id, read_version)
    return CommitResult(spec.name, version, len(adds), len(removes), sum(f.num_records for f in adds))


def _commit_once(dl: Any, location: str, options: dict[str, str] | None, spec: TableSpec, add_actions: list[Any],
                 removes: list[DataFile], read_version: int | None, strict: bool, custom: dict[str, Any],
                 now_ms: int) -> None:
    from deltalake.transaction import CommitProperties, create_table_with_add_actions

    if read_version is None:
        create_table_with_add_actions(
            location, dl.Schema.from_arrow(spec.schema), add_actions, mode="error",
            partition_by=list(spec.partition_by) or None, name=spec.name, description=spec.description or None,
            storage_options=options, commit_properties=CommitProperties(custom_metadata=custom),
        )
        return
    from deltalake._internal import RemoveAction

    actions: list[Any] = list(add_actions)
    actions += [RemoveAction(f.path, True, now_ms, f.size, dict(f.partition_values)) for f in removes]
    dl.DeltaTable(location, version=read_version, storage_options=options).create_write_transaction(
        actions, "append", spec.schema, partition_by=list(spec.partition_by) or None,
        commit_properties=CommitProperties(custom_metadata=custom, max_commit_retries=0 if strict else None),
    )


def _find_commit(warehouse: Warehouse, name: str, commit_id: str, read_version: int | None) -> int:
    """Version of our commit: read_version+1 unless retries placed it later; found by commit id."""
    dt = open_table(warehouse, name)
    for entry in dt.history(limit=20):
        if entry.get(COMMIT_ID_KEY) == commit_id:
            return int(entry["version"])
    # History entries carry custom metadata in every delta-rs release we use; fall back safely.
    return dt.version() if read_version is None else read_version + 1


def abort_files(warehouse: Warehouse, spec: TableSpec, files: Iterable[DataFile]) -> DeleteReport:
    """Remove data files that were written but never committed (idempotent)."""
    io_ = warehouse.file_io()
    base = warehouse.table_uri(spec.name)
    return io_.delete_many(join_uri(base, f.path) for f in files)

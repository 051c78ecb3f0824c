"""The tables' state through delta-rs, where no Spark runs or before a job's Spark work: table versions, live
files, schema checks, commit history; and the one commit Statekeeper makes itself, the index cut's repair
(`restore`, for statekeeper.tables.cut), which needs what Delta's RESTORE lacks: an expected version, a target of
"no files" (a table the torn run created) and a commit id to ask the log about after an unknown outcome.
That commit is strict: any commit by someone else since the version it planned from fails it
(ConcurrentCommitError).
"""
from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from statekeeper.storage import DeleteReport
from statekeeper.tables.errors import (
    CommitOutcomeUnknownError,
    ConcurrentCommitError,
    TableError,
    TableSchemaError,
    UnsupportedTableError,
)
from statekeeper.tables.files import DataFile
from statekeeper.tables.spec import TableSpec, same_shape
from statekeeper.tables.warehouse import Warehouse
from statekeeper.uri import join_uri

COMMIT_ID_KEY = "statekeeper.commitId"
# Operations that rewrite or delete data files without changing a table's rows (warehouse
# maintenance, statekeeper.tables.maintenance, and anyone's OPTIMIZE / VACUUM).
# ADD COLUMN: `add_missing_columns` widens a table written by an older version; its rows stay as they were.
ROW_PRESERVING_OPERATIONS = frozenset({"OPTIMIZE", "VACUUM START", "VACUUM END", "ADD COLUMN"})
log = logging.getLogger("statekeeper.tables")


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
    # Counted by the commits this module makes (cut repairs); Delta's Spark writer does not report them.
    files_added: int | None = None
    files_removed: int | None = None
    rows_added: int | None = None

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
    # Through the Arrow stream interface: pa.table() first asks pandas whether this is a DataFrame, which
    # imports pandas (0.4 s) in each process that plans a read, where nothing else needs it.
    actions = pa.RecordBatchReader.from_stream(dt.get_add_actions(flatten=True)).read_all()
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


def add_missing_columns(warehouse: Warehouse, state: TableState | None, spec: TableSpec) -> TableState | None:
    """A table written before `spec` gained trailing nullable columns gets them (Delta's ADD COLUMN, one
    commit of its own): how a column is added to a catalog table without a migration. Files written
    before read the new columns as null (`files.read_data_file`). Any other difference is left to
    `check_compatible`, which refuses it; so is a table that has columns the spec lacks."""
    if state is None or state.partition_by != spec.partition_by:
        return state
    extra = _trailing_columns(state.schema, spec)
    if not extra or not same_shape(state.schema, pa.schema(list(spec.schema)[:len(state.schema)])):
        return state
    dl = _deltalake()
    log.info("adding column(s) %s to Delta table %s (written by an older version)", [f.name for f in extra],
             state.uri)
    try:
        open_table(warehouse, spec.name, state.version).alter.add_columns(
            list(dl.Schema.from_arrow(pa.schema(extra)).fields))
    except Exception as exc:  # noqa: BLE001 - a concurrent writer may have added them first: the log decides
        current = load_state(warehouse, spec.name)
        if current is not None and current.schema.names == spec.schema.names:
            return current
        raise TableSchemaError(f"cannot add column(s) {[f.name for f in extra]} to Delta table {state.uri}: "
                               f"{exc}") from exc
    return load_state(warehouse, spec.name)


def read_schema(name: str, schema: pa.Schema) -> pa.Schema:
    """The schema a reader of the table `name` sees: the table's own (`schema`), plus the trailing nullable
    columns its catalog spec gained after the table was last written. Those are added to a table on its
    next write (`add_missing_columns`); until then a reader gets them as nulls, as it does for data files
    written before them (`files.read_data_file`), so no caller asks whether a table predates a column.
    Tables outside the catalog, and tables that differ from their spec otherwise, read as they are."""
    from statekeeper.tables.catalog import spec

    try:
        extra = _trailing_columns(schema, spec(name))
    except KeyError:        # not a catalog table
        return schema
    return pa.schema([*schema, *extra]) if extra else schema


def _trailing_columns(schema: pa.Schema, spec: TableSpec) -> list[pa.Field]:
    """The columns `spec` has after all of `schema`'s (same names, in order), when all are nullable: what a
    table written before they were added lacks. Empty for any other difference."""
    have, want = schema.names, spec.schema.names
    if len(have) >= len(want) or want[:len(have)] != have:
        return []
    extra = [spec.schema.field(n) for n in want[len(have):]]
    return [] if any(not f.nullable for f in extra) else extra


def latest_version(warehouse: Warehouse, name: str) -> int | None:
    if not table_exists(warehouse, name):
        return None
    return open_table(warehouse, name).version()


def commit(warehouse: Warehouse, spec: TableSpec, adds: Iterable[DataFile], removes: Iterable[DataFile], *,
           read_version: int | None, strict: bool = True,
           metadata: dict[str, Any] | None = None, commit_id: str | None = None,
           owns_adds: bool = True) -> CommitResult:
    """Commit `adds`/`removes` to `spec` as one Delta transaction planned at `read_version`
    (None: the table did not exist and is created by this commit).

    A partition replace or full overwrite is expressed as explicit removes of the files seen at
    `read_version` (delta-rs' overwrite with partition filters does not check that new files match
    the filter). `commit_id` (default: a new one) is written into the commit's metadata; a caller
    that chooses it can later ask the log whether the commit happened (`find_commit`).

    On a failure the log decides, never the error: a commit found in the log by its id happened
    (the client lost the answer), and is returned as a success. Only when the log shows our
    commit is absent are the added files deleted (if this commit `owns_adds`: a restore re-adds
    files of older versions and never deletes them) and ConcurrentCommitError raised when someone
    else committed since `read_version`. When the log cannot be read, nothing is deleted.
    """
    dl = _deltalake()

    adds = list(adds)
    removes = list(removes)
    if not adds and not removes and read_version is not None:
        return CommitResult(spec.name, None)
    commit_id = commit_id or uuid.uuid4().hex
    custom = {COMMIT_ID_KEY: commit_id, **(metadata or {})}
    location = warehouse.delta_location(spec.name)
    options = warehouse.storage_options()
    add_actions = _add_actions(adds)
    now_ms = int(time.time() * 1000)
    attempts = 1 if strict or removes else 3
    planned_from = read_version
    for attempt in range(1, attempts + 1):
        try:
            _commit_once(dl, location, options, spec, add_actions, removes, read_version, strict, custom, now_ms)
            break
        except Exception as exc:
            landed, current = _ask_the_log(warehouse, spec.name, commit_id, planned_from, exc)
            if landed is not None:
                log.warning("commit %s to %s reported %s: %s, but the log holds it as version %d; it happened",
                            commit_id, warehouse.table_uri(spec.name), type(exc).__name__, exc, landed)
                return CommitResult(spec.name, landed, len(adds), len(removes), sum(f.num_records for f in adds))
            moved = (read_version is None and current is not None) or (
                read_version is not None and current is not None and current > read_version)
            if moved and attempt < attempts:
                # A non-strict pure append commutes with whatever landed meanwhile (e.g. a table
                # created by a concurrent run's audit row): retry against the new version.
                read_version = current
                continue
            if owns_adds:
                abort_files(warehouse, spec, adds)
            if moved:
                raise ConcurrentCommitError(warehouse.table_uri(spec.name), read_version, current, str(exc)) from exc
            if isinstance(exc, TableError):
                raise
            raise TableError(f"commit to Delta table {warehouse.table_uri(spec.name)} failed: {exc}") from exc
    version = find_commit(warehouse, spec.name, commit_id, after=planned_from)
    if version is None:
        raise CommitOutcomeUnknownError(
            f"commit {commit_id} to Delta table {warehouse.table_uri(spec.name)} reported success but the log does "
            "not hold its commit id; its data files were left in place. Check the table's history")
    return CommitResult(spec.name, version, len(adds), len(removes), sum(f.num_records for f in adds))


def _add_actions(adds: list[DataFile]) -> list[Any]:
    from deltalake.transaction import AddAction

    return [AddAction(f.path, f.size, dict(f.partition_values), f.modification_time, True,
                      f.stats or json.dumps({"numRecords": f.num_records})) for f in adds]


def _ask_the_log(warehouse: Warehouse, name: str, commit_id: str, planned_from: int | None,
                 exc: Exception) -> tuple[int | None, int | None]:
    """After a failed commit, what the log says: the version holding `commit_id` (it landed: the client
    lost the answer) or None, and the table's latest version. CommitOutcomeUnknownError when the log
    cannot be read: then nobody may decide, and nothing is deleted."""
    try:
        return find_commit(warehouse, name, commit_id, after=planned_from), latest_version(warehouse, name)
    except Exception as lookup:  # noqa: BLE001 - any failure here leaves the outcome unknown
        raise CommitOutcomeUnknownError(
            f"commit {commit_id} to Delta table {warehouse.table_uri(name)} failed ({exc}) and the log "
            f"could not be read to tell whether it landed ({lookup}); its data files were left in place. "
            "Re-run the job: it reads the log again and repairs whichever way it went") from exc


def _commit_once(dl: Any, location: str, options: dict[str, str] | None, spec: TableSpec, add_actions: list[Any],
                 removes: list[DataFile], read_version: int | None, strict: bool, custom: dict[str, Any],
                 now_ms: int) -> None:
    from deltalake.transaction import CommitProperties, PostCommitHookProperties, create_table_with_add_actions

    # delta-rs' default post-commit hook deletes commit files older than delta.logRetentionDuration
    # (30 days) whenever it writes a checkpoint (every 100 commits): versions that readers are
    # pinned to, and that the index restores to, would become unreadable. Checkpoints yes, cleanup no.
    hooks = PostCommitHookProperties(create_checkpoint=True, cleanup_expired_logs=False)
    retries = 0 if strict else None
    if read_version is None:
        # mode="error" alone does not make a create strict: two runs that both found no table each
        # commit, and delta-rs retries the loser's create as version 1 on top of the winner's.
        create_table_with_add_actions(
            location, dl.Schema.from_arrow(spec.schema), add_actions, mode="error",
            partition_by=list(spec.partition_by) or None, name=spec.name, description=spec.description or None,
            storage_options=options, commit_properties=CommitProperties(custom_metadata=custom,
                                                                        max_commit_retries=retries),
            post_commithook_properties=hooks,
        )
        return
    from deltalake._internal import RemoveAction

    actions: list[Any] = list(add_actions)
    actions += [RemoveAction(f.path, True, now_ms, f.size, dict(f.partition_values)) for f in removes]
    dl.DeltaTable(location, version=read_version, storage_options=options).create_write_transaction(
        actions, "append", spec.schema, partition_by=list(spec.partition_by) or None,
        commit_properties=CommitProperties(custom_metadata=custom, max_commit_retries=retries),
        post_commithook_properties=hooks,
    )


def find_commit(warehouse: Warehouse, name: str, commit_id: str, *, after: int | None) -> int | None:
    """Version of the commit carrying `commit_id` made after version `after` (None: any), or None
    when the log holds no such commit. Reads only the commits after `after`."""
    if not table_exists(warehouse, name):
        return None
    dt = open_table(warehouse, name)
    newer = dt.version() - (-1 if after is None else after)
    if newer <= 0:
        return None
    for entry in dt.history(limit=newer):
        if commit_id in (entry.get(COMMIT_ID_KEY), _user_metadata(entry).get(COMMIT_ID_KEY)):
            return int(entry["version"])
    return None


def _user_metadata(entry: dict[str, Any]) -> dict[str, Any]:
    """The JSON object Delta's Spark writer keeps as a commit's `userMetadata` (statekeeper.tables.delta_spark
    writes its commit id there), or {}."""
    try:
        value = json.loads(entry.get("userMetadata") or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def rows_changed_since(warehouse: Warehouse, name: str, version: int) -> bool:
    """Whether a commit after `version` of table `name` may have changed its rows: any commit but
    the row-preserving ones (compaction, vacuum) does. Reads only the commits after `version`."""
    dt = open_table(warehouse, name)
    newer = dt.version() - version
    if newer <= 0:
        return False
    return any(entry.get("operation") not in ROW_PRESERVING_OPERATIONS for entry in dt.history(limit=newer))


def restore(warehouse: Warehouse, spec: TableSpec, target: int | None, *, expected_version: int,
            metadata: dict[str, Any] | None = None, commit_id: str | None = None) -> CommitResult:
    """Make the live files of `spec` those of version `target` (None: no files) with one strict
    commit on top of `expected_version`, like Delta's RESTORE: files added since are removed from
    the table (not deleted: older versions still name them) and files removed since are added back."""
    current = load_state(warehouse, spec.name, expected_version)
    assert current is not None
    wanted = {} if target is None else {f.path: f for f in load_state(warehouse, spec.name, target).files}
    live = {f.path: f for f in current.files}
    adds = [f for path, f in sorted(wanted.items()) if path not in live]
    removes = [f for path, f in sorted(live.items()) if path not in wanted]
    return commit(warehouse, spec, adds, removes, read_version=expected_version, strict=True,
                  metadata=metadata, commit_id=commit_id, owns_adds=False)


def abort_files(warehouse: Warehouse, spec: TableSpec, files: Iterable[DataFile]) -> DeleteReport:
    """Remove data files that were written but never committed (idempotent)."""
    io_ = warehouse.file_io()
    base = warehouse.table_uri(spec.name)
    return io_.delete_many(join_uri(base, f.path) for f in files)

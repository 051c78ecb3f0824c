"""Committing a multi-table change set with delta-rs: every table checked, then one commit per table.

Two callers make the same commits: the `statekeeper_changeset` data source's `commit()` (in a Python process
Spark starts for it) and `DeltaRsEngine.commit_changeset`, which commits a change set without `add` rows
(producers wrote their data files themselves) on the driver. Both learn what each table's commit did, and on
any failure delete the written files of the tables whose commit the Delta log shows did not land.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from statekeeper.tables import delta_log
from statekeeper.tables.delta_log import CommitResult
from statekeeper.tables.errors import ConcurrentCommitError
from statekeeper.tables.files import DataFile
from statekeeper.tables.spec import TableSpec
from statekeeper.tables.warehouse import Warehouse


def commit_tables(warehouse: Warehouse, specs: list[TableSpec], read_versions: dict[str, int | None],
                  commit_ids: dict[str, str], adds: dict[str, list[DataFile]], removes: dict[str, list[DataFile]],
                  *, metadata: dict[str, Any],
                  on_commit: Callable[[str, CommitResult], None] | None = None) -> dict[str, CommitResult]:
    """Commit `adds`/`removes` to each table of `specs`, in order, strictly against `read_versions`.

    Every table's version is checked before any is committed, so a concurrent run is detected before this one
    leaves some tables updated and others not. `on_commit(table, result)` is called after each commit. On any
    failure the added files of the tables not committed are deleted unless the log shows their commit landed
    (a lost response), and the error is raised."""
    pending = [s.name for s in specs]
    committed: dict[str, CommitResult] = {}
    try:
        for spec in specs:
            current = delta_log.latest_version(warehouse, spec.name)
            if current != read_versions.get(spec.name):
                raise ConcurrentCommitError(warehouse.table_uri(spec.name), read_versions.get(spec.name), current)
        for spec in specs:
            outcome = delta_log.commit(warehouse, spec, adds.get(spec.name, []), removes.get(spec.name, []),
                                       read_version=read_versions.get(spec.name), strict=True, metadata=metadata,
                                       commit_id=commit_ids[spec.name])
            pending.remove(spec.name)
            committed[spec.name] = outcome
            if on_commit is not None:
                on_commit(spec.name, outcome)
    except BaseException:
        # delta_log.commit already asked the log about the table it was committing; the tables after it were
        # never attempted. Ask again anyway: deleting is irreversible.
        by_name = {s.name: s for s in specs}
        delete_unless_committed(warehouse, {n: (by_name[n], adds.get(n, [])) for n in pending}, commit_ids,
                                read_versions)
        raise
    return committed


def delete_unless_committed(warehouse: Warehouse, adds: dict[str, tuple[TableSpec, list[DataFile]]],
                            commit_ids: dict[str, str], read_versions: dict[str, int | None]) -> None:
    """Delete written data files of tables whose commit the log shows did not happen.

    Spark calls abort() after any failure, including one after commit() landed (a commit worker
    killed before it reported): deleting then would remove live files and make the table
    unreadable. When the log cannot be read, the files stay (an uncommitted file is harmless
    garbage in the warehouse; a deleted committed one is lost data)."""
    for name, (spec, files) in adds.items():
        if not files:
            continue
        try:
            landed = delta_log.find_commit(warehouse, name, commit_ids[name], after=read_versions.get(name))
        except Exception:  # noqa: BLE001 - unknown outcome: keep the files
            delta_log.log.exception("cannot tell whether commit %s to %s landed; leaving its %d data file(s) in "
                                    "place", commit_ids[name], warehouse.table_uri(name), len(files))
            continue
        if landed is None:
            delta_log.abort_files(warehouse, spec, files)
        else:
            delta_log.log.warning("abort after commit %s landed as %s version %d: its data files are live and kept",
                                  commit_ids[name], warehouse.table_uri(name), landed)

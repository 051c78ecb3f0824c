"""Errors of the Delta table layer."""
from __future__ import annotations

from statekeeper.errors import ConfigurationError, StatekeeperError


class TableError(StatekeeperError):
    """A Delta table cannot be read or written as asked."""


class TableSchemaError(TableError, ConfigurationError):
    """Data or an existing table does not match the table's declared schema."""


class UnsupportedTableError(TableError, ConfigurationError):
    """The table uses Delta features this reader does not implement (deletion vectors, column
    mapping, ...); reading it anyway could return deleted or mislabelled rows."""


class WarehouseNotWritableError(TableError, ConfigurationError):
    """A local warehouse this process cannot write (a read-only file system, no permission, a full disk, a
    regular file on its path): refused before a job starts, naming the directory and what to do."""


class MissingTableError(TableError, ConfigurationError):
    """A table a job or command needs is absent from the warehouse (run the job that writes it)."""


class ConcurrentCommitError(TableError):
    """Another writer committed to the table after this writer read it. Nothing of this write was
    committed and its data files were removed; re-run to work from the new table state."""

    def __init__(self, table_uri: str, read_version: int | None, current_version: int | None, detail: str = "",
                 *, message: str | None = None):
        self.table_uri = table_uri
        self.read_version = read_version
        self.current_version = current_version
        if message is None:
            read = "absent" if read_version is None else f"version {read_version}"
            current = "absent" if current_version is None else f"version {current_version}"
            message = (f"concurrent commit on Delta table {table_uri}: this write was planned against {read}, "
                       f"but the table is now at {current}. Another run wrote it meanwhile; this write was "
                       "rolled back (its files removed). Re-run to index from the new state.")
            if detail:
                message += f" ({detail})"
        super().__init__(message)


class EngineUnavailableError(TableError, ConfigurationError):
    """The requested table engine cannot run in this Spark session."""


class CommitOutcomeUnknownError(TableError):
    """A commit failed in a way that leaves open whether it landed (the log could not be read, or
    it claims success without the commit's id). Nothing was deleted; re-running reads the log
    again and repairs whichever way it went."""


class PartialChangesetError(TableError):
    """A multi-table change set failed after some of its tables committed. Those commits stay (their
    files are live); the index tables are then ahead of the last audited run, and the next index
    run restores them to that run's versions before it plans (a torn cut is never read)."""

    def __init__(self, message: str, committed: dict[str, int]):
        self.committed = dict(committed)
        super().__init__(message)


class MaintenanceOptionsError(TableError, ConfigurationError, ValueError):
    """Warehouse maintenance was asked for something it refuses outright (a negative retention, a
    table name Statekeeper does not have); nothing was changed."""


class RetentionFloorError(TableError, ConfigurationError):
    """Vacuuming with the requested retention would delete data files of a table version that a
    reader is pinned to (statekeeper.tables.maintenance): nothing was changed. `pins` are the
    offending pins (statekeeper.tables.maintenance.RetentionPin), oldest first; the message names
    each table, its pinned version, who pins it and the smallest retention that is safe."""

    def __init__(self, message: str, pins: tuple = ()):
        self.pins = tuple(pins)
        super().__init__(message)


class CutError(TableError):
    """The warehouse has no consistent cut to read, or the cut named by the audit table is not
    consistent (a reader must not work from it)."""


class NoCutError(CutError, ConfigurationError):
    """No index run has succeeded against this warehouse (or its newest one does not name a table
    the reader needs): run index_checkpoints first."""

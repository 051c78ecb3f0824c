"""What a table engine is: the interface every engine implements, and what its writes return.

Apart from the engines themselves (`statekeeper.tables.engine`: delta-rs; `statekeeper.tables.delta_spark`:
Delta Lake's Spark integration) so that each engine imports the interface and `engine` picks among
them, with no import running back.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Literal

from statekeeper.tables.delta_log import CommitResult
from statekeeper.tables.spec import TableSpec
from statekeeper.tables.warehouse import Warehouse

WriteMode = Literal["append", "overwrite", "replace_partitions"]
EngineName = Literal["auto", "delta-rs", "delta-spark"]


@dataclass
class ChangesetResult:
    committed: dict[str, CommitResult] = field(default_factory=dict)
    notes: list[Any] = field(default_factory=list)


class TableEngine(ABC):
    name: str

    @abstractmethod
    def read(self, spark: Any, warehouse: Warehouse, table: str, *, version: int | None = None,
             partitions: dict[str, list[str]] | None = None) -> Any:
        """DataFrame of `table` (latest or at `version`), optionally only some partition values."""

    @abstractmethod
    def write(self, df: Any, warehouse: Warehouse, spec: TableSpec, *, mode: WriteMode = "append",
              replace: list[dict[str, str]] | None = None, expected_version: int | None = None,
              metadata: dict[str, Any] | None = None) -> CommitResult:
        """Write `df` to the table in one commit. `replace` lists the partitions a
        replace_partitions write swaps out; `expected_version` makes the write fail unless the
        table is still at that version."""

    @abstractmethod
    def append_rows(self, spark: Any, warehouse: Warehouse, spec: TableSpec, rows: Any, *,
                    metadata: dict[str, Any] | None = None) -> CommitResult:
        """Append a small Arrow table (audit rows) to `spec` in one commit; concurrent appends retry."""

    @abstractmethod
    def commit_changeset(self, changes: Any, warehouse: Warehouse, specs: list[TableSpec],
                         read_versions: dict[str, int | None], *,
                         metadata: dict[str, Any] | None = None, written: Any = None) -> ChangesetResult:
        """Apply a change set DataFrame (`datasource.CHANGESET_SCHEMA`) to several tables, each in one
        commit strictly against `read_versions`. `written` is the producer's `changeset.written_files`
        accumulator when its tasks write data files (`file` rows)."""

"""The change-set row format: how a producer hands a multi-table change to a table engine.

A change set is a DataFrame of CHANGESET_SCHEMA rows `(table, op, partition, payload)`; producers
build them with `ChangesetRows` inside `mapInArrow`, the engine (`DeltaSparkEngine.commit_changeset`)
decodes them with `ChangeOp`. The ops:

* `add`    — payload: Arrow IPC rows of one partition;
* `remove` — payload: a DataFile JSON, planned from the table state the producer read (the engine replaces
  every partition an `add` or `remove` row names);
* `note`   — payload: JSON handed back to the caller (task counters).
"""
from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

import pyarrow as pa

from statekeeper.tables.files import DataFile

CHANGESET_SCHEMA = "table string, op string, partition string, payload binary"


class ChangeOp(StrEnum):
    ADD = "add"
    REMOVE = "remove"
    NOTE = "note"


def partition_key(values: dict[str, str]) -> str:
    """The `partition` column: the partition values as canonical JSON."""
    return json.dumps(values, sort_keys=True)


class ChangesetRows:
    """Collects one task's change-set rows and emits them as one Arrow batch."""

    def __init__(self) -> None:
        self._rows: list[tuple[str, str, str, bytes]] = []

    def __len__(self) -> int:
        return len(self._rows)

    def remove(self, table: str, f: DataFile) -> None:
        self._rows.append((table, ChangeOp.REMOVE, partition_key(f.partition_values), f.to_json().encode()))

    def add(self, table: str, partition: dict[str, str], rows: pa.Table, chunk_rows: int) -> None:
        from statekeeper.tables.arrow_codec import table_to_ipc

        key = partition_key(partition)
        for offset in range(0, rows.num_rows, chunk_rows):
            self._rows.append((table, ChangeOp.ADD, key, table_to_ipc(rows.slice(offset, chunk_rows))))

    def note(self, payload: dict[str, Any]) -> None:
        self._rows.append(("", ChangeOp.NOTE, "", json.dumps(payload).encode()))

    def batch(self) -> pa.RecordBatch | None:
        """The rows as one CHANGESET_SCHEMA batch (None when there are none)."""
        if not self._rows:
            return None
        tables, ops, partitions, payloads = zip(*self._rows, strict=True)
        return pa.RecordBatch.from_arrays(
            [pa.array(tables, pa.string()), pa.array([str(o) for o in ops], pa.string()),
             pa.array(partitions, pa.string()), pa.array(payloads, pa.binary())],
            names=["table", "op", "partition", "payload"])

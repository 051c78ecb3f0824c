"""The change-set row format: how a producer hands a multi-table change to a table engine.

A change set is a DataFrame of CHANGESET_SCHEMA rows `(table, op, partition, payload)`; producers
build them with `ChangesetRows` inside `mapInArrow`, engines (`statekeeper_changeset` and the
delta-spark engine) decode them with `ChangeOp`. The ops:

* `add`    — payload: Arrow IPC rows of one partition (engines that write data files themselves);
* `file`   — payload: a DataFile JSON of an uncommitted data file the producer already wrote into
  the table in the same task; the engine then owns it (commits it or deletes it);
* `remove` — payload: a DataFile JSON, planned from the table state the producer read;
* `note`   — payload: JSON handed back to the caller (task counters).

A producer that writes `file`s also adds each to a `WrittenFiles` accumulator as it writes it: if the job
producing the change set fails before any writer owns its rows, the engine deletes what it names.
"""
from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

import pyarrow as pa
from pyspark.accumulators import AccumulatorParam

from statekeeper.tables.files import DataFile

CHANGESET_SCHEMA = "table string, op string, partition string, payload binary"


class ChangeOp(StrEnum):
    ADD = "add"
    FILE = "file"
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

    def file(self, table: str, partition: dict[str, str], f: DataFile) -> None:
        self._rows.append((table, ChangeOp.FILE, partition_key(partition), f.to_json().encode()))

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


class WrittenFiles(AccumulatorParam):
    """Accumulates (table, DataFile JSON) pairs of data files a producer's tasks wrote.

    Spark merges a task's updates only when the task succeeds, and a producer's failed task deletes what it
    wrote itself; so after a failed job the value names exactly the uncommitted files no one else deletes."""

    def zero(self, value: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return []

    def addInPlace(self, a: list[tuple[str, str]], b: list[tuple[str, str]]) -> list[tuple[str, str]]:
        a.extend(b)
        return a


def written_files(spark: Any) -> Any:
    """A WrittenFiles accumulator of `spark`'s context."""
    return spark.sparkContext.accumulator([], WrittenFiles())


def decode_written(pairs: list[tuple[str, str]]) -> dict[str, list[DataFile]]:
    out: dict[str, list[DataFile]] = {}
    for table, payload in pairs:
        out.setdefault(table, []).append(DataFile.from_json(payload))
    return out

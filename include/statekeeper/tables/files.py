"""Executor-side half of a Delta write: parquet data files and their add/remove descriptions.

No deltalake here (it must not be initialised in forked Spark workers); files are written with
pyarrow through the warehouse FileIO and described by `DataFile`, which the driver-side commit
turns into Delta add/remove actions.
"""
from __future__ import annotations

import hashlib
import io
import json
import math
import re
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from statekeeper.tables.spec import TableSpec
from statekeeper.tables.warehouse import Warehouse
from statekeeper.uri import join_uri

_SAFE_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_MAX_STRING_STAT = 32  # longer strings get no min/max: truncating a max would break data skipping


@dataclass(frozen=True)
class DataFile:
    path: str                          # relative to the table root, no URL escaping needed
    size: int
    partition_values: dict[str, str]
    modification_time: int             # epoch milliseconds
    num_records: int
    stats: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> DataFile:
        return cls(**json.loads(text))

    def partition_key(self, partition_by: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(self.partition_values[c] for c in partition_by)


def partition_segment(column: str, value: str) -> str:
    """Hive-style directory name; values outside a safe alphabet are hashed so no path escaping
    is ever needed (partition values are read from the Delta log, not from paths)."""
    if _SAFE_SEGMENT.match(value):
        return f"{column}={value}"
    return f"{column}=h-{hashlib.sha1(value.encode()).hexdigest()[:16]}"


def data_file_path(spec: TableSpec, partition_values: dict[str, str]) -> str:
    parts = [partition_segment(c, partition_values[c]) for c in spec.partition_by]
    parts.append(f"part-{uuid.uuid4().hex}.zstd.parquet")
    return "/".join(parts)


def split_partitions(spec: TableSpec, table: pa.Table) -> Iterator[tuple[dict[str, str], pa.Table]]:
    """(partition values, rows) groups of a table conforming to `spec`."""
    if not spec.partition_by:
        yield {}, table
        return
    if table.num_rows == 0:
        return
    keys = table.select(list(spec.partition_by))
    first = keys.slice(0, 1).to_pylist()[0]
    uniform = all(pc.all(pc.equal(keys.column(c), first[c])).as_py() for c in spec.partition_by)
    if uniform:  # the common case: a Spark task hands over one job partition at a time
        yield dict(first), table
        return
    for combo in keys.group_by(list(spec.partition_by)).aggregate([]).to_pylist():
        mask = None
        for c in spec.partition_by:
            m = pc.equal(table.column(c), combo[c])
            mask = m if mask is None else pc.and_(mask, m)
        yield dict(combo), table.filter(mask)


def write_data_file(warehouse: Warehouse, spec: TableSpec, table: pa.Table,
                    partition_values: dict[str, str], *, fileio: Any = None) -> DataFile:
    """Write one parquet file holding `table` (full schema, one partition) into the table."""
    data = table.select(spec.data_schema.names)
    buffer = io.BytesIO()
    # Parquet column statistics are skipped: files hold one partition's rows and Delta's own file
    # statistics (below) serve data skipping; the per-column footer work dominated small writes.
    pq.write_table(data, buffer, compression="zstd", coerce_timestamps="us", allow_truncated_timestamps=False,
                   write_statistics=False)
    rel = data_file_path(spec, partition_values)
    io_ = fileio or warehouse.file_io()
    # No fsync per data file (as Spark's and delta-rs' own writers): a data file is immutable and
    # invisible until the Delta commit names it; flushing thousands of small files one by one
    # dominated write time.
    info = io_.write(join_uri(warehouse.table_uri(spec.name), rel), buffer.getvalue(), durable=False)
    return DataFile(
        path=rel, size=info.size, partition_values=dict(partition_values),
        modification_time=int(info.mtime.timestamp() * 1000), num_records=data.num_rows,
        stats=json.dumps(file_stats(data), separators=(",", ":")),
    )


def file_stats(data: pa.Table) -> dict[str, Any]:
    """Delta file statistics (numRecords, nullCount, minValues, maxValues) for top-level columns."""
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name in data.column_names:
        col = data.column(name)
        t = col.type
        if pa.types.is_nested(t):
            continue  # Delta nests stats for structs; our nested columns are lists/maps: skip
        nulls[name] = col.null_count
        if col.null_count == len(col) or pa.types.is_boolean(t) or pa.types.is_binary(t):
            continue
        if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_timestamp(t)
                or pa.types.is_string(t) or pa.types.is_date(t)):
            continue
        mm = pc.min_max(col)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        if lo is None or hi is None:
            continue
        if pa.types.is_floating(t) and (math.isnan(lo) or math.isnan(hi)):
            continue
        if pa.types.is_string(t):
            if len(lo) > _MAX_STRING_STAT or len(hi) > _MAX_STRING_STAT:
                continue
        elif pa.types.is_timestamp(t):
            lo, hi = _ts_floor_ms(lo), _ts_ceil_ms(hi)
        elif pa.types.is_date(t):
            lo, hi = lo.isoformat(), hi.isoformat()
        mins[name], maxs[name] = lo, hi
    return {"numRecords": data.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}


def _as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _ts_floor_ms(value: datetime) -> str:
    v = _as_utc(value)
    return v.replace(microsecond=v.microsecond // 1000 * 1000).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _ts_ceil_ms(value: datetime) -> str:
    # Delta stats carry milliseconds; rounding a max down would let readers skip matching rows.
    from datetime import timedelta

    v = _as_utc(value)
    if v.microsecond % 1000:
        v = v.replace(microsecond=v.microsecond // 1000 * 1000) + timedelta(milliseconds=1)
    return v.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def read_data_file(warehouse: Warehouse, spec_schema: pa.Schema, partition_by: tuple[str, ...], path: str,
                   partition_values: dict[str, str], *, fileio: Any = None, table_name: str,
                   columns: list[str] | None = None) -> pa.Table:
    """Read one data file back with its partition columns restored, in `spec_schema` order
    (or only `columns`, in that order)."""
    io_ = fileio or warehouse.file_io()
    raw = io_.read_bytes(join_uri(warehouse.table_uri(table_name), path))
    wanted = [spec_schema.field(c) for c in columns] if columns else list(spec_schema)
    # ParquetFile.read on an in-memory buffer: 3-5x faster than read_table() for small files.
    pf = pq.ParquetFile(pa.BufferReader(raw))
    stored = set(pf.schema_arrow.names)
    data = pf.read(columns=[f.name for f in wanted if f.name in stored], use_threads=False)
    n = data.num_rows
    arrays = []
    for f in wanted:
        if f.name in partition_by:
            arrays.append(pa.array([partition_values.get(f.name)] * n, type=pa.string()).cast(f.type))
        elif f.name in stored:
            arrays.append(data.column(f.name).cast(f.type))
        else:  # column added to the table after this file was written
            arrays.append(pa.nulls(n, type=f.type))
    return pa.Table.from_arrays(arrays, schema=pa.schema(wanted))

"""Small Arrow (de)serialisation helpers for passing schemas and row chunks through Spark."""
from __future__ import annotations

import base64
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

import pyarrow as pa

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)
_UTC_MICROS = pa.timestamp("us", tz="UTC")


def schema_to_text(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def schema_from_text(text: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


def table_to_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def table_from_ipc(payload: bytes) -> pa.Table:
    with pa.ipc.open_stream(pa.py_buffer(payload)) as reader:
        return reader.read_all()


# Timestamps cross between Python and Arrow as integer microseconds: pyarrow converts each tz-aware value with a
# zone lookup, about ten times the cost of the arithmetic (7 us a value; a GC plan or a listing holds millions).

def micros(value: datetime) -> int:
    """An aware datetime as microseconds since the epoch."""
    return (value - _EPOCH) // _MICROSECOND


def utc_timestamps(values: Sequence[datetime | None]) -> pa.Array:
    """Aware datetimes (or None) as a `timestamp[us, UTC]` column."""
    return pa.array([None if v is None else micros(v) for v in values], pa.int64()).cast(_UTC_MICROS)


def utc_datetimes(column: pa.Array | pa.ChunkedArray) -> list[datetime | None]:
    """A timestamp column, whatever zone it is labelled with, as aware UTC datetimes (None for nulls)."""
    values = column.cast(_UTC_MICROS).cast(pa.int64()).to_pylist()
    return [None if v is None else _EPOCH + timedelta(microseconds=v) for v in values]

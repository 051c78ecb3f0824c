"""Small Arrow (de)serialisation helpers for passing schemas and row chunks through Spark."""
from __future__ import annotations

import base64

import pyarrow as pa


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

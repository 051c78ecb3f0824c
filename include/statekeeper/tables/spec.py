"""Declared table shapes: name, Arrow schema, partition columns."""
from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from statekeeper.tables.errors import TableSchemaError

TIMESTAMP = pa.timestamp("us", tz="UTC")


def column(name: str, type_: pa.DataType, nullable: bool = True) -> pa.Field:
    """A declared column; non-null keys say so, so writers fail on a null instead of storing it."""
    return pa.field(name, type_, nullable=nullable)


def snapshot_columns() -> list[pa.Field]:
    """The snapshot a derived row is about, as every table downstream of the index names it: the
    `_metadata` URI (key into `snapshots.uri`), its unit (root, root_id, job_dir and job_dir's bucket,
    see statekeeper.tables.catalog.job_bucket) and its identity."""
    return [
        column("snapshot_uri", pa.string(), False),
        column("root", pa.string(), False),
        column("root_id", pa.string(), False),
        column("job_dir", pa.string(), False),
        column("bucket", pa.string(), False),
        column("snapshot_job_id", pa.string()),
        column("snapshot_checkpoint_id", pa.int64()),
        column("snapshot_type", pa.string()),
    ]


@dataclass(frozen=True)
class TableSpec:
    name: str
    schema: pa.Schema                       # full schema, partition columns included
    partition_by: tuple[str, ...] = ()
    description: str = ""
    producer: str = ""                      # the registry name of the job that writes it
    docs: dict[str, str] = field(default_factory=dict, compare=False)  # column -> meaning

    def __post_init__(self) -> None:
        names = self.schema.names
        for col in self.partition_by:
            if col not in names:
                raise TableSchemaError(f"table {self.name}: partition column {col!r} not in schema")
            f = self.schema.field(col)
            if not pa.types.is_string(f.type) or f.nullable:
                # Null or non-string partition values round-trip differently across Delta readers.
                raise TableSchemaError(f"table {self.name}: partition column {col!r} must be a non-null string")

    @property
    def data_schema(self) -> pa.Schema:
        """Columns stored inside the parquet files (Delta keeps partition values in the log)."""
        return pa.schema([f for f in self.schema if f.name not in self.partition_by])

    def check_columns(self, names: list[str]) -> None:
        """TableSchemaError unless `names` are exactly the declared columns (in any order)."""
        missing = [n for n in self.schema.names if n not in names]
        extra = [n for n in names if n not in self.schema.names]
        if missing or extra:
            raise TableSchemaError(
                f"table {self.name}: columns do not match the declared schema "
                f"(missing {missing or 'none'}, unexpected {extra or 'none'})"
            )

    def conform(self, table: pa.Table) -> pa.Table:
        """Reorder/cast `table` to the declared schema; fail on missing or extra columns."""
        if table.schema.equals(self.schema):
            return table
        self.check_columns(table.column_names)
        table = table.select(self.schema.names)
        try:
            return table.cast(self.schema, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise TableSchemaError(f"table {self.name}: data does not fit the declared schema: {exc}") from exc

    @classmethod
    def from_arrow(cls, name: str, schema: pa.Schema, partition_by: tuple[str, ...] = ()) -> TableSpec:
        fields = [f.with_nullable(False) if f.name in partition_by else f for f in schema]
        return cls(name, pa.schema(fields), tuple(partition_by))


def same_shape(a: pa.Schema, b: pa.Schema) -> bool:
    """Names and types equal, ignoring nullability of nested/top-level fields and metadata.

    Delta logs do not preserve Arrow nullability of nested children faithfully, so the
    comparison is on names and logical types.
    """
    if a.names != b.names:
        return False
    return all(_same_type(fa.type, fb.type) for fa, fb in zip(a, b, strict=True))


def _same_type(a: pa.DataType, b: pa.DataType) -> bool:
    if pa.types.is_large_string(a) or pa.types.is_string_view(a):
        a = pa.string()
    if pa.types.is_large_string(b) or pa.types.is_string_view(b):
        b = pa.string()
    if pa.types.is_large_binary(a) or pa.types.is_binary_view(a):
        a = pa.binary()
    if pa.types.is_large_binary(b) or pa.types.is_binary_view(b):
        b = pa.binary()
    if pa.types.is_list(a) or pa.types.is_large_list(a):
        return (pa.types.is_list(b) or pa.types.is_large_list(b)) and _same_type(a.value_type, b.value_type)
    if pa.types.is_map(a):
        return pa.types.is_map(b) and _same_type(a.key_type, b.key_type) and _same_type(a.item_type, b.item_type)
    if pa.types.is_struct(a):
        if not pa.types.is_struct(b) or a.num_fields != b.num_fields:
            return False
        return all(a.field(i).name == b.field(i).name and _same_type(a.field(i).type, b.field(i).type)
                   for i in range(a.num_fields))
    return a.equals(b)

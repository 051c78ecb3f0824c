"""Delta table IO: declared table specs, a warehouse location, and engines that write/read Delta.

The default engine writes through delta-rs from Spark Python Data Sources; delta-spark is used when
its jars are present. Import `statekeeper.tables.engine` (pyspark) only where Spark runs; the
planning helpers in `delta_log` and the writers in `files` need no Spark.
"""
from statekeeper.tables.errors import (
    ConcurrentCommitError,
    EngineUnavailableError,
    TableError,
    TableSchemaError,
    UnsupportedTableError,
)
from statekeeper.tables.spec import TableSpec
from statekeeper.tables.warehouse import Warehouse

__all__ = ["ConcurrentCommitError", "EngineUnavailableError", "TableError", "TableSchemaError", "TableSpec",
           "UnsupportedTableError", "Warehouse"]

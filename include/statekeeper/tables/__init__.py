"""Delta table IO: declared table specs, a warehouse location, and engines that write/read Delta.

Every Spark job reads and writes through Delta Lake's Spark integration (`statekeeper.tables.delta_spark`,
chosen by `statekeeper.tables.engine`; import them only where Spark runs). Where no Spark runs (the CLI,
`explain`, the report page, warehouse maintenance) `reader` and `delta_log` read the same tables with delta-rs.
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

"""Reading a local table with Spark's own parquet scan, so that a read starts no Python process.

Through the `statekeeper_delta` data source every read plans in two Python processes of its own
(`create_data_source`, `plan_data_source_read`) and moves every row through a Python worker: in a
fresh spark-submit the first read of a table cost ~4 s and each further one 0.3-0.7 s, paid by every
step for every table it reads. On a local warehouse the driver can take the live files of the pinned
version from the Delta log itself (as the data source's planner does) and give exactly those files to
Spark's parquet reader, which the JVM plans and reads alone.

Partition columns are not stored in the data files; Spark takes them from the `column=value`
directories. That is exact only where the value is written verbatim: `statekeeper.tables.files`
hashes values outside a safe alphabet, and other writers may escape them. A table with any such file
is read through the data source, which takes partition values from the log.
"""
from __future__ import annotations

import re
from typing import Any

from statekeeper.storage import local_path
from statekeeper.tables import delta_log
from statekeeper.tables.files import DataFile, partition_segment
from statekeeper.tables.spark import spark_schema
from statekeeper.tables.splits import plan_splits
from statekeeper.tables.warehouse import Warehouse

# Spark lists more than this many given paths with a Spark job of its own (InMemoryFileIndex); a table's
# files are stat'ed on the driver instead, where a local warehouse is (statekeeper.tables.spark).
LISTING_THRESHOLD_CONF = "spark.sql.sources.parallelPartitionDiscovery.threshold"
LISTING_THRESHOLD = 1_000_000
# Spark sizes a file scan by its files' bytes on disk and broadcasts a join side estimated under 10 MiB. The
# tables are zstd parquet of URIs with long shared prefixes: read, they take 10-53x their files' size (at 1M
# objects: files 13x, snapshots 12x, references 53x). Unscaled, the 1M-object `files` table (41 MB on disk,
# 440 MiB as a hashed relation) was broadcast into validation's tasks and the JVM ran out of heap. A session
# whose factor someone set (anything but Spark's 1.0) keeps it.
COMPRESSION_FACTOR_CONF = "spark.sql.sources.fileCompressionFactor"
COMPRESSION_FACTOR = "10.0"
# Spark globs the paths it is given and Hadoop's Path refuses some characters (':' in a name): a warehouse
# path outside this alphabet is read through the data source.
_PLAIN_PATH = re.compile(r"/[A-Za-z0-9/._+-]*")


def local_root(warehouse: Warehouse, table: str) -> str | None:
    """The local path of `table` when Spark can take it as it is (no glob, nothing Hadoop's Path refuses);
    None for an object-store warehouse or any other path."""
    if not warehouse.is_local:
        return None
    path = local_path(warehouse.table_uri(table))
    return path if _PLAIN_PATH.fullmatch(path) else None


def _verbatim(f: DataFile, partition_by: tuple[str, ...]) -> bool:
    """Whether Spark's partition discovery reads `f`'s partition values back exactly from its path."""
    *directories, name = f.path.split("/")
    return bool(_PLAIN_PATH.fullmatch(f"/{name}")) and directories == [
        f"{c}={f.partition_values[c]}" for c in partition_by] and all(
        partition_segment(c, f.partition_values[c]) == f"{c}={f.partition_values[c]}" for c in partition_by)


def scan(spark: Any, warehouse: Warehouse, table: str, *, version: int | None = None,
         partitions: dict[str, list[str]] | None = None, min_splits: int = 1) -> Any | None:
    """The rows of local table `table` (at `version`, only `partitions` when given) as a JVM-only
    DataFrame in the table's column order, in at most as many tasks as the data source would read it
    with (`statekeeper.tables.splits`); None when the data source must read it instead (an object
    store warehouse, an absent table, a partition value not written verbatim in its path)."""
    path = local_root(warehouse, table)
    if path is None:
        return None
    state = delta_log.load_state(warehouse, table, version)
    if state is None:
        return None
    wanted = {c: {str(v) for v in values} for c, values in (partitions or {}).items()}
    unknown = [c for c in wanted if c not in state.partition_by]
    if unknown:
        return None  # the data source names them in its error
    files = [f for f in state.files if all(f.partition_values[c] in vs for c, vs in wanted.items())]
    if not all(_verbatim(f, state.partition_by) for f in files):
        return None
    arrow_schema = delta_log.read_schema(table, state.schema)
    schema = spark_schema(arrow_schema)
    if not files:
        return spark.createDataFrame(spark.sparkContext.emptyRDD(), schema)
    if float(spark.conf.get(COMPRESSION_FACTOR_CONF, "1.0")) == 1.0:
        spark.conf.set(COMPRESSION_FACTOR_CONF, COMPRESSION_FACTOR)   # read by the planner, per session
    # With the scheme: a bare path is on the cluster's default filesystem, which need not be the local one.
    root = "file://" + path
    df = spark.read.schema(schema).option("basePath", root).parquet(*(f"{root}/{f.path}" for f in files))
    # Spark splits a scan per core whatever its size, the data source keeps a split at 1 MiB or more:
    # as many tasks as the data source's, so the files a step writes downstream of a scan stay as many.
    tasks = len(plan_splits(files, state.partition_by, min_splits=min_splits))
    # Spark puts partition columns after the data columns; readers get the table's order.
    return df.coalesce(tasks).select(*arrow_schema.names)

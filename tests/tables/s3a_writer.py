"""One Spark driver process that writes one partition of a table on an s3:// warehouse with an expected version:
tests/tables/test_s3a_tables.py runs two at once against one table (two drivers, as two Airflow tasks on two
hosts would be).

    python -m tests.tables.s3a_writer --warehouse s3://b/wh --writer a --other b --rendezvous DIR --work DIR
        [--conf key=value ...]

The S3 endpoint and credentials come from the environment (STATEKEEPER_S3_ENDPOINT, AWS_ACCESS_KEY_ID, ...), as a
job's do, never from argv. `--conf` adds non-secret Spark settings (the event log). The process writes
`rendezvous/<writer>` once its session is up and waits for `rendezvous/<other>`, so both writers start their
transactions from the same table version; then it writes and prints one JSON line: the committed version or the
conflict, its JVM's command line and its SparkConf (what the test searches for credentials).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa

from statekeeper.tables.spec import TableSpec

SPEC = TableSpec("events", pa.schema([
    pa.field("root_id", pa.string(), nullable=False),
    pa.field("job_dir", pa.string(), nullable=False),
    pa.field("n", pa.int64()),
    pa.field("writer", pa.string()),
    pa.field("at", pa.timestamp("us", tz="UTC")),
]), ("root_id", "job_dir"))

RENDEZVOUS_S = 300.0


def rows(root: str, job: str, ns: list[int], writer: str) -> pa.Table:
    at = pa.array([datetime(2026, 3, 1, tzinfo=timezone.utc)] * len(ns), pa.timestamp("us", tz="UTC"))
    return pa.table({"root_id": [root] * len(ns), "job_dir": [job] * len(ns), "n": ns, "writer": [writer] * len(ns),
                     "at": at}, schema=SPEC.schema)


def writer_rows(writer: str) -> pa.Table:
    """What `writer` puts into partition (r1, j1): rows of its own, told apart by the `writer` column."""
    return rows("r1", "j1", [100, 101, 102], writer)


def _session(work: Path, writer: str, conf: dict[str, str]):
    from pyspark.sql import SparkSession

    from statekeeper.launch.session import configure_builder
    from tests.plugins.spark import quiet_log4j

    builder = (SparkSession.builder.master("local[1]").appName(f"s3a-writer-{writer}")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "1")
               .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{quiet_log4j(work)}")
               .config("spark.local.dir", str(work / "spark-local")))
    for key, value in conf.items():
        builder = builder.config(key, value)
    return configure_builder(builder).getOrCreate()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.tables.s3a_writer")
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--writer", required=True)
    parser.add_argument("--other", required=True)
    parser.add_argument("--rendezvous", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--conf", action="append", default=[])
    args = parser.parse_args(argv)

    from statekeeper.storage import StorageConfig
    from statekeeper.tables.delta_spark import DeltaSparkEngine
    from statekeeper.tables.errors import ConcurrentCommitError
    from statekeeper.tables.warehouse import Warehouse

    args.work.mkdir(parents=True, exist_ok=True)
    warehouse = Warehouse(args.warehouse, StorageConfig.from_env())
    spark = _session(args.work, args.writer, dict(c.split("=", 1) for c in args.conf))
    engine = DeltaSparkEngine()
    df = spark.createDataFrame(writer_rows(args.writer)).coalesce(1)
    before = engine.read(spark, warehouse, SPEC.name).count()   # the table at version 0, through S3A

    (args.rendezvous / args.writer).touch()
    deadline = time.monotonic() + RENDEZVOUS_S
    while not (args.rendezvous / args.other).exists():
        if time.monotonic() > deadline:
            print(f"writer {args.writer}: writer {args.other} never came", file=sys.stderr)
            return 3
        time.sleep(0.05)

    out: dict[str, object] = {"writer": args.writer, "rows_before": before}
    try:
        out["version"] = engine.write(df, warehouse, SPEC, mode="replace_partitions",
                                      replace=[{"root_id": "r1", "job_dir": "j1"}], expected_version=0).version
    except ConcurrentCommitError as exc:
        out["conflict"] = str(exc)
    # Spark logs the Hadoop configuration in an environment update whenever a file or jar is added: add one, so
    # the event log holds the configuration as it is after the bucket's settings were set.
    marker = args.work / "environment-update"
    marker.write_text("x")
    spark.sparkContext.addFile(str(marker))
    pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
    out["jvm_cmdline"] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    out["spark_conf"] = dict(spark.sparkContext.getConf().getAll())
    out["runtime_conf"] = {k: v for k, v in spark.conf.getAll.items()}
    spark.stop()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.exit(main())

"""What the thin entry points in spark_jobs/ share: arguments, exit codes, the Spark session, results.

Every Statekeeper Spark job speaks the same command-line dialect and the same exit codes
(`statekeeper.jobs.registry.ExitCode`; what each means for one job is in its registry entry), so
an orchestrator (the Airflow operator, a cron wrapper, a human) can react to any job the same way.
Configuration errors (`statekeeper.errors.ConfigurationError`) exit 2, any other failure 3.

pyspark is imported lazily so that `--help` and configuration errors answer in well under a second.
"""
from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from statekeeper.errors import ConfigurationError
from statekeeper.jobs.registry import ExitCode, JobSpec

S3_EPILOG = ("S3 settings come from the environment: STATEKEEPER_S3_ENDPOINT, AWS_ACCESS_KEY_ID, "
             "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, STATEKEEPER_S3_PATH_STYLE (never from "
             "the command line, where they would show in process listings).")

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def flag(text: str) -> bool:
    """An argparse type for `--option[=BOOL]`: true/1/yes or false/0/no/'' (what a DAG's template renders)."""
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no", ""):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


class SnapshotArgumentError(ConfigurationError):
    """A --snapshot value is not an absolute URI."""


def snapshots_from(values: list[str]) -> tuple[str, ...]:
    """`--snapshot` values (repeatable, comma-separated; empty ones, what a DAG renders for none, are
    ignored), each a snapshot directory or its `_metadata`: the canonical `_metadata` URIs."""
    from statekeeper.uri import normalize_uri

    out = []
    for value in (v.strip() for group in values for v in group.split(",")):
        if not value:
            continue
        try:
            uri = normalize_uri(value).rstrip("/")
        except ValueError as exc:
            raise SnapshotArgumentError(f"snapshot {value!r} is not an absolute URI (file://, s3://, oss://, gs://, abfss://): {exc}") from None
        out.append(uri if uri.endswith("/_metadata") else uri + "/_metadata")
    return tuple(out)


def add_root_arguments(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--roots", action="append", default=[], metavar="URI[,URI...]",
                        help=f"{help_text}; comma-separated and/or repeated")
    parser.add_argument("--root", action="append", default=[], metavar="URI", help="one root (repeatable)")


def roots_from(args: argparse.Namespace) -> list[str]:
    return [r.strip() for group in args.roots for r in group.split(",") if r.strip()] + list(args.root)


def job_parser(job: JobSpec, description: str) -> argparse.ArgumentParser:
    """The job's parser: its name, the common options, and its exit codes from the registry."""
    parser = argparse.ArgumentParser(prog=job.entry_point, description=description,
                                     epilog=f"{S3_EPILOG} {job.exit_status_help()}")
    add_common_arguments(parser, audit_table=job.audit_table)
    return parser


def common_options(builder: Any, args: argparse.Namespace, storage: Any) -> Any:
    """Apply the options every job takes (statekeeper.jobs.base.StatekeeperJob) from `args`."""
    return (builder.warehouse(args.warehouse).storage(storage).engine(args.engine)
            .airflow_run(args.airflow_run_id).progress_interval(args.progress_interval))


def add_common_arguments(parser: argparse.ArgumentParser, *, audit_table: str) -> None:
    """The options every job takes: where the tables are, who called, how to report."""
    parser.add_argument("--warehouse", required=True,
                        help="where the Delta tables live: a local path or an s3:// prefix")
    parser.add_argument("--run-id", "--airflow-run-id", dest="airflow_run_id", default="",
                        help=f"the caller's run id (e.g. Airflow's run_id), recorded in {audit_table}.airflow_run_id")
    parser.add_argument("--engine", default="auto", choices=["auto", "delta-rs", "delta-spark"],
                        help="table engine (auto: delta-spark when its jars and extension are configured, "
                             "else delta-rs)")
    parser.add_argument("--progress-interval", type=float, default=10.0,
                        help="seconds between progress log lines (0: only phase changes)")
    parser.add_argument("--result-json", default="",
                        help="also write the run's result as JSON to this local file")
    parser.add_argument("--master", default="",
                        help="Spark master when not started by spark-submit (e.g. local[2])")


def configure_logging() -> None:
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)


def write_result(path: str, payload: dict[str, Any]) -> None:
    if path:
        Path(path).write_text(json.dumps(payload, indent=2, default=str))


@contextmanager
def spark_session(app_name: str, master: str = "") -> Iterator[Any]:
    """The active session (tests, notebooks, spark-submit) or a new one that is stopped afterwards."""
    from pyspark.sql import SparkSession

    from statekeeper.tables.spark import configure_builder

    spark = SparkSession.getActiveSession()
    if spark is not None:
        yield spark
        return
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    spark = configure_builder(builder).getOrCreate()
    _fit_shuffle_partitions(spark)
    try:
        yield spark
    finally:
        spark.stop()


def _fit_shuffle_partitions(spark: Any) -> None:
    """On a local master, size shuffles to the machine unless the user chose a number.

    Spark's default of 200 shuffle partitions is meant for clusters; on local[2] every join of a small
    warehouse ran hundreds of near-empty tasks (the chains and validation jobs spent most of a minute
    scheduling them). A cluster keeps Spark's defaults and adaptive coalescing.
    """
    conf = spark.sparkContext.getConf()
    if conf.contains("spark.sql.shuffle.partitions") or not conf.get("spark.master", "").startswith("local"):
        return
    spark.conf.set("spark.sql.shuffle.partitions", str(max(4, 2 * spark.sparkContext.defaultParallelism)))


@dataclass(frozen=True)
class JobOutcome:
    """A finished run as an entry point reports it: the summary to print, the JSON, the exit code."""

    summary: str
    mapping: dict[str, Any]
    exit_code: ExitCode


def run_job(args: argparse.Namespace, job: JobSpec, execute: Callable[[Any], JobOutcome], *,
            preflight: Callable[[], None] | None = None) -> int:
    """Run `execute(spark)`, turning every outcome into an exit code, a summary and --result-json.

    `preflight` checks the configuration before Spark starts (a wrong warehouse should answer in a
    second, not after JVM start-up). Configuration errors exit 2 with their message; anything else
    exits 3 with the traceback in the log. Nothing is swallowed: the result JSON always says what
    happened.
    """
    from statekeeper.errors import ConfigurationError
    from statekeeper.tables.errors import TableError

    configure_logging()
    log = logging.getLogger(job.logger)
    if preflight is not None:
        try:
            preflight()
        except (ConfigurationError, TableError) as exc:
            log.error("configuration error: %s", exc)
            return ExitCode.USAGE
    with spark_session(job.app_name, args.master) as spark:
        try:
            outcome = execute(spark)
        except ConfigurationError as exc:
            log.error("configuration error: %s: %s", type(exc).__name__, exc)
            write_result(args.result_json, {"status": "failed", "error": f"{type(exc).__name__}: {exc}"})
            return ExitCode.USAGE
        except Exception as exc:  # noqa: BLE001 - reported and turned into the exit status
            log.exception("%s failed: %s: %s", job.app_name, type(exc).__name__, exc)
            write_result(args.result_json, {"status": "failed", "error": f"{type(exc).__name__}: {exc}"})
            return ExitCode.INTERNAL
    print(outcome.summary, flush=True)
    write_result(args.result_json, outcome.mapping)
    return outcome.exit_code

"""The one driver of every entry point in spark_jobs/: arguments, options, the Spark session, exit codes.

Every Statekeeper Spark job speaks the same command-line dialect and the same exit codes
(`statekeeper.registry.ExitCode`; what each means for one job is in its registry entry), so
an orchestrator (the Airflow operator, a cron wrapper, a human) can react to any job the same way.
Configuration errors (`statekeeper.errors.ConfigurationError`) exit 2, any other failure 3.

A job package declares its command line once, as a `JobEntry` in its `entry.py`: its own arguments,
how they become its options dataclass, and the exit code of a finished run. This module does the
rest, the same way for every job: parse, build and check the options (and the warehouse) before
Spark starts, start the session, build the job from the registry, `configure` it, execute, print
the summary, write `--result-json`, exit. `spark_jobs/<entry point>.py` is a few lines around
`script(...)`.

pyspark is imported lazily so that `--help` and configuration errors answer in well under a second.
"""
from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Iterator, TypeVar

from statekeeper.errors import ConfigurationError
from statekeeper import registry
from statekeeper.registry import ExitCode, JobSpec

O = TypeVar("O")

S3_EPILOG = ("S3 settings come from the environment: STATEKEEPER_S3_ENDPOINT, AWS_ACCESS_KEY_ID, "
             "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, STATEKEEPER_S3_PATH_STYLE (never from "
             "the command line, where they would show in process listings).")

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class UsageError(ConfigurationError):
    """Arguments argparse cannot refuse by itself (a value out of range, a missing root): reported the
    way argparse reports its own errors, with the usage line, exit 2."""


def _always_ok(result: Any, args: argparse.Namespace) -> ExitCode:
    return ExitCode.OK


@dataclass(frozen=True)
class JobEntry(Generic[O]):
    """A job's command line: what it adds to the common arguments, and what a run's outcome means."""

    job: JobSpec
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    # The job's options dataclass from the parsed arguments: pure, before Spark starts (UsageError,
    # or any ConfigurationError for a value its own parser refuses).
    options: Callable[[argparse.Namespace], O]
    # The exit code of a run that finished (whatever its Result says; exceptions are the driver's).
    exit_code: Callable[[Any, argparse.Namespace], ExitCode] = _always_ok
    # Further checks of the checked options before Spark starts (roots, a second store's settings).
    preflight: Callable[[O], Any] | None = None
    # Builder settings that are not options (a second store's settings: secrets stay out of options).
    wire: Callable[[Any], Any] | None = None


def script(entry_point: str, caller: str) -> tuple[Callable[[], argparse.ArgumentParser], Callable[..., int]]:
    """`parser` and `main` of `spark_jobs/<entry_point>.py`, from its job's `ENTRY` (found through the
    registry); when the script itself runs (`caller`, its `__name__`, is "__main__"), it runs the job and
    exits with its code."""
    if caller == "__main__":
        from statekeeper.launch.pyspark_path import prefer_installed_pyspark

        prefer_installed_pyspark()   # a driver of its own: before the job's modules import PySpark
    entry = importlib.import_module(registry.job(entry_point).entry_module).ENTRY

    def parser() -> argparse.ArgumentParser:
        return build_parser(entry)

    def main(argv: list[str] | None = None) -> int:
        return run(entry, argv)

    if caller == "__main__":
        sys.exit(main())
    return parser, main


def build_parser(entry: JobEntry[Any], prog: str | None = None) -> argparse.ArgumentParser:
    """The common arguments, the job's own, and its exit codes from the registry in the epilog."""
    parser = job_parser(entry.job, entry.description)
    if prog:
        parser.prog = prog
    entry.add_arguments(parser)
    return parser


def run(entry: JobEntry[Any], argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """Parse `argv`, check the options before Spark starts, run the job; the exit code."""
    from statekeeper.tables.errors import TableError

    parser = build_parser(entry, prog)
    args = parser.parse_args(argv)
    configure_logging()
    log = logging.getLogger(entry.job.logger)
    try:
        options = _checked_options(entry, args)
    except UsageError as exc:
        parser.error(str(exc))
    except (ConfigurationError, TableError) as exc:
        log.error("configuration error: %s", exc)
        return ExitCode.USAGE

    def execute(spark: Any) -> JobOutcome:
        from statekeeper.storage import StorageConfig

        job = common_options(_builder(entry.job)(spark), args, StorageConfig.from_env()).configure(options)
        if entry.wire is not None:
            job = entry.wire(job)
        result = job.execute()
        return JobOutcome(result.summary(), result.to_mapping(), entry.exit_code(result, args))

    return run_job(args, entry.job, execute)


def _checked_options(entry: JobEntry[O], args: argparse.Namespace) -> O:
    """The job's options, checked, and whatever else can be checked before Spark starts: a wrong
    setting should answer in a second, not after JVM start-up."""
    from statekeeper.storage import StorageConfig
    from statekeeper.tables.warehouse import Warehouse

    options = entry.options(args)
    options.check()
    if entry.preflight is not None:
        entry.preflight(options)
    # Every job writes the warehouse (its audit table at least), the index too, which creates it.
    Warehouse(args.warehouse, StorageConfig.from_env()).check_writable()
    return options


def _builder(job: JobSpec) -> Callable[[Any], Any]:
    """The job's builder class, named by the registry ("module:Class"); imported only now, with pyspark."""
    module, _, name = job.builder.partition(":")
    return getattr(importlib.import_module(module), name)


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


def add_flag(parser: argparse.ArgumentParser, option: str, help_text: str) -> None:
    """`--option` (true) or `--option=true|false`, which the DAG forms render; off unless given."""
    parser.add_argument(option, nargs="?", const=True, default=False, type=flag, metavar="BOOL", help=help_text)


def add_snapshot_argument(parser: argparse.ArgumentParser, help_text: str) -> None:
    """`--snapshot URI` (repeatable, comma-separated; an empty value is none): read with `snapshots_from`."""
    parser.add_argument("--snapshot", action="append", default=[], metavar="URI", help=help_text)


def add_job_filter(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--job-filter", default="", metavar="GLOB", help=f"only {what} whose name matches this glob")


def add_root_arguments(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--roots", action="append", default=[], metavar="URI[,URI...]",
                        help=f"{help_text}; comma-separated and/or repeated")
    parser.add_argument("--root", action="append", default=[], metavar="URI", help="one root (repeatable)")


def roots_from(args: argparse.Namespace) -> list[str]:
    return [r.strip() for group in args.roots for r in group.split(",") if r.strip()] + list(args.root)


def job_parser(job: JobSpec, description: str) -> argparse.ArgumentParser:
    """The job's parser: its name, the common options, and its exit codes from the registry. Abbreviations are
    refused: on a job that deletes, a prefix must never bind to another option (GC's `--roots true` would be
    `--roots-complete true`)."""
    parser = argparse.ArgumentParser(allow_abbrev=False, prog=job.entry_point, description=description,
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
    parser.add_argument("--engine", default="auto", choices=["auto", "delta-spark"],
                        help="table engine: Delta Lake's Spark integration, the only one (auto is the same; kept "
                             "for existing command lines)")
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

    from statekeeper.launch.session import configure_builder, starts_a_local_jvm

    spark = SparkSession.getActiveSession()
    if spark is not None:
        yield spark
        return
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    builder = configure_builder(builder)
    if starts_a_local_jvm(builder):
        builder = _fit_local_jvm(builder)
    spark = builder.getOrCreate()
    _fit_local_master(spark)
    try:
        yield spark
    finally:
        _stop(spark)


def _stop(spark: Any) -> None:
    """Stop a session this process started, without waiting out PySpark's accumulator server.

    SparkContext.stop() ends with the server's shutdown(), which blocks until the server's loop sees the
    request; the loop looks only between polls of up to a second (0.2 to 0.9 s of each job run on the
    sample store, measured). Only the process that is about to exit stops its session here: the server's
    thread is a daemon and ends with it, and every update a task sent was acknowledged when it arrived."""
    import os

    sc = spark.sparkContext
    server = getattr(sc, "_accumulatorServer", None)
    sc._accumulatorServer = None   # SparkContext.stop() skips the blocking shutdown
    try:
        spark.stop()
    finally:
        if server is not None:
            server.server_shutdown = True   # the request handler leaves its poll loop on its next tick
            address = server.server_address
            if isinstance(address, str) and os.path.exists(address):
                os.remove(address)          # a Unix-socket server's file, as its own shutdown removes it


def _fit_local_jvm(builder: Any) -> Any:
    """This process is about to start the driver JVM itself: keep it on loopback with the UI's kill links off, as
    the DAG's local tasks are; give it the heap they get (Spark's 1 GiB default holds neither a large store's kept
    frames nor its joins), and map the class-data-sharing archive they write, a third off a short job's start-up
    (statekeeper.launch.jvm_startup)."""
    import os

    from statekeeper.launch.jvm_startup import (mapped_archive_option, self_started_heap_conf, self_started_network,
                                         with_java_options)

    conf = dict(getattr(builder, "_options", {}))
    network = self_started_network(conf)
    for key, value in {**network.conf, **self_started_heap_conf(conf)}.items():
        builder = builder.config(key, value)
    # PySpark's launcher starts the JVM with a copy of this process's environment.
    os.environ.update(network.env)
    option = mapped_archive_option(conf)
    return builder.config("spark.driver.extraJavaOptions", with_java_options(conf, option)) if option else builder


def local_master_settings(conf: Mapping[str, str], parallelism: int) -> dict[str, str]:
    """Session settings a local master gets where the deployment chose none (`conf`: what spark-submit,
    spark-defaults.conf or the builder set). A cluster keeps Spark's defaults and adaptive coalescing.

    Shuffle partitions sized to the machine: Spark's default of 200 is meant for clusters; on local[2]
    every join of a small warehouse ran hundreds of near-empty tasks (the chains and validation jobs
    spent most of a minute scheduling them). Whether the driver compiles its code is decided per run, by
    the store's size (statekeeper.launch.codegen).
    """
    from statekeeper.launch.session import on_local_master

    if not on_local_master(conf):
        return {}
    wanted = {"spark.sql.shuffle.partitions": str(max(4, 2 * parallelism))}
    return {key: value for key, value in wanted.items() if key not in conf}


def _fit_local_master(spark: Any) -> None:
    from statekeeper.launch.session import deployment_conf

    for key, value in local_master_settings(deployment_conf(spark), spark.sparkContext.defaultParallelism).items():
        spark.conf.set(key, value)


@dataclass(frozen=True)
class JobOutcome:
    """A finished run as an entry point reports it: the summary to print, the JSON, the exit code."""

    summary: str
    mapping: dict[str, Any]
    exit_code: ExitCode


def run_job(args: argparse.Namespace, job: JobSpec, execute: Callable[[Any], JobOutcome]) -> int:
    """Run `execute(spark)`, turning every outcome into an exit code, a summary and --result-json.

    Configuration errors exit 2 with their message; anything else exits 3 with the traceback in the
    log. Nothing is swallowed: the result JSON always says what happened.
    """
    log = logging.getLogger(job.logger)
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


def argtype(parse: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    """`parse` as an argparse type: its ConfigurationError becomes argparse's own error message."""
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ConfigurationError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = name
    return convert

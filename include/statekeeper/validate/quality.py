"""A Great Expectations suite over the index tables, run by the validation job.

What it asserts (one GX suite per table or derived view):
* every table has exactly its declared columns;
* keys are non-null and unique (files.uri, snapshots.uri, inline_state's natural key,
  dependencies (snapshot, target), pins (target, snapshot));
* sizes and byte counts are non-negative;
* every referenced file is either in `files`, or was stat'ed and found, or is reported by this
  run as missing/unverifiable (`reference_files.accounted`), and every referencing snapshot is
  in `snapshots`;
* checkpoint ids read from `_metadata` equal the ids in their chk-N directory names.

How it runs: Spark computes the metrics every expectation is decided on in one query over all the
assets (statekeeper.validate.quality_metrics); GX's own expectation classes decide and format each
result from them (`metrics_validate`, what GX's validator calls after its engine resolved the
metrics), and GX stores the results and renders the Data Docs. GX's import and set-up run in a
background thread while Spark does the checks, and its evaluation and rendering while the job
writes its tables (`QualitySuite`). GX's own Spark engine spent 46-89 Spark jobs and ~10,000 py4j
calls on the same suite.

A failed expectation means the index itself is inconsistent, so the validation's answers cannot be
trusted: the job reports it and exits with the internal-failure status. Results (JSON) and the
Data Docs HTML are written below the warehouse (`_reports/validation/`).
"""
from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statekeeper.tables.spec import TableSpec
from statekeeper.tables.vocabulary import FileKind, LayoutKind, SnapshotStatus
from statekeeper.tables.warehouse import Warehouse
from statekeeper.uri import join_uri
from statekeeper.validate.checks import STAT_FOUND

log = logging.getLogger("statekeeper.validate")

REPORT_DIR = "_reports/validation"


@dataclass
class Asset:
    """One DataFrame and the expectations it must meet."""

    name: str
    df: Any
    expectations: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


@dataclass(frozen=True)
class QualityReport:
    success: bool
    failures: tuple[str, ...]
    statistics: dict[str, dict[str, Any]]
    results_uri: str | None
    docs_uri: str | None


def _columns(spec: TableSpec) -> tuple[str, dict[str, Any]]:
    return ("ExpectTableColumnsToMatchSet", {"column_set": list(spec.schema.names), "exact_match": True})


def _not_null(*columns: str) -> list[tuple[str, dict[str, Any]]]:
    return [("ExpectColumnValuesToNotBeNull", {"column": c}) for c in columns]


def _non_negative(*columns: str) -> list[tuple[str, dict[str, Any]]]:
    return [("ExpectColumnValuesToBeBetween", {"column": c, "min_value": 0}) for c in columns]


def _true(column: str) -> tuple[str, dict[str, Any]]:
    return ("ExpectColumnValuesToBeInSet", {"column": column, "value_set": [True]})


def table_assets(tables: dict[str, Any], specs: dict[str, TableSpec]) -> list[Asset]:
    """The suite's DataFrames of the tables as read (the rules of each table on its own)."""
    files, snaps, refs = tables["files"], tables["snapshots"], tables["references"]
    assets = [
        Asset("files", files, [_columns(specs["files"]),
                               *_not_null("uri", "root", "root_id", "job_dir", "relative_path", "kind", "size", "mtime"),
                               ("ExpectColumnValuesToBeUnique", {"column": "uri"}), *_non_negative("size")]),
        Asset("snapshots", snaps, [
            _columns(specs["snapshots"]),
            *_not_null("uri", "root", "root_id", "job_dir", "layout_kind", "status", "metadata_size"),
            ("ExpectColumnValuesToBeUnique", {"column": "uri"}),
            ("ExpectColumnValuesToBeInSet", {"column": "status",
                                             "value_set": [s.value for s in SnapshotStatus]}),
            *_non_negative("metadata_size", "inline_bytes", "inline_handle_count", "reference_count",
                           "referenced_file_count", "referenced_bytes")]),
        Asset("references", refs, [
            _columns(specs["references"]),
            *_not_null("snapshot_uri", "root", "root_id", "job_dir", "file_uri", "handle_kind", "file_kind"),
            *_non_negative("stated_size", "segment_start", "segment_length")]),
    ]
    if "inline_state" in tables:
        assets.append(Asset("inline_state", tables["inline_state"], [
            _columns(specs["inline_state"]), *_not_null("snapshot_uri", "handle_kind"),
            ("ExpectCompoundColumnsToBeUnique",
             {"column_list": ["snapshot_uri", "operator_id", "handle_kind", "slot"]}),
            *_non_negative("inline_bytes", "handle_count", "subtask_count")]))
    for name, key in (("dependencies", ["snapshot_uri", "target_uri"]), ("pins", ["target_uri", "snapshot_uri"])):
        if name in tables:
            assets.append(Asset(name, tables[name], [
                _columns(specs[name]), *_not_null(*key),
                ("ExpectCompoundColumnsToBeUnique", {"column_list": key}),
                *_non_negative("files", "directories", "bytes", "depth")]))
    return assets


def cross_table_assets(tables: dict[str, Any], found: Any, stat: Any) -> list[Asset]:
    """Derived views for the rules across tables: every referenced file is accounted for (listed,
    stat'ed or reported), every referencing snapshot is indexed, a checkpoint's id is its directory's.

    `found` are this run's findings (FINDING_COLUMNS), `stat` the stat results of files outside
    the indexed roots (file_uri, stat_status, ...).
    """
    from pyspark.sql import functions as F

    files, snaps, refs = tables["files"], tables["snapshots"], tables["references"]
    assets = []
    reported = found.where(F.col("subject").isNotNull()).select(F.col("subject").alias("file_uri")).distinct() \
        .withColumn("reported", F.lit(True))
    in_files = files.select(F.col("uri").alias("file_uri")).distinct().withColumn("in_files", F.lit(True))
    statted = stat.where(F.col("stat_status") == STAT_FOUND).select("file_uri").withColumn("statted", F.lit(True))
    ref_files = (refs.where(F.col("file_kind") != FileKind.FILE_MERGING_MANAGED_DIR).select("file_uri").distinct()
                 .join(in_files, "file_uri", "left").join(statted, "file_uri", "left").join(reported, "file_uri", "left")
                 .select("file_uri", (F.coalesce("in_files", F.lit(False)) | F.coalesce("statted", F.lit(False))
                                      | F.coalesce("reported", F.lit(False))).alias("accounted")))
    assets.append(Asset("reference_files", ref_files, [*_not_null("file_uri"), _true("accounted")]))
    ref_snaps = (refs.select("snapshot_uri").distinct()
                 .join(snaps.select(F.col("uri").alias("snapshot_uri"), F.lit(True).alias("indexed")),
                       "snapshot_uri", "left")
                 .select("snapshot_uri", F.coalesce("indexed", F.lit(False)).alias("indexed")))
    assets.append(Asset("referencing_snapshots", ref_snaps, [_true("indexed")]))
    ids = snaps.select("uri", ((F.col("layout_kind") != LayoutKind.CHECKPOINT_METADATA)
                               | (F.col("status") != SnapshotStatus.OK)
                               | (F.col("checkpoint_id") == F.col("dir_checkpoint_id"))).alias("id_matches_directory"))
    assets.append(Asset("snapshot_ids", ids, [_true("id_matches_directory")]))
    return assets


class QualitySuite:
    """The suite run beside the validation: GX in one background thread, the metrics in another.

    `import great_expectations` alone takes seconds of one core on the 2-core machine (scipy, altair,
    pandas; the optional backends it would also try are kept out, statekeeper.validate.gx_import), and
    rendering the Data Docs 3-4 s (Jinja compiles its templates in every process). Neither needs Spark,
    so a validation run starts the suite first (the constructor). The tables' own metrics need nothing
    the checks compute: they are submitted as soon as the tables are read and Spark computes them beside
    the checks, whose one-task stages leave room on a local master; the cross-table assets follow the
    checks. `close` hands every metric to GX, which decides each expectation with its own `_validate`
    and builds its results and Data Docs as its engine would, while the job writes its own tables.
    (Measured on the sample store, the suite's own cost came out lower in two comparisons and unchanged
    in a third: docs/benchmarks.md, "The suite beside the checks".)
    """

    def __init__(self, spark: Any, warehouse: Warehouse, run_id: str) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._spark, self._warehouse, self._run_id = spark, warehouse, run_id
        # One worker each: GX's evaluation queues behind its preparation, metric batches run in order.
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="statekeeper-gx")
        self._metrics_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="statekeeper-quality-metrics")
        self._prepared = self._pool.submit(_prepare_gx)
        self._declared: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = []
        self._computed: list[Any] = []
        self._report: Any = None

    def submit(self, assets: list[Asset]) -> None:
        """Compute these assets' metrics in Spark, in the background (in submission order)."""
        self._declared.extend((a.name, a.expectations) for a in assets)
        self._computed.append(self._metrics_pool.submit(self._compute, assets))

    def _compute(self, assets: list[Asset]) -> dict[str, Any]:
        from statekeeper.launch.session import activate
        from statekeeper.validate.quality_metrics import compute

        activate(self._spark)  # a new thread has no active session on the JVM side
        return compute([(a.name, a.df, a.expectations) for a in assets])

    def close(self) -> None:
        """Every asset is submitted: evaluate them in GX once their metrics are in."""
        self._report = self._pool.submit(_evaluate, self._prepared, list(self._declared), list(self._computed),
                                         self._warehouse, self._run_id)

    def result(self) -> QualityReport:
        """The report; re-raises what failed in the background (GX's import and the metrics included)."""
        try:
            return self._report.result()
        finally:
            self._shutdown(cancel=False)

    def abandon(self) -> None:
        """The run failed before the suite was collected: do not keep the process waiting on GX."""
        self._shutdown(cancel=True)

    def _shutdown(self, *, cancel: bool) -> None:
        self._metrics_pool.shutdown(wait=False, cancel_futures=cancel)
        self._pool.shutdown(wait=False, cancel_futures=cancel)


@dataclass
class _Gx:
    gx: Any
    context: Any
    docs: tempfile.TemporaryDirectory


def _prepare_gx() -> _Gx:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    for name in ("great_expectations", "great_expectations.core", "great_expectations.data_context"):
        logging.getLogger(name).setLevel(logging.WARNING)
    from statekeeper.validate.gx_import import import_gx

    gx = import_gx()
    from great_expectations.data_context.types.base import ProgressBarsConfig

    docs = tempfile.TemporaryDirectory(prefix="statekeeper-gx-")
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    context.add_data_docs_site(site_name="statekeeper", site_config={
        "class_name": "SiteBuilder",
        "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": docs.name},
        "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"}})
    return _Gx(gx, context, docs)


RESULT_FORMAT = {"result_format": "SUMMARY"}


def _evaluate(prepared: Any, declared: list[tuple[str, list[tuple[str, dict[str, Any]]]]], computed: list[Any],
              warehouse: Warehouse, run_id: str) -> QualityReport:
    """GX's verdict on every asset from the Spark-computed metrics; results and Data Docs published."""
    metrics: dict[str, Any] = {}
    for batch in computed:
        metrics.update(batch.result())
    g: _Gx = prepared.result()
    from great_expectations.core.run_identifier import RunIdentifier

    run = RunIdentifier(run_name=run_id)
    failures: list[str] = []
    statistics: dict[str, dict[str, Any]] = {}
    results: dict[str, Any] = {}
    try:
        for name, expectations in declared:
            suite = g.gx.ExpectationSuite(name=f"statekeeper.{name}")
            for kind, kwargs in expectations:
                suite.add_expectation(getattr(g.gx.expectations, kind)(**kwargs))
            suite = g.context.suites.add(suite)
            result = _suite_result(g, suite, name, metrics[name], run)
            statistics[name] = dict(result.statistics)
            results[name] = result.to_json_dict()
            failures.extend(_describe_failure(name, r) for r in result.results if not r.success)
        g.context.build_data_docs(site_names=["statekeeper"])
        results_uri, docs_uri = _publish(warehouse, run_id, Path(g.docs.name), results)
    finally:
        g.docs.cleanup()
    success = not failures
    log.info("quality suite %s: %d assets, %d failed expectation(s)", "passed" if success else "FAILED",
             len(declared), len(failures))
    return QualityReport(success, tuple(failures), statistics, results_uri, docs_uri)


def _suite_result(g: _Gx, suite: Any, asset: str, metrics: Any, run: Any) -> Any:
    """One asset's suite validation result, stored for the Data Docs as a validation definition stores it."""
    from great_expectations.core import ExpectationSuiteValidationResult
    from great_expectations.core.batch import LegacyBatchDefinition
    from great_expectations.core.id_dict import IDDict
    from great_expectations.data_context.types.resource_identifiers import (
        ExpectationSuiteIdentifier, ValidationResultIdentifier)
    from great_expectations.validator.validation_statistics import calc_validation_statistics

    batch_id = f"statekeeper-{asset}"
    evrs = []
    for expectation in suite.expectations:
        configuration = expectation.configuration
        configuration.kwargs["batch_id"] = batch_id
        runtime = {"result_format": dict(RESULT_FORMAT)}
        dependencies = expectation.get_validation_dependencies(runtime_configuration=runtime)
        values = {mc.id: _metric_value(metrics, name, mc) for name, mc in dependencies.metric_configurations.items()}
        evr = expectation.metrics_validate(values, runtime_configuration=runtime)
        evr.expectation_config = configuration
        evrs.append(evr)
    stats = calc_validation_statistics(evrs)
    batch_definition = LegacyBatchDefinition(datasource_name="statekeeper", data_connector_name="fluent",
                                             data_asset_name=asset, batch_identifiers=IDDict({"dataframe": "<DATAFRAME>"}))
    result = ExpectationSuiteValidationResult(
        results=evrs, success=stats.success, suite_name=suite.name, batch_id=batch_id,
        statistics={"evaluated_expectations": stats.evaluated_expectations,
                    "successful_expectations": stats.successful_expectations,
                    "unsuccessful_expectations": stats.unsuccessful_expectations,
                    "success_percent": stats.success_percent},
        meta={"great_expectations_version": g.gx.__version__, "batch_spec": {"batch_data": "SparkDataFrame"},
              "active_batch_definition": batch_definition.to_json_dict(),
              "batch_markers": {"ge_load_time": run.run_time.strftime("%Y%m%dT%H%M%S.%fZ")},
              "batch_parameters": {"dataframe": "<DATAFRAME>"}, "run_id": run, "validation_time": run.run_time,
              "checkpoint_id": None})
    suite_id = ExpectationSuiteIdentifier(name=suite.name)
    g.context.validation_results_store.store_validation_results(
        suite_validation_result=result, expectation_suite_identifier=suite_id,
        suite_validation_result_identifier=ValidationResultIdentifier(
            expectation_suite_identifier=suite_id, run_id=run, batch_identifier=batch_id))
    return result


def _metric_value(metrics: Any, name: str, configuration: Any) -> Any:
    """The value GX's Spark engine would give metric `name` on the expectation's domain.

    GX's Spark engine answers an unexpected index list or query only for `unexpected_index_column_names`,
    which the suite does not ask for: None, as there.
    """
    from statekeeper.validate.quality_metrics import COLUMNS, ROW_COUNT, domain_of

    if name in (ROW_COUNT, COLUMNS):
        return metrics.get(name)
    if name.endswith((".unexpected_index_list", ".unexpected_index_query")):
        return None
    return metrics.get(name, domain_of(dict(configuration.metric_domain_kwargs)),
                       dict(configuration.metric_value_kwargs or {}))


def _describe_failure(asset: str, r: Any) -> str:
    cfg = r.expectation_config
    kwargs = {k: v for k, v in (cfg.kwargs or {}).items() if k in ("column", "column_list", "column_set")}
    res = r.result or {}
    detail = ""
    if res.get("unexpected_count") is not None:
        detail = f": {res['unexpected_count']} unexpected, e.g. {res.get('partial_unexpected_list', [])[:3]}"
    elif res.get("observed_value") is not None:
        detail = f": observed {res['observed_value']}"
    return f"{asset}: {cfg.type} {kwargs}{detail}"


def _publish(warehouse: Warehouse, run_id: str, docs: Path, results: dict[str, Any]) -> tuple[str, str | None]:
    fileio = warehouse.file_io()
    base = join_uri(warehouse.uri, REPORT_DIR)
    results_uri = join_uri(base, f"runs/{run_id}/gx_results.json")
    fileio.write(results_uri, json.dumps(results, indent=1, sort_keys=True, default=str).encode("utf-8"))
    docs_uri = None
    for path in sorted(p for p in docs.rglob("*") if p.is_file()):
        target = join_uri(base, f"data_docs/{path.relative_to(docs).as_posix()}")
        fileio.write(target, path.read_bytes())
        if path.relative_to(docs).as_posix() == "index.html":
            docs_uri = target
    return results_uri, docs_uri

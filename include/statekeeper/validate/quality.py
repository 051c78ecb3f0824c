"""A Great Expectations suite over the index tables, run by the validation job on Spark DataFrames.

What it asserts (one GX suite per table or derived view):
* every table has exactly its declared columns;
* keys are non-null and unique (files.uri, snapshots.uri, inline_state's natural key,
  dependencies (snapshot, target), pins (target, snapshot));
* sizes and byte counts are non-negative;
* every referenced file is either in `files`, or was stat'ed and found, or is reported by this
  run as missing/unverifiable (`reference_files.accounted`), and every referencing snapshot is
  in `snapshots`;
* checkpoint ids read from `_metadata` equal the ids in their chk-N directory names.

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


def build_assets(tables: dict[str, Any], specs: dict[str, TableSpec], found: Any, stat: Any) -> list[Asset]:
    """The suite's DataFrames: the tables as read, plus two derived views for cross-table rules.

    `found` are this run's findings (FINDING_COLUMNS), `stat` the stat results of files outside
    the indexed roots (file_uri, stat_status, ...).
    """
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

    return assets + _cross_table_assets(files, snaps, refs, found, stat)


def _cross_table_assets(files: Any, snaps: Any, refs: Any, found: Any, stat: Any) -> list[Asset]:
    """Derived views for the rules across tables: every referenced file is accounted for (listed,
    stat'ed or reported), every referencing snapshot is indexed, a checkpoint's id is its directory's."""
    from pyspark.sql import functions as F

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


def run_suite(assets: list[Asset], warehouse: Warehouse, run_id: str) -> QualityReport:
    """Run every asset's expectations through GX; keep results and Data Docs in the warehouse."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    for name in ("great_expectations", "great_expectations.core", "great_expectations.data_context"):
        logging.getLogger(name).setLevel(logging.WARNING)
    import great_expectations as gx
    from great_expectations.core.run_identifier import RunIdentifier
    from great_expectations.data_context.types.base import ProgressBarsConfig

    failures: list[str] = []
    statistics: dict[str, dict[str, Any]] = {}
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="statekeeper-gx-") as docs:
        context = gx.get_context(mode="ephemeral")
        context.variables.progress_bars = ProgressBarsConfig(globally=False)
        context.add_data_docs_site(site_name="statekeeper", site_config={
            "class_name": "SiteBuilder",
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": docs},
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"}})
        source = context.data_sources.add_spark(name="statekeeper")
        for asset in assets:
            # GX computes each metric with its own Spark job: read the table once, not per metric.
            asset.df = asset.df.persist()
            suite = gx.ExpectationSuite(name=f"statekeeper.{asset.name}")
            for kind, kwargs in asset.expectations:
                suite.add_expectation(getattr(gx.expectations, kind)(**kwargs))
            suite = context.suites.add(suite)
            batch = source.add_dataframe_asset(name=asset.name).add_batch_definition_whole_dataframe("all")
            definition = context.validation_definitions.add(
                gx.ValidationDefinition(name=f"validate.{asset.name}", data=batch, suite=suite))
            # A validation definition stores its result like a checkpoint does; the Data Docs are
            # built once below. A checkpoint per asset with a docs action rebuilt the whole site after
            # every asset (9 builds, each rendering all results so far: 40% of the suite's time).
            result = definition.run(batch_parameters={"dataframe": asset.df}, run_id=RunIdentifier(run_name=run_id),
                                    result_format={"result_format": "SUMMARY"})
            statistics[asset.name] = dict(result.statistics)
            results[asset.name] = result.to_json_dict()
            for r in result.results:
                if not r.success:
                    failures.append(_describe_failure(asset.name, r))
            asset.df.unpersist()
        context.build_data_docs(site_names=["statekeeper"])
        results_uri, docs_uri = _publish(warehouse, run_id, Path(docs), results)
    success = not failures
    log.info("quality suite %s: %d assets, %d failed expectation(s)", "passed" if success else "FAILED", len(assets),
             len(failures))
    return QualityReport(success, tuple(failures), statistics, results_uri, docs_uri)


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

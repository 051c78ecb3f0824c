"""The job registry is the one contract: entry points, audit tables, exit codes and the docs agree with it."""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from statekeeper import cli
from statekeeper.errors import ConfigurationError
from statekeeper.jobs.base import StatekeeperJob
from statekeeper.jobs.registry import JOBS, ExitCode, exit_code_table, job
from statekeeper.jobs.result import JobResult
from statekeeper.storage import errors as storage_errors
from statekeeper.tables import catalog
from statekeeper.tables import errors as table_errors

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("spec", JOBS, ids=lambda s: s.name)
def test_entry_point_speaks_for_its_registry_entry(spec):
    module = importlib.import_module(f"spark_jobs.{spec.entry_point}")
    parser = module.parser()
    assert parser.prog == spec.entry_point
    assert spec.exit_status_help() in parser.epilog
    assert "--warehouse" in parser.format_help() and spec.audit_table in parser.format_help()
    assert (REPO / "spark_jobs" / f"{spec.entry_point}.py").is_file()


@pytest.mark.parametrize("spec", JOBS, ids=lambda s: s.name)
def test_builder_audit_table_and_producer(spec):
    module_name, _, class_name = spec.builder.partition(":")
    builder = getattr(importlib.import_module(module_name), class_name)
    assert issubclass(builder, StatekeeperJob) and builder.JOB is spec
    audit = catalog.spec(spec.audit_table)
    assert audit.producer == spec.name
    assert audit in catalog.produced_by(spec.name)
    # Every audit table carries the columns the base fills for every job.
    for column in ("run_id", "status", "started_at", "finished_at", "warehouse", "statekeeper_version",
                   "table_versions", "airflow_run_id"):
        assert column in audit.schema.names, (spec.audit_table, column)
    assert ExitCode.OK in spec.exit_codes and ExitCode.USAGE in spec.exit_codes
    assert ExitCode.USAGE in spec.final_exit_codes and ExitCode.INTERNAL not in spec.final_exit_codes


def test_every_table_has_a_registered_producer():
    names = {s.name for s in JOBS}
    assert {t.producer for t in catalog.ALL_TABLES} == names
    assert len({t.name for t in catalog.ALL_TABLES}) == len(catalog.ALL_TABLES)
    with pytest.raises(KeyError, match="known: files"):
        catalog.spec("nope")


def test_lookup_by_name_or_entry_point():
    for spec in JOBS:
        assert job(spec.name) is spec and job(spec.entry_point) is spec
    with pytest.raises(KeyError, match="index, chains, validate, gc, dr_copy, compact"):
        job("compress")


def test_readme_exit_code_table_is_the_registry():
    assert exit_code_table() in (REPO / "README.md").read_text()


def test_cli_shares_the_job_codes_it_has_in_common():
    assert cli.EXIT_OK == ExitCode.OK and cli.EXIT_USAGE == ExitCode.USAGE


@pytest.mark.parametrize("error", [
    table_errors.MissingTableError, table_errors.NoCutError, table_errors.TableSchemaError,
    table_errors.UnsupportedTableError, table_errors.EngineUnavailableError,
    storage_errors.StorageConfigError, storage_errors.RootConfigError, storage_errors.UnsupportedSchemeError,
    storage_errors.RootNotFoundError, storage_errors.EmptyRootError])
def test_configuration_errors_share_one_base(error):
    assert issubclass(error, ConfigurationError)


@pytest.mark.parametrize("error", [
    table_errors.ConcurrentCommitError, table_errors.CommitOutcomeUnknownError, table_errors.CutError,
    storage_errors.UnreadableObjectError, storage_errors.OutsideRootError])
def test_runtime_errors_are_not_configuration_errors(error):
    assert not issubclass(error, ConfigurationError)


@pytest.mark.parametrize("spec", JOBS, ids=lambda s: s.name)
def test_audit_row_comes_from_the_result(spec):
    """Every audit column is filled from the Result's fields or the base's context: a Result that
    lacks one is an error here, not a null in production."""
    from datetime import datetime, timezone

    module_name, _, _ = spec.builder.partition(":")
    module = importlib.import_module(module_name)
    result_type = next(v for v in vars(module).values()
                       if isinstance(v, type) and issubclass(v, JobResult) and v is not JobResult)
    now = datetime.now(timezone.utc)
    extra = {"index": lambda: {"roots": ("file:///r",), "engine": "delta-spark", "stats": module.UnitStats()},
             "chains": lambda: {"source_versions": {"snapshots": 1}},
             "validate": lambda: {"roots": (), "source_versions": {"snapshots": 1}},
             "gc": lambda: {"mode": module.GcMode.PLAN, "plan_run_id": "r1", "source_versions": {"snapshots": 1},
                            "breakdown": (module.Reclaim("file:///r", "j", "orphan", 2, 10),)},
             "dr_copy": lambda: {"mode": module.DrMode.COPY, "source_versions": {"snapshots": 1},
                                 "targets": {"file:///r": "file:///dr/r"}, "problems": ("p",)},
             "compact": lambda: {"mode": module.CompactMode.COMPACT, "source_versions": {"snapshots": 1},
                                 "report": ({"job_dir": "j", "operator_id": "o", "operator_name": None,
                                             "operator_uid": "u", "snapshots": 1, "inline_bytes": 10,
                                             "movable_bytes": 8, "handle_count": 2},)},
             "maintain_warehouse": lambda: {"mode": module.MaintenanceMode.MAINTAIN},
             "report": lambda: {"source_versions": {"snapshots": 1}}}[spec.name]()
    result = result_type(run_id="r1", status="failed", started_at=now, finished_at=now, warehouse="/w",
                         table_versions={"a": 1, "b": None}, error="boom", **extra)
    context = {"statekeeper_version": "0", "airflow_run_id": None, "data_interval_start": None,
               "data_interval_end": None, "options": "{}"}
    row = result.audit_row(catalog.spec(spec.audit_table), context).to_pylist()[0]
    assert row["run_id"] == "r1" and row["status"] == "failed" and row["warehouse"] == "/w"
    assert row["error"] == "boom" if "error" in row else row["errors"] == []
    assert row["table_versions"] == [("a", 1)]      # versions never written are absent, not null
    mapping = result.to_mapping()
    assert mapping["run_id"] == "r1" and mapping["seconds"] == 0.0 and mapping["started_at"] == now.isoformat()


def test_no_job_package_imports_another():
    """What two jobs share lives in layout/, tables/ or jobs/, so a new job never drags another in."""
    import ast

    packages = [spec.builder.split(":")[0].split(".")[1] for spec in JOBS]
    offenders = []
    for package in packages:
        for path in sorted((REPO / "include" / "statekeeper" / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                for name in names:
                    parts = name.split(".")
                    if len(parts) > 1 and parts[0] == "statekeeper" and parts[1] in packages and parts[1] != package:
                        offenders.append(f"{path.relative_to(REPO)}: {name}")
    assert offenders == []

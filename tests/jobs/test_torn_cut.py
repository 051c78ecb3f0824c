"""Every job that reads the index refuses a torn cut and writes nothing from it.

The cut's check (statekeeper.jobs.inputs.check_consistent) runs beside the reads some jobs keep
(StatekeeperJob._read_cut): a torn cut must still stop the run before any table is written. The cut
here is torn the way a run that died between two commits would leave it if the audit row had landed
anyway: `references` holds one row more than its snapshot's `reference_count`, and the newest
succeeded `index_runs` row names it.
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pytest

from statekeeper.tables import Warehouse
from statekeeper.tables.catalog import spec
from statekeeper.tables.delta_spark import DeltaSparkEngine
from statekeeper.tables.reader import TableReader
from tests.gc.support import local, uri

pytestmark = pytest.mark.spark

VERSION = "2.3.0"
DERIVED = ("dependencies", "pins", "validation_results", "validation_jobs", "gc_actions", "compactions",
           "dr_copies", "dr_files")


def _tear(spark, warehouse: Warehouse) -> str:
    """Append a duplicate reference and an audited index run naming it; the torn snapshot's URI."""
    reader = TableReader(warehouse)
    refs = reader.read("references")
    row = refs.slice(0, 1)
    engine = DeltaSparkEngine()
    torn = engine.append_rows(spark, warehouse, spec("references"), row).version
    newest = reader.newest("index_runs")
    audit = spec("index_runs")
    forged = {**newest, "run_id": "torn-cut", "finished_at": datetime.now(timezone.utc),
              "table_versions": {**dict(newest["table_versions"]), "references": torn}}
    engine.append_rows(spark, warehouse, audit, pa.Table.from_pylist([forged], schema=audit.schema))
    return row.column("snapshot_uri")[0].as_py()


def _report(warehouse: Warehouse, base: Path) -> tuple[int, dict]:
    import json

    from spark_jobs.build_report import main

    out = base / "report.json"
    code = main(["--warehouse", warehouse.uri, "--progress-interval", "0", "--result-json", str(out)])
    return code, (json.loads(out.read_text()) if out.exists() else {})


def _versions(warehouse: Warehouse) -> dict[str, int | None]:
    reader = TableReader(warehouse)
    return {name: reader.version(name) for name in DERIVED}


def test_every_job_that_reads_the_index_refuses_a_torn_cut(spark, prepared_store, tmp_path: Path, request) -> None:
    from tests.compact.support import CompactPipeline

    co = prepared_store("chain_claim", VERSION).checkout(tmp_path, request.node.nodeid)
    pipeline = co.pipeline
    torn = _tear(spark, pipeline.warehouse)
    before = _versions(pipeline.warehouse)
    target = tmp_path / "dr"

    # a failed run (exit 3, its audit row says why), not a usage error: the arguments are right
    assert pipeline.chains() == 3
    assert pipeline.validate() == 3
    outcomes = {
        "gc_runs": pipeline.gc("--mode", "plan"),
        "compaction_runs": CompactPipeline(spark, pipeline.warehouse, pipeline.roots, tmp_path).compact(),
        "dr_runs": pipeline.dr("--target", uri(target), "--allowed-targets", uri(target)),
        "report_runs": _report(pipeline.warehouse, tmp_path),
    }
    for audit, (code, result) in outcomes.items():
        assert code == 3, (audit, result)
        assert "not a consistent cut" in result["error"] and torn in result["error"], (audit, result)

    assert _versions(pipeline.warehouse) == before   # nothing written from the torn cut
    assert not list(local(pipeline.warehouse.uri).glob("_reports/runs/*/index.html"))   # no page published
    assert not target.exists() or not any(p.is_file() for p in target.rglob("*"))   # nothing copied
    reader = TableReader(pipeline.warehouse)
    for audit in ("chains_runs", "validation_runs", *outcomes):
        run = reader.newest(audit)
        assert run["status"] == "failed" and "not a consistent cut" in run["error"], (audit, run)

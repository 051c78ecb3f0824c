"""A warehouse written before warehouse maintenance became a job of its own, and before gc_runs had its
typed grace column, read and maintained by this version.

The old warehouse is written as that version wrote it: gc_runs without `grace_seconds` (its grace period
only in the `options` JSON), a compaction_runs row of the maintenance GC's compaction ran
(`mode` maintain_warehouse, its report as JSON in `maintenance`), no maintenance_runs. Nothing of it is
rewritten: gc_runs gains the column by one ADD COLUMN commit on GC's next append (its old rows read
null, and their grace comes from the JSON), the legacy compaction_runs row stays as it was, and the
maintenance job writes maintenance_runs beside it.
"""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pytest

from statekeeper.tables import TableSpec, Warehouse, delta_log
from statekeeper.tables.catalog import COMPACTION_RUNS, GC_RUNS, INDEX_RUNS
from tests.tables.writes import append_rows
from statekeeper.tables.maintenance import retention_pins
from statekeeper.tables.reader import TableReader

NOW = datetime.now(timezone.utc)
DAY = timedelta(days=1)
# gc_runs as the previous version declared it: everything but the typed grace column.
# Columns added since (grace_seconds, then Flink 2.x's forst) trail the schema: the old one stops before them.
OLD_GC_RUNS = TableSpec("gc_runs", pa.schema(list(GC_RUNS.schema)[:GC_RUNS.schema.get_field_index("grace_seconds")]),
                        GC_RUNS.partition_by, producer="gc")
# Only its commits matter to the retention floor: a stand-in with a schema of its own.
REFERENCES = TableSpec("references", pa.schema([pa.field("n", pa.int64())]))


def _row(spec: TableSpec, **values: Any) -> pa.Table:
    """One row of `spec`: `values`, every other non-null column an empty value of its type."""
    def empty(t: pa.DataType) -> Any:
        if pa.types.is_timestamp(t):
            return NOW
        if pa.types.is_list(t) or pa.types.is_map(t):
            return []
        if pa.types.is_integer(t) or pa.types.is_floating(t):
            return 0
        if pa.types.is_boolean(t):
            return False
        return ""
    row = {f.name: values[f.name] if f.name in values else (None if f.nullable else empty(f.type)) for f in spec.schema}
    return pa.Table.from_pylist([row], schema=spec.schema)


def _append(warehouse: Warehouse, spec: TableSpec, **values: Any) -> None:
    append_rows(warehouse, spec, _row(spec, **values))


def _old_warehouse(tmp_path) -> Warehouse:
    """Two succeeded index runs (5 days ago: references v0; now: v1), a GC run of the old version with a
    10-day grace period, and the compaction_runs row of the old maintenance."""
    wh = Warehouse(str(tmp_path / "warehouse"))
    for n in (0, 1):
        _append(wh, REFERENCES, n=n)
    for run_id, finished, version in (("idx-old", NOW - 5 * DAY, 0), ("idx-new", NOW, 1)):
        _append(wh, INDEX_RUNS, run_id=run_id, status="succeeded", started_at=finished, finished_at=finished,
                table_versions=[("references", version)])
    _append(wh, OLD_GC_RUNS, run_id="gc-old", status="planned", mode="plan", plan_run_id="gc-old",
            options=json.dumps({"older_than": (10 * DAY).total_seconds()}))
    _append(wh, COMPACTION_RUNS, run_id="cmp-old", status="succeeded", mode="maintain_warehouse",
            options="{}", maintenance=json.dumps({"summary": "warehouse maintenance ...", "files_compacted": 3}))
    return wh


def _referenced_pins(wh: Warehouse) -> dict[int, str]:
    return {p.version: p.pinned_by for p in retention_pins(wh, NOW)["references"]}


def test_old_gc_rows_keep_their_grace_period_from_the_options_json(tmp_path):
    wh = _old_warehouse(tmp_path)
    assert "grace_seconds" not in delta_log.load_state(wh, "gc_runs").schema.names
    # the 5-day-old run is inside the old run's 10-day grace period (GC's default, 3d, would not keep it)
    assert "10d grace period" in _referenced_pins(wh)[0]


@pytest.mark.spark
def test_the_next_gc_append_adds_the_column_and_new_rows_are_read_by_it(spark, tmp_path):
    from statekeeper.tables.delta_spark import DeltaSparkEngine

    wh = _old_warehouse(tmp_path)
    before = delta_log.latest_version(wh, "gc_runs")
    # a GC run of this version, appended as the GC job appends it: its grace period typed; its options JSON is not
    # what is read
    DeltaSparkEngine().append_rows(spark, wh, GC_RUNS, _row(
        GC_RUNS, run_id="gc-new", status="planned", mode="plan", plan_run_id="gc-new",
        options=json.dumps({"older_than": DAY.total_seconds()}), grace_seconds=(14 * DAY).total_seconds()))
    state = delta_log.load_state(wh, "gc_runs")
    assert state.schema.names == GC_RUNS.schema.names
    # the log-keeping property on a table no Spark job created, then the append adding the column
    assert state.version == before + 2
    rows = {r["run_id"]: r for r in TableReader(wh).read("gc_runs").to_pylist()}
    assert rows["gc-old"]["grace_seconds"] is None and rows["gc-new"]["grace_seconds"] == (14 * DAY).total_seconds()
    assert "2w grace period" in _referenced_pins(wh)[0]


@pytest.mark.spark
def test_the_maintenance_job_runs_on_an_old_warehouse_and_leaves_the_legacy_rows(spark, tmp_path):
    from statekeeper.maintain.job import MaintainWarehouse
    from statekeeper.maintain.options import MaintainOptions

    wh = _old_warehouse(tmp_path)
    legacy = TableReader(wh).read("compaction_runs").to_pylist()
    result = (MaintainWarehouse(spark).warehouse(wh).progress_interval(0)
              .configure(MaintainOptions(retention=timedelta(days=7))).execute())
    assert result.status == "succeeded", result.summary()
    assert TableReader(wh).read("compaction_runs").to_pylist() == legacy
    [row] = TableReader(wh).read("maintenance_runs").to_pylist()
    assert row["run_id"] == result.run_id and row["mode"] == "maintain" and row["status"] == "succeeded"
    assert {t["name"]: t["outcome"] for t in row["tables"]}["gc_runs"] == "maintained"
    assert {t["name"] for t in row["tables"] if t["outcome"] == "absent"} >= {"files", "snapshots", "dr_runs"}

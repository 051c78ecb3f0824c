"""gc_runs.protection and dr_runs.protection were added after both tables' first release: trailing and nullable,
so a warehouse written by the previous version reads as before (its rows: null), and the next run's append widens
the table by one ADD COLUMN commit (delta_log.add_missing_columns) without rewriting a row. The rows written here
are what the jobs write (their Result's audit_row), with the records statekeeper.jobs.protection reads back."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pytest

from statekeeper.jobs.protection import StoreProtection, summary_lines
from statekeeper.storage.enforcement import Guard, Verdict
from statekeeper.tables import TableSpec, Warehouse, delta_log
from statekeeper.tables.catalog import DR_RUNS, GC_RUNS
from tests.tables.writes import append_rows
from statekeeper.tables.reader import TableReader
from statekeeper.tables.vocabulary import Protection

NOW = datetime.now(timezone.utc)


def _row(spec: TableSpec, **values: Any) -> pa.Table:
    def empty(t: pa.DataType) -> Any:
        if pa.types.is_timestamp(t):
            return NOW
        if pa.types.is_list(t) or pa.types.is_map(t):
            return []
        if pa.types.is_integer(t) or pa.types.is_floating(t):
            return 0
        return "" if not pa.types.is_boolean(t) else False
    row = {f.name: values.get(f.name, None if f.nullable else empty(f.type)) for f in spec.schema}
    return pa.Table.from_pylist([row], schema=spec.schema)


@pytest.mark.parametrize("spec", [GC_RUNS, DR_RUNS], ids=["gc_runs", "dr_runs"])
def test_an_older_runs_table_gains_the_protection_column_and_its_rows_read_null(tmp_path, spec):
    wh = Warehouse(str(tmp_path / "warehouse"))
    old = TableSpec(spec.name, pa.schema(list(spec.schema)[:spec.schema.get_field_index("protection")]),
                    spec.partition_by, producer=spec.producer)
    append_rows(wh, old, _row(old, run_id="old", status="completed", mode="delete", plan_run_id="old"))
    assert "protection" not in delta_log.load_state(wh, spec.name).schema.names
    # The old table reads as before, with the new column as null.
    assert [r["protection"] for r in TableReader(wh).read(spec.name).to_pylist()] == [None]

    records = (StoreProtection("s3://b at http://127.0.0.1:1", Guard.CONDITIONAL_DELETE, Verdict.IGNORED,
                               Protection.LISTING, "ignored"),
               StoreProtection("gs://g at Google", Guard.PINNED_COPY, Verdict.ENFORCED, Protection.PRECONDITION, "ok"))
    append_rows(wh, spec, _row(spec, run_id="new", status="completed", mode="delete", plan_run_id="new",
                                            protection=[r.row() for r in records]))
    rows = {r["run_id"]: r for r in TableReader(wh).read(spec.name).to_pylist()}
    assert rows["old"]["protection"] is None
    assert tuple(StoreProtection.from_row(p) for p in rows["new"]["protection"]) == records
    assert summary_lines(records) == [
        "  protection: s3://b at http://127.0.0.1:1: the per-key ETag of DeleteObjects: listing (ignored)",
        "  protection: gs://g at Google: ifSourceGenerationMatch on a rewrite: precondition (enforced)"]

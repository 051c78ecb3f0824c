"""Driver-side planning: which units a run covers and how they are spread over tasks."""
from __future__ import annotations

import pyarrow as pa
import pytest

from statekeeper.index.planner import PlannedUnit, balance, plan_units
from statekeeper.index.unit import UnitPlan
from statekeeper.storage import LocalFileIO, Root, Roots
from statekeeper.tables.delta_log import TableState
from statekeeper.tables.files import DataFile


def unit(job: str, weight: int) -> PlannedUnit:
    return PlannedUnit(UnitPlan(Root("file:///r"), job, {}), weight)


def test_balance_spreads_by_expected_size():
    units = [unit("big", 1000), unit("a", 10), unit("b", 10), unit("c", 10), unit("d", 500), unit("e", 490)]
    bins = balance(units, 3)
    loads = sorted(sum(u.weight for u in b) for b in bins)
    assert len(bins) == 3 and loads == [510, 510, 1000]
    assert sorted(u.plan.job_dir for b in bins for u in b) == sorted(u.plan.job_dir for u in units)


def test_balance_first_run_spreads_by_count():
    bins = balance([unit(str(i), 0) for i in range(10)], 4)
    assert sorted(len(b) for b in bins) == [2, 2, 3, 3]
    assert balance([], 4) == [] and len(balance([unit("x", 0)], 8)) == 1


def _state(name: str, root: Root, job_dirs: list[str]) -> TableState:
    files = tuple(DataFile(f"p/{j}.parquet", 1, {"root_id": root.root_id, "job_dir": j}, 0, 7) for j in job_dirs)
    return TableState(f"file:///wh/{name}", 3, pa.schema([]), ("root_id", "job_dir"), files)


def test_plan_units_covers_children_root_files_and_vanished_units(tmp_path):
    (tmp_path / "r" / "job1" / "chk-1").mkdir(parents=True)
    (tmp_path / "r" / "savepoint-abcdef-0123456789ab").mkdir()
    roots = Roots([str(tmp_path / "r")])
    root = next(iter(roots))
    states = {"files": _state("files", root, ["job1", "gone-job"]), "snapshots": None}
    units = plan_units(LocalFileIO(), roots, states)
    names = [u.plan.job_dir for u in units]
    assert names == [".", "gone-job", "job1", "savepoint-abcdef-0123456789ab"]
    by_name = {u.plan.job_dir: u for u in units}
    assert by_name["gone-job"].plan.previous["files"][0].path == "p/gone-job.parquet"
    assert by_name["job1"].weight == 7 and by_name["savepoint-abcdef-0123456789ab"].weight == 0
    filtered = plan_units(LocalFileIO(), roots, states, job_filter="job*")
    assert [u.plan.job_dir for u in filtered] == ["job1"]


def test_plan_units_refuses_missing_root(tmp_path):
    from statekeeper.storage import RootNotFoundError

    with pytest.raises(RootNotFoundError):
        plan_units(LocalFileIO(), Roots([str(tmp_path / "absent")]), {})

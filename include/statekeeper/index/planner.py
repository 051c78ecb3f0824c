"""Driver-side planning of an index run: which units exist, what each had last time.

The driver lists only the roots' child directories (job directories, savepoint directories) and
reads the Delta logs' file lists (one entry per data file, not per row); the objects below the
children are listed inside Spark tasks.
"""
from __future__ import annotations

import fnmatch
import heapq
from dataclasses import dataclass

from statekeeper.index.unit import UnitPlan
from statekeeper.storage import Roots
from statekeeper.storage.base import FileIO
from statekeeper.tables.catalog import INDEX_TABLES, ROOT_LEVEL_JOB_DIR
from statekeeper.tables.delta_log import TableState
from statekeeper.tables.files import DataFile


@dataclass(frozen=True)
class PlannedUnit:
    plan: UnitPlan
    weight: int          # expected rows (objects) of the unit, for balancing tasks


def plan_units(storage: FileIO, roots: Roots, states: dict[str, TableState | None],
               job_filter: str | None = None) -> list[PlannedUnit]:
    previous: dict[tuple[str, str], dict[str, list[DataFile]]] = {}
    for spec in INDEX_TABLES:
        state = states.get(spec.name)
        if state is None:
            continue
        for (root_id, job_dir), files in state.files_by_partition().items():
            previous.setdefault((root_id, job_dir), {})[spec.name] = files

    units: list[PlannedUnit] = []
    for root in roots:
        storage.check_directory(root.uri)  # fail closed on a missing mount or bucket
        names = {d.rstrip("/").rpartition("/")[2] for d in storage.list_dirs(root.uri)}
        names.add(ROOT_LEVEL_JOB_DIR)
        # Units indexed before but gone now are planned too: their rows must disappear.
        names |= {job_dir for (root_id, job_dir) in previous if root_id == root.root_id}
        if job_filter:
            names = {n for n in names if n != ROOT_LEVEL_JOB_DIR and fnmatch.fnmatchcase(n, job_filter)}
        for name in sorted(names):
            prev = previous.get((root.root_id, name), {})
            weight = sum(f.num_records for f in prev.get("files", []))
            units.append(PlannedUnit(UnitPlan(root, name, prev), weight))
    return units


def balance(units: list[PlannedUnit], bins: int) -> list[list[PlannedUnit]]:
    """Longest-processing-time-first assignment of units to `bins` tasks by expected size.

    Units never indexed before get the median known weight, so a first run degrades to an even
    spread by count.
    """
    if not units:
        return []
    bins = max(1, min(bins, len(units)))
    known = sorted(u.weight for u in units if u.weight > 0)
    default = known[len(known) // 2] if known else 1
    ordered = sorted(units, key=lambda u: (-(u.weight or default), u.plan.root.uri, u.plan.job_dir))
    heap = [(0, i) for i in range(bins)]
    out: list[list[PlannedUnit]] = [[] for _ in range(bins)]
    for unit in ordered:
        load, i = heapq.heappop(heap)
        out[i].append(unit)
        heapq.heappush(heap, (load + (unit.weight or default) + 1, i))
    return [b for b in out if b]

"""Warehouse maintenance: compact, vacuum and checkpoint Statekeeper's own Delta tables.

Every index run replaces the data file of each changed bucket partition, every audit row is one
more small file, and nothing ever deleted the replaced files: the warehouse grows by a few files
per table and run. `maintain_warehouse` does, per table of the warehouse (absent ones skipped):

1. `DeltaTable.optimize.compact()`: bin-packs the live files of each partition (only partitions
   holding more than one file are touched; at Statekeeper's sizes one file per partition results);
2. `DeltaTable.vacuum(full=True)` with the requested retention: the files the log removed, and the files no
   version references (a write whose driver died after Delta's writer wrote its data files and before the commit),
   keeping the files of every pinned version (`keep_versions`, see below) whatever their age;
3. `DeltaTable.create_checkpoint()`, so readers replay one parquet checkpoint instead of every
   commit. The log itself is never cleaned up (no `cleanup_metadata`): readers time-travel to
   pinned versions, and a version whose commit file is gone cannot be read at all.

**The retention floor.** Readers do not read the latest version of every table: jobs read the
index tables at the versions the newest succeeded index run recorded (`statekeeper.tables.cut`),
derived tables record the versions they read (`source_versions`) and wrote (`table_versions`) in
their audit rows, an interrupted GC run is resumed on the index versions it planned from, GC
reads `references` of every succeeded index run inside its grace period, and the next index run
restores the index tables to the newest succeeded-or-partial run. A reader at version V needs
the files that commits after V removed. Vacuum with retention R deletes files removed more than R
ago, so maintenance refuses (RetentionFloorError, before changing any table) when `now - R` is
later than the commit time of V + 1 for any pinned V (precisely: of the first commit after V that
may remove files; vacuum's own START/END commits remove none). On top of that check every pinned
version is passed to vacuum as `keep_versions`, so its files survive whatever their removal time
says, including the files compaction itself just removed from a pinned version.

**Not concurrently with a writer.** Optimize and vacuum commit to the tables (vacuum records two
commits, VACUUM START and VACUUM END). Statekeeper's writers commit strictly against the version
they planned from, so a run that writes while maintenance commits fails with
ConcurrentCommitError and has to be re-run; in the other direction, a compaction whose input files
a concurrent run replaced fails with a delta-rs commit conflict, which is reported as that table
being skipped (its state stays as the other writer left it) while the other tables go on.
Schedule maintenance between runs (weekly is plenty at one index run an hour).

Pure library: of third-party packages only deltalake and pyarrow, deltalake imported lazily (it
must never be initialised in a process Spark forks its workers from); no Spark, no Airflow.
"""
from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta, timezone
from enum import StrEnum
from typing import Any
from urllib.parse import unquote

from statekeeper.defaults import GC_GRACE, WAREHOUSE_RETENTION
from statekeeper.tables import delta_log
from statekeeper.tables.errors import MaintenanceOptionsError, RetentionFloorError, TableError
from statekeeper.tables.warehouse import Warehouse
from statekeeper.units import format_duration, human_size
from statekeeper.uri import join_uri

logger = logging.getLogger("statekeeper.tables")

DEFAULT_RETENTION = WAREHOUSE_RETENTION
MAINTENANCE_OPERATION = "maintenance"   # statekeeper.operation in the commits maintenance makes
_HOUR = timedelta(hours=1)
# Commits that remove no data file: vacuum's own bookkeeping commits.
_REMOVES_NOTHING = frozenset({"VACUUM START", "VACUUM END"})
_SHOWN = 5   # pins named in a RetentionFloorError's message (all are in its `pins`)
# Delta's default for delta.deletedFileRetentionDuration (a checkpoint forgets older removals).
_DELTA_DELETED_FILE_RETENTION = timedelta(days=7)
_INTERVAL = re.compile(r"^\s*(?:interval\s+)?(\d+)\s*([a-z]+)\s*$", re.IGNORECASE)
_INTERVAL_UNITS = {"millisecond": timedelta(milliseconds=1), "second": timedelta(seconds=1),
                   "minute": timedelta(minutes=1), "hour": _HOUR, "day": timedelta(days=1),
                   "week": timedelta(weeks=1)}


class TableOutcome(StrEnum):
    """What maintenance did to one table."""

    MAINTAINED = "maintained"  # compacted / vacuumed / checkpointed as needed (possibly nothing to do)
    DRY_RUN = "dry_run"        # nothing changed; the counts are what a real run would act on
    ABSENT = "absent"          # the table is not in the warehouse: skipped
    CONFLICT = "conflict"      # a concurrent writer committed: skipped from that step on, see `skipped`


@dataclass(frozen=True)
class RetentionPin:
    """One version of a table that some reader reads, and who pins it."""

    table: str
    version: int
    pinned_by: str                         # e.g. "chains_runs run chains-... (source_versions)"
    committed_at: datetime | None = None   # commit time of `version`
    # The first commit after `version` that may have removed data files (any but vacuum's own
    # VACUUM START / VACUUM END commits) and its time: from then on vacuum's clock runs for the
    # files this version needs. None: no commit since removed any, nothing of it can be vacuumed.
    removed_by: int | None = None
    removed_at: datetime | None = None

    def safe_retention(self, now: datetime) -> timedelta:
        """The smallest retention (whole hours, as vacuum takes them) that keeps this version readable."""
        if self.removed_at is None or self.removed_at >= now:
            return timedelta(0)
        return _ceil_hours(now - self.removed_at)

    def describe(self) -> str:
        committed = "?" if self.committed_at is None else self.committed_at.isoformat(timespec="seconds")
        removed = ("no commit since removed files" if self.removed_at is None
                   else f"its files removed from version {self.removed_by} on, committed "
                        f"{self.removed_at.isoformat(timespec='seconds')}")
        return f"{self.table} version {self.version} (committed {committed}, {removed}), pinned by {self.pinned_by}"

    def to_mapping(self) -> dict[str, Any]:
        return _plain(asdict(self))


@dataclass(frozen=True)
class TableMaintenance:
    """One table's maintenance: its state before and after, and what each step did."""

    name: str
    outcome: TableOutcome
    version_before: int | None = None
    version_after: int | None = None
    files_before: int = 0              # live data files (the table's version)
    files_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    stored_files_before: int = 0       # data files on storage (live, removed, leftovers)
    stored_files_after: int = 0        # (dry run: what would remain)
    stored_bytes_before: int = 0
    stored_bytes_after: int = 0
    partitions: int = 0                # partitions with live files (after)
    partitions_compacted: int = 0      # partitions that held more than one file
    files_compacted: int = 0           # live files optimize removed (dry run: would remove)
    files_added: int = 0               # files optimize wrote (dry run: one per compacted partition)
    bytes_compacted: int | None = None
    files_vacuumed: int = 0            # files vacuum deleted from storage (dry run: would delete)
    bytes_vacuumed: int = 0
    checkpoint_version: int | None = None   # the checkpoint written (None: none written)
    pins: tuple[RetentionPin, ...] = ()     # versions readers are pinned to, kept by vacuum
    skipped: str | None = None              # why (part of) the table was skipped
    notes: tuple[str, ...] = ()

    def line(self) -> str:
        if self.outcome is TableOutcome.ABSENT:
            return f"{self.name}: absent, skipped"
        would = "would be " if self.outcome is TableOutcome.DRY_RUN else ""
        text = (f"{self.name}: v{self.version_before}"
                + ("" if self.version_after == self.version_before else f" -> v{self.version_after}")
                + f", {self.files_before} -> {self.files_after} live file(s) in {self.partitions} partition(s)")
        if self.files_compacted:
            text += (f"; {self.files_compacted} file(s) of {self.partitions_compacted} partition(s) {would}compacted "
                     f"into {self.files_added}")
        text += f"; {self.files_vacuumed} file(s) {would}vacuumed"
        if self.bytes_vacuumed:
            text += f" ({human_size(self.bytes_vacuumed)})"
        text += (f"; {self.stored_files_before} -> {self.stored_files_after} file(s) on storage "
                 f"({human_size(self.stored_bytes_before)} -> {human_size(self.stored_bytes_after)})")
        if self.checkpoint_version is not None:
            text += f"; checkpoint at v{self.checkpoint_version}"
        if self.pins:
            text += f"; oldest pinned version v{min(p.version for p in self.pins)}"
        if self.skipped:
            text += f"; SKIPPED: {self.skipped}"
        return text

    def to_mapping(self) -> dict[str, Any]:
        out = _plain({k: v for k, v in asdict(self).items() if k != "pins"})
        out["pins"] = [p.to_mapping() for p in self.pins]
        return out

    def audit_row(self) -> dict[str, Any]:
        """This table's entry of `maintenance_runs.tables` (statekeeper.tables.catalog.maintain)."""
        from statekeeper.tables.catalog.maintain import MAINTAINED_TABLE

        values = {**asdict(self), "outcome": self.outcome.value, "notes": list(self.notes),
                  "pinned_versions": sorted({p.version for p in self.pins})}
        return {f.name: values[f.name] for f in MAINTAINED_TABLE}


@dataclass(frozen=True)
class MaintenanceReport:
    warehouse: str
    retention: timedelta               # as vacuum applied it (whole hours, rounded up)
    dry_run: bool
    started_at: datetime
    finished_at: datetime
    tables: tuple[TableMaintenance, ...] = ()

    @property
    def seconds(self) -> float:
        return (self.finished_at - self.started_at).total_seconds()

    def _sum(self, name: str) -> int:
        return sum(getattr(t, name) or 0 for t in self.tables)

    @property
    def files_before(self) -> int:
        return self._sum("files_before")

    @property
    def files_after(self) -> int:
        return self._sum("files_after")

    @property
    def files_compacted(self) -> int:
        return self._sum("files_compacted")

    @property
    def files_added(self) -> int:
        return self._sum("files_added")

    @property
    def files_vacuumed(self) -> int:
        return self._sum("files_vacuumed")

    @property
    def bytes_vacuumed(self) -> int:
        return self._sum("bytes_vacuumed")

    @property
    def stored_files_before(self) -> int:
        return self._sum("stored_files_before")

    @property
    def stored_files_after(self) -> int:
        return self._sum("stored_files_after")

    @property
    def skipped(self) -> tuple[TableMaintenance, ...]:
        return tuple(t for t in self.tables if t.outcome in (TableOutcome.ABSENT, TableOutcome.CONFLICT))

    def table(self, name: str) -> TableMaintenance:
        for t in self.tables:
            if t.name == name:
                return t
        raise KeyError(name)

    def summary(self) -> str:
        present = [t for t in self.tables if t.outcome is not TableOutcome.ABSENT]
        would = "would be " if self.dry_run else ""
        head = (f"warehouse maintenance{' (dry run: nothing changed)' if self.dry_run else ''} of {self.warehouse} "
                f"in {self.seconds:.1f}s, retention {_format_duration(self.retention)}: {len(present)} table(s), "
                f"{self.files_before} -> {self.files_after} live file(s), {self.files_compacted} {would}compacted "
                f"into {self.files_added}, {self.files_vacuumed} {would}vacuumed"
                + (f" ({human_size(self.bytes_vacuumed)})" if self.bytes_vacuumed else "")
                + f"; {self.stored_files_before} -> {self.stored_files_after} data file(s) on storage")
        lines = [head, *(f"  {t.line()}" for t in present)]
        absent = [t.name for t in self.tables if t.outcome is TableOutcome.ABSENT]
        if absent:
            lines.append(f"  absent (skipped): {', '.join(absent)}")
        for t in self.tables:
            lines.extend(f"  note: {t.name}: {n}" for n in t.notes)
        return "\n".join(lines)

    def to_mapping(self) -> dict[str, Any]:
        return {"warehouse": self.warehouse, "retention_seconds": self.retention.total_seconds(),
                "dry_run": self.dry_run, "started_at": self.started_at.isoformat(),
                "finished_at": self.finished_at.isoformat(), "seconds": round(self.seconds, 3),
                "files_before": self.files_before, "files_after": self.files_after,
                "files_compacted": self.files_compacted, "files_added": self.files_added,
                "files_vacuumed": self.files_vacuumed, "bytes_vacuumed": self.bytes_vacuumed,
                "stored_files_before": self.stored_files_before, "stored_files_after": self.stored_files_after,
                "skipped": [t.name for t in self.skipped],
                "tables": [t.to_mapping() for t in self.tables]}


# -- entry point -----------------------------------------------------------------------------------

def maintain_warehouse(warehouse: Warehouse, *, retention: timedelta = DEFAULT_RETENTION, dry_run: bool = False,
                       tables: Sequence[str] | None = None, now: datetime | None = None,
                       log: logging.Logger | None = None) -> MaintenanceReport:
    """Compact, vacuum and checkpoint every Statekeeper table of `warehouse` (or only `tables`).

    `retention` is rounded up to whole hours (vacuum takes hours). `now` is the time the retention
    floor is checked at (default: the clock; a `now` before the clock is replaced by the clock,
    since vacuum measures file age with the clock). Raises MaintenanceOptionsError for a negative
    retention or an unknown table name and RetentionFloorError when the retention would delete
    files of a pinned version; both before any table is changed. `dry_run` changes nothing: it
    reports what vacuum would delete and which files compaction would rewrite.
    """
    out = log or logger
    names = _requested(retention, tables)
    started = datetime.now(timezone.utc)
    check_at = max(_utc(now) if now is not None else started, started)
    effective = _ceil_hours(retention)

    versions = {name: delta_log.latest_version(warehouse, name) for name in names}
    present = [name for name in names if versions[name] is not None]
    pins = retention_pins(warehouse, check_at, tables=present)
    unsafe = [p for name in present for p in pins.get(name, ())
              if p.removed_at is not None and check_at - effective > p.removed_at]
    if unsafe:
        raise RetentionFloorError(_floor_message(warehouse, unsafe, effective, check_at), tuple(unsafe))

    out.info("warehouse maintenance of %s: %d table(s) present of %d, retention %s%s", warehouse.uri,
             len(present), len(names), _format_duration(effective), " (dry run)" if dry_run else "")
    results = []
    for name in names:
        if versions[name] is None:
            results.append(TableMaintenance(name, TableOutcome.ABSENT, skipped="absent from the warehouse"))
            continue
        table_pins = tuple(pins.get(name, ()))
        if dry_run:
            result = _plan_table(warehouse, name, effective, table_pins)
        else:
            result = _maintain_table(warehouse, name, effective, table_pins, out)
        out.info("maintenance: %s", result.line())
        results.append(result)
    return MaintenanceReport(warehouse.uri, effective, dry_run, started, datetime.now(timezone.utc), tuple(results))


def _requested(retention: timedelta, tables: Sequence[str] | None) -> list[str]:
    """The tables to maintain, in catalog order; MaintenanceOptionsError for what is refused outright."""
    from statekeeper.tables.catalog import ALL_TABLES

    if retention < timedelta(0):
        raise MaintenanceOptionsError(f"retention {retention} is negative: vacuum keeps files removed within it; "
                                      "pass 0 or more")
    known = [spec.name for spec in ALL_TABLES]
    if tables is not None:
        unknown = [name for name in tables if name not in known]
        if unknown:
            raise MaintenanceOptionsError(f"no Statekeeper table named {', '.join(map(repr, unknown))}; "
                                          f"known: {', '.join(known)}")
    return [name for name in known if tables is None or name in tables]


# -- the retention floor ---------------------------------------------------------------------------

def retention_pins(warehouse: Warehouse, now: datetime | None = None, *,
                   tables: Sequence[str] | None = None) -> dict[str, list[RetentionPin]]:
    """Every table version a reader of `warehouse` is pinned to, by table (oldest first), with the
    commit times of the version and of its successor (what the retention floor compares):

    * the index tables at the newest succeeded index run (the cut every job and command reads) and
      at the newest succeeded-or-partial run (what the next index run restores them to);
    * the newest row of the audit table of each job whose registry entry pins versions
      (`JobSpec.pins_versions`: chains, validation, GC, DR): its `source_versions` (the index cut it
      read) and `table_versions` (what it wrote);
    * every run of a job that resumes interrupted runs (`JobSpec.resumes_interrupted`: GC) whose
      newest row is `running` (killed while deleting: the next run resumes it on the versions it
      planned from);
    * `references` of every succeeded index run inside GC's grace period (GC keeps the files those
      runs saw referenced, reading them by version): the longest grace period any GC run recorded,
      at least GC's default.

    A pin's `removed_at` is the commit time of the first later commit that may have removed data
    files; vacuum's own commits (VACUUM START / END) remove none and do not count, so maintenance
    run twice does not refuse because of its own first run.
    """
    from statekeeper.tables.reader import TableReader

    now = _utc(now) if now is not None else datetime.now(timezone.utc)
    reader = TableReader(warehouse)
    found = [*_cut_pins(warehouse), *_audit_pins(reader), *_grace_pins(reader, now)]
    wanted = None if tables is None else set(tables)
    by_table: dict[str, dict[int, str]] = {}
    for table, version, who in found:
        if wanted is not None and table not in wanted:
            continue
        by_table.setdefault(table, {}).setdefault(version, who)   # first reason wins: the cut before audits
    out: dict[str, list[RetentionPin]] = {}
    for table, pinned in by_table.items():
        pins = _timed_pins(warehouse, table, pinned)
        if pins is not None:
            out[table] = pins
    return out


_Pin = tuple[str, int, str]   # (table, version, who pins it)


def _cut_pins(warehouse: Warehouse) -> list[_Pin]:
    """The index tables at the cut readers read, and at the state the next index run restores."""
    from statekeeper.tables import cut

    found: list[_Pin] = []
    newest = cut.latest_cut(warehouse)
    if newest is not None:
        found += [(t, v, f"index_runs run {newest.run_id} (newest succeeded: the cut readers read)")
                  for t, v in newest.versions.items()]
    committed = cut.latest_cut(warehouse, cut.COMMITTED)
    if committed is not None and (newest is None or committed.run_id != newest.run_id):
        found += [(t, v, f"index_runs run {committed.run_id} (newest {committed.status}: the next index run "
                         "restores the index tables to it)") for t, v in committed.versions.items()]
    return found


def _audit_pins(reader: Any) -> list[_Pin]:
    """The versions the newest run of each pinning job read and wrote, and those of its interrupted runs."""
    from statekeeper.registry import JOBS
    from statekeeper.tables.vocabulary import GcRunStatus

    found: list[_Pin] = []
    for spec in (j for j in JOBS if j.pins_versions):
        audit = spec.audit_table
        rows = reader.read(audit, columns=["run_id", "status", "finished_at", "source_versions",
                                           "table_versions"]).to_pylist()
        if not rows:
            continue
        runs = [max(rows, key=lambda r: r["finished_at"])]
        if spec.resumes_interrupted:
            runs += [r for r in _newest_per_run(rows) if r["status"] == GcRunStatus.RUNNING and r is not runs[0]]
        for run in runs:
            interrupted = " interrupted: resumed by the next GC run" if run is not runs[0] else ""
            for column in ("source_versions", "table_versions"):
                for t, v in dict(run[column] or []).items():
                    if v is not None:
                        found.append((t, int(v), f"{audit} run {run['run_id']} ({column}{interrupted})"))
    return found


def _newest_per_run(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each run's newest row of an event-log audit table (one row per state transition)."""
    last: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["run_id"] not in last or row["finished_at"] >= last[row["run_id"]]["finished_at"]:
            last[row["run_id"]] = row
    return list(last.values())


def _grace_pins(reader: Any, now: datetime) -> list[_Pin]:
    """`references` of every succeeded index run inside GC's grace period: GC reads them by version."""
    from statekeeper.tables.vocabulary import IndexRunStatus

    grace = _gc_grace(reader)
    found: list[_Pin] = []
    for run in reader.read("index_runs", columns=["run_id", "status", "finished_at", "table_versions"]).to_pylist():
        version = dict(run["table_versions"] or []).get("references")
        if run["status"] == IndexRunStatus.SUCCEEDED and version is not None and run["finished_at"] >= now - grace:
            found.append(("references", int(version),
                          f"index_runs run {run['run_id']} (inside GC's {_format_duration(grace)} grace period: "
                          "GC reads its references)"))
    return found


def _timed_pins(warehouse: Warehouse, table: str, pinned: dict[int, str]) -> list[RetentionPin] | None:
    """`pinned` (version -> who) with the commit times the floor compares; None when the table is absent."""
    commits = _commits(warehouse, table, min(pinned))
    if commits is None:
        return None
    latest = max(commits)
    pins = []
    for v, who in sorted(pinned.items()):
        if v > latest:
            continue   # names a version the table does not have: nothing of it to keep
        removed_by = next((n for n in range(v + 1, latest + 1)
                           if commits.get(n, (None, ""))[1] not in _REMOVES_NOTHING), None)
        removed_at = None if removed_by is None else commits.get(removed_by, (_from_ms(0), ""))[0]
        pins.append(RetentionPin(table, v, who, commits.get(v, (None, ""))[0], removed_by, removed_at))
    return pins


def _commits(warehouse: Warehouse, name: str, oldest: int) -> dict[int, tuple[datetime, str]] | None:
    """(commit time, operation) of every version of `name` from `oldest` on (None: no such table)."""
    if not delta_log.table_exists(warehouse, name):
        return None
    dt = delta_log.open_table(warehouse, name)
    latest = dt.version()
    entries = dt.history(limit=max(latest - max(oldest, 0) + 1, 1))
    # A commit without a recorded time counts as ancient: the floor then refuses (fail closed).
    return {int(e["version"]): (_from_ms(e.get("timestamp") or 0), str(e.get("operation"))) for e in entries}


def _gc_grace(reader: Any) -> timedelta:
    """The longest grace period any GC run recorded (gc_runs.grace_seconds), at least GC's default."""
    from statekeeper.registry import GC

    state = reader.state(GC.audit_table)
    if state is None:
        return GC_GRACE
    # A gc_runs table written before grace_seconds existed lacks the column until GC's next append
    # adds it (delta_log.add_missing_columns), and its older rows read it as null: for those rows the
    # grace period is the one their options JSON recorded (`older_than`, in seconds).
    columns = ["options", "grace_seconds"] if "grace_seconds" in state.schema.names else ["options"]
    grace = GC_GRACE
    for row in reader.read(GC.audit_table, columns=columns).to_pylist():
        seconds = row.get("grace_seconds")
        if seconds is None:
            seconds = _recorded_grace(row["options"])
        if seconds is not None:
            grace = max(grace, timedelta(seconds=seconds))
    return grace


def _recorded_grace(options: str | None) -> float | None:
    """`older_than` of a gc_runs row's options JSON (rows older than its grace_seconds column)."""
    try:
        seconds = json.loads(options or "{}").get("older_than")
    except (ValueError, AttributeError):
        return None
    return seconds if isinstance(seconds, (int, float)) else None


def _floor_message(warehouse: Warehouse, unsafe: list[RetentionPin], retention: timedelta, now: datetime) -> str:
    worst = max(unsafe, key=lambda p: p.safe_retention(now))
    parts = [f"{p.describe()}: needs a retention of at least {_format_duration(p.safe_retention(now))}"
             for p in unsafe[:_SHOWN]]
    if len(unsafe) > _SHOWN:
        parts.append(f"and {len(unsafe) - _SHOWN} more pinned version(s)")
    return (f"refusing to maintain {warehouse.uri}: vacuum with retention {_format_duration(retention)} would delete "
            f"data files that pinned table versions still need; nothing was changed. "
            + "; ".join(parts)
            + f". Pass a retention of at least {_format_duration(worst.safe_retention(now))}, or re-run the jobs "
              "that pin the old versions so they pin newer ones")


# -- one table -------------------------------------------------------------------------------------

@dataclass
class _Live:
    version: int
    files: int
    bytes: int
    by_partition: dict[tuple[str, ...], list[int]] = field(default_factory=dict)   # partition -> file sizes

    @property
    def crowded(self) -> dict[tuple[str, ...], list[int]]:
        return {k: v for k, v in self.by_partition.items() if len(v) > 1}


def _live(warehouse: Warehouse, name: str) -> _Live:
    state = delta_log.load_state(warehouse, name)
    if state is None:
        raise TableError(f"Delta table {warehouse.table_uri(name)} disappeared during maintenance")
    groups = {key: [f.size for f in files] for key, files in state.files_by_partition().items()}
    return _Live(state.version, len(state.files), sum(f.size for f in state.files), groups)


def _plan_table(warehouse: Warehouse, name: str, retention: timedelta,
                pins: tuple[RetentionPin, ...]) -> TableMaintenance:
    live = _live(warehouse, name)
    stored = _stored(warehouse, name)
    dt = delta_log.open_table(warehouse, name)
    doomed = _vacuum_candidates(dt, retention, _keep(pins, live.version), stored)
    crowded = live.crowded
    compacted = sum(len(sizes) for sizes in crowded.values())
    gone = sum(stored[p] for p in doomed)
    return TableMaintenance(
        name, TableOutcome.DRY_RUN, version_before=live.version, version_after=live.version,
        files_before=live.files, files_after=live.files - compacted + len(crowded), bytes_before=live.bytes,
        bytes_after=live.bytes, stored_files_before=len(stored), stored_files_after=len(stored) - len(doomed),
        stored_bytes_before=sum(stored.values()), stored_bytes_after=sum(stored.values()) - gone,
        partitions=len(live.by_partition), partitions_compacted=len(crowded), files_compacted=compacted,
        files_added=len(crowded), bytes_compacted=sum(sum(sizes) for sizes in crowded.values()),
        files_vacuumed=len(doomed), bytes_vacuumed=gone, pins=pins)


def _maintain_table(warehouse: Warehouse, name: str, retention: timedelta, pins: tuple[RetentionPin, ...],
                    out: logging.Logger) -> TableMaintenance:
    from deltalake import CommitProperties, PostCommitHookProperties
    from deltalake.exceptions import CommitFailedError

    before = _live(warehouse, name)
    stored = _stored(warehouse, name)
    result = TableMaintenance(
        name, TableOutcome.MAINTAINED, version_before=before.version, version_after=before.version,
        files_before=before.files, files_after=before.files, bytes_before=before.bytes, bytes_after=before.bytes,
        stored_files_before=len(stored), stored_files_after=len(stored), stored_bytes_before=sum(stored.values()),
        stored_bytes_after=sum(stored.values()), partitions=len(before.by_partition), pins=pins)
    # Our own commits: no post-commit checkpoint (written once, below) and never a log cleanup.
    hooks = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
    props = CommitProperties(custom_metadata={"statekeeper.operation": MAINTENANCE_OPERATION})
    dt = delta_log.open_table(warehouse, name)
    crowded = before.crowded
    if crowded:
        out.info("maintenance: compacting %d file(s) in %d partition(s) of %s", sum(map(len, crowded.values())),
                 len(crowded), warehouse.table_uri(name))
        try:
            metrics = dt.optimize.compact(commit_properties=props, post_commithook_properties=hooks)
        except CommitFailedError as exc:
            return _conflict(warehouse, result, "compaction", exc, out, stored)
        result = replace(result, partitions_compacted=int(metrics.get("partitionsOptimized") or 0),
                         files_compacted=int(metrics.get("numFilesRemoved") or 0),
                         files_added=int(metrics.get("numFilesAdded") or 0),
                         bytes_compacted=_total_size(metrics.get("filesRemoved")))
        dt = delta_log.open_table(warehouse, name)
    keep = _keep(pins, dt.version())
    # delta-rs (1.6) reports, "deletes" and commits VACUUM START/END for files an earlier vacuum already
    # deleted; only files still on storage count, and a vacuum with none to delete is not run (no commits:
    # idempotent).
    if _vacuum_candidates(dt, retention, keep, stored):
        try:
            deleted = dt.vacuum(retention_hours=_hours(retention), dry_run=False, enforce_retention_duration=False,
                                full=True, keep_versions=keep, commit_properties=props, post_commithook_properties=hooks)
        except CommitFailedError as exc:
            return _conflict(warehouse, result, "vacuum", exc, out, stored)
        gone = sorted({p for p in map(unquote, deleted) if p in stored})
        result = replace(result, files_vacuumed=len(gone), bytes_vacuumed=sum(stored[p] for p in gone))
    result = _checkpoint(warehouse, name, retention, result)
    after = _live(warehouse, name)
    stored = _stored(warehouse, name)
    return replace(result, version_after=after.version, files_after=after.files, bytes_after=after.bytes,
                   stored_files_after=len(stored), stored_bytes_after=sum(stored.values()),
                   partitions=len(after.by_partition))


def _vacuum_candidates(dt: Any, retention: timedelta, keep: list[int] | None, stored: dict[str, int]) -> list[str]:
    """The files a vacuum would delete that are still on storage (paths relative to the table)."""
    planned = dt.vacuum(retention_hours=_hours(retention), dry_run=True, enforce_retention_duration=False,
                        full=True, keep_versions=keep)
    return sorted({p for p in map(unquote, planned) if p in stored})


def _stored(warehouse: Warehouse, name: str) -> dict[str, int]:
    """Data files on storage below the table's directory (relative path -> size): live ones, removed
    ones not vacuumed yet, leftovers. Hidden entries, any of whose path parts starts with `_` or `.`, are not
    counted: the log and Delta's other own files, and the `.<name>.crc` checksum Hadoop's local file system writes
    beside every data file."""
    base = warehouse.table_uri(name)
    out = {}
    for info in warehouse.file_io().list(base):
        rel = info.uri[len(base) + 1:]
        if rel and not any(part.startswith(("_", ".")) for part in rel.split("/")):
            out[rel] = info.size
    return out


def _conflict(warehouse: Warehouse, result: TableMaintenance, step: str, exc: Exception,
              out: logging.Logger, stored_before: dict[str, int]) -> TableMaintenance:
    after = _live(warehouse, result.name)
    stored = _stored(warehouse, result.name)
    state = delta_log.load_state(warehouse, result.name)
    live = set() if state is None else {f.path for f in state.files}
    # delta-rs writes the compacted files before it commits and leaves them behind when the commit
    # fails; no version names them, so a (lite) vacuum never deletes them. They are reported, not
    # deleted here: a concurrent writer's own uncommitted files look just the same.
    untracked = sorted(p for p in stored if p not in stored_before and p not in live)
    notes = result.notes
    if untracked:
        notes = (*notes, f"{len(untracked)} file(s) appeared during the failed {step} and no version names them "
                         f"(left behind by it, or a writer's uncommitted files): {', '.join(untracked[:5])}"
                         + (" ..." if len(untracked) > 5 else ""))
    reason = (f"{step} conflicted with a concurrent commit (another run wrote the table meanwhile); the table was "
              f"left as that writer made it, re-run maintenance when no run writes: {exc}")
    out.warning("maintenance: %s: %s", warehouse.table_uri(result.name), reason)
    return replace(result, outcome=TableOutcome.CONFLICT, skipped=reason, notes=notes, version_after=after.version,
                   files_after=after.files, bytes_after=after.bytes, stored_files_after=len(stored),
                   stored_bytes_after=sum(stored.values()), partitions=len(after.by_partition))


def _checkpoint(warehouse: Warehouse, name: str, retention: timedelta, result: TableMaintenance) -> TableMaintenance:
    """Write a checkpoint at the latest version, unless one is there already or it would lose
    removals vacuum must still see."""
    dt = delta_log.open_table(warehouse, name)
    version = dt.version()
    if _last_checkpoint(warehouse, name) == version:
        return result
    kept = _deleted_file_retention(dt)
    if kept is None or retention > kept:
        # A checkpoint keeps only removals younger than delta.deletedFileRetentionDuration: with a
        # longer retention, the removals in between would vanish from the table state before vacuum
        # may delete their files, and a later (lite) vacuum would never see them again.
        shown = "unreadable" if kept is None else _format_duration(kept)
        return replace(result, notes=(*result.notes, f"no checkpoint written: the retention "
                                      f"{_format_duration(retention)} is longer than the table's "
                                      f"delta.deletedFileRetentionDuration ({shown}), and a checkpoint would "
                                      "forget the removals vacuum must still delete later"))
    dt.create_checkpoint()
    return replace(result, checkpoint_version=version)


def _last_checkpoint(warehouse: Warehouse, name: str) -> int | None:
    io_ = warehouse.file_io()
    uri = join_uri(warehouse.table_uri(name), "_delta_log/_last_checkpoint")
    try:
        return int(json.loads(io_.read_bytes(uri))["version"])
    except Exception:  # noqa: BLE001 - absent or unreadable: write a new one
        return None


def _deleted_file_retention(dt: Any) -> timedelta | None:
    text = (dt.metadata().configuration or {}).get("delta.deletedFileRetentionDuration")
    if text is None:
        return _DELTA_DELETED_FILE_RETENTION
    match = _INTERVAL.match(text)
    unit = match and _INTERVAL_UNITS.get(match.group(2).lower().rstrip("s"))
    return None if not unit else int(match.group(1)) * unit


def _keep(pins: tuple[RetentionPin, ...], latest: int) -> list[int] | None:
    # Sorted: delta-rs loads the first listed version and rolls forward through the others.
    versions = sorted({p.version for p in pins if p.version < latest})
    return versions or None


def _total_size(text: Any) -> int | None:
    try:
        return int((json.loads(text) if isinstance(text, str) else text)["totalSize"])
    except (TypeError, ValueError, KeyError):
        return None


# -- small helpers ---------------------------------------------------------------------------------

def _ceil_hours(value: timedelta) -> timedelta:
    return timedelta(hours=math.ceil(value / _HOUR)) if value > timedelta(0) else timedelta(0)


def _hours(value: timedelta) -> int:
    return math.ceil(value / _HOUR)


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _from_ms(ms: Any) -> datetime:
    return datetime.fromtimestamp(int(ms) / 1000, tz=timezone.utc)


def _format_duration(value: timedelta) -> str:
    return format_duration(value) if value > timedelta(0) else "0s"


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, StrEnum):
        return value.value
    return value

"""The garbage-collection job: plan, persist the plan, re-check, delete — never a live file.

    result = (CollectGarbage(spark)
              .warehouse("s3://bucket/statekeeper")
              .configure(GcOptions(mode=GcMode.DELETE,                 # default: PLAN (a dry run)
                                   older_than=timedelta(days=3),
                                   policy=RetentionPolicy(retain_last=3)))
              .execute())

A run reads the index tables at the newest succeeded cut (plus, for jobs that look active, the
`references` of every index run inside the grace window), applies the retention policy
(`statekeeper.gc.policy`), sweeps (`statekeeper.gc.plan`) and writes the plan to `gc_actions`
before it touches storage, with a `gc_runs` row per state transition. Any fail-closed rule
(`statekeeper.gc.guards`) blocks every deletion. A deleting run first resumes any earlier run a
kill left `running`, then lists the roots again for `_metadata` written since the index
(`statekeeper.gc.relist`), then deletes in Spark tasks (`statekeeper.gc.execute`), each file
re-checked against its planned size and etag, `_metadata` of expired snapshots first; the outcomes
replace the run's plan rows in one commit.
"""
from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from statekeeper.gc.guards import Blocker, Rule
from statekeeper.gc.options import GcOptions
from statekeeper.jobs.base import StatekeeperJob
from statekeeper.jobs.context import RunContext
from statekeeper.jobs.gc_runs import ClaimableTail, ForstJob, OwnerlessDir
from statekeeper.jobs.protection import StoreProtection, summary_lines
from statekeeper.jobs.result import JobResult
from statekeeper.jobs.side_by_side import run_side_by_side
from statekeeper.layout.locate import job_location
from statekeeper.layout.spark_locate import job_of
from statekeeper.registry import GC
from statekeeper.storage.enforcement import Enforcement
from statekeeper.units import human_size
from statekeeper.tables.catalog import GC_ACTIONS, GC_RUNS
from statekeeper.tables.vocabulary import GcMode, GcOutcome, GcRunStatus, IndexRunStatus, OwnerlessVerdict

_BREAKDOWN_ROWS = 1000
_EXTERNAL_EXAMPLES = 5


@dataclass(frozen=True)
class Reclaim:
    """Planned files and bytes of one (root, job directory, reason)."""

    root: str
    job_dir: str
    reason: str
    files: int
    bytes: int


@dataclass(frozen=True, kw_only=True)
class GcResult(JobResult):
    mode: GcMode
    plan_run_id: str
    roots: tuple[str, ...] = ()
    options: str = "{}"
    source_versions: dict[str, int] = field(default_factory=dict)
    blocked: tuple[str, ...] = ()
    expired_snapshots: int = 0
    planned: int = 0
    planned_bytes: int = 0
    deleted: int = 0
    deleted_bytes: int = 0
    already_gone: int = 0
    changed_skipped: int = 0
    failed: int = 0
    retries: int = 0
    new_snapshots: int = 0
    not_judged: int = 0
    breakdown: tuple[Reclaim, ...] = ()
    resumed: tuple[str, ...] = ()
    roots_complete: bool = False
    ownerless: tuple[OwnerlessDir, ...] = ()
    external_locations: int = 0                  # locations outside the roots these roots' snapshots reference
    external_examples: tuple[str, ...] = ()
    grace_seconds: float | None = None           # the grace period (--older-than), typed (also in `options`)
    prefixes: tuple[str, ...] = ()               # what the deletes achieved per job prefix (busiest first)
    forst: tuple[ForstJob, ...] = ()             # job directories with ForSt databases, largest first
    protection: tuple[StoreProtection, ...] = ()  # per object store: what held it to the planned versions
    claimable: tuple[ClaimableTail, ...] = ()    # job tails a claimed checkpoint may use, largest first

    def summary(self) -> str:
        verb = {GcMode.PLAN: "planned (dry run)", GcMode.DELETE: "planned", GcMode.EXECUTE: "to execute"}[self.mode]
        lines = [f"gc run {self.run_id} ({self.mode.value}) {self.status} in {self.seconds:.1f}s: "
                 f"{self.planned} file(s), {human_size(self.planned_bytes)} {verb}; {self.expired_snapshots} snapshot(s) "
                 f"expired by policy; index versions {self.source_versions}"]
        if self.plan_run_id != self.run_id:
            lines.append(f"  executed the plan of run {self.plan_run_id}")
        if self.resumed:
            lines.append(f"  resumed interrupted run(s) first: {', '.join(self.resumed)}")
        if self.mode is not GcMode.PLAN and not self.blocked:
            lines.append(f"  deleted {self.deleted} ({human_size(self.deleted_bytes)}), already gone {self.already_gone}, "
                         f"changed or newly referenced (kept) {self.changed_skipped}, FAILED {self.failed}; "
                         f"{self.retries} retried request(s); {self.new_snapshots} _metadata written since the index "
                         "were parsed and their files kept")
        lines.extend(f"  per prefix: {p}" for p in self.prefixes)
        lines.extend(summary_lines(self.protection))
        if self.not_judged:
            lines.append(f"  {self.not_judged} object(s) GC never judges (unknown layout, symlinks and other "
                         "non-regular objects) were left alone")
        lines.extend(self._forst_lines())
        for b in self.blocked:
            lines.append(f"  BLOCKED (nothing deleted): {b}")
        lines.extend(self._roots_lines())
        top = sorted(self.breakdown, key=lambda r: (-r.bytes, r.root, r.job_dir, r.reason))[:20]
        if top:
            lines.append("  reclaimable by job directory and reason (largest first):")
            lines.extend(f"    {job_location(r.root, r.job_dir)} {r.reason}: {r.files} file(s), {human_size(r.bytes)}"
                         for r in top)
            if len(self.breakdown) > len(top):
                lines.append(f"    ... {len(self.breakdown) - len(top)} more rows in gc_runs.breakdown")
        if self.failed:
            lines.append("  failed deletes are listed in gc_actions (outcome 'failed') with the storage error; the "
                         "next run retries them")
        lines += self._closing_lines()
        return "\n".join(lines)

    def _roots_lines(self) -> list[str]:
        """What the run could not judge because a root may be missing (docs/gc.md, "Which roots a GC
        run must be given")."""
        lines = []
        if self.roots_complete:
            lines.append("  --roots-complete: the roots of this run were taken to be every root any job may restore "
                         "from; these verdicts rest on it: the files of ownerless job directories, the tails of "
                         "jobs (files written after a job's newest checkpoint) and the newest databases of jobs "
                         "inactive by --inactive-after were judged as if no job elsewhere restores from them")
        held = [d for d in self.ownerless if d.held_back]
        if held:
            lines.append(f"  held back: {len(held)} ownerless job director{'y' if len(held) == 1 else 'ies'}, "
                         f"{human_size(sum(d.bytes for d in held))} in {sum(d.files for d in held)} file(s) - a job "
                         "in a root you did not give may restore from them (a CLAIM or LEGACY restore keeps using "
                         "the old job's files after its checkpoint is gone); index and GC that root too, or pass "
                         "--roots-complete if these roots are every root any job may restore from, or "
                         "--ownerless-older-than DURATION to collect ownerless directories untouched for longer:")
            lines.extend(self._dir_lines(held, "gc_runs.ownerless"))
        tails = [t for t in self.claimable if t.held_back]
        if tails:
            lines.append(f"  held back: the tails of {len(tails)} job(s), {human_size(sum(t.bytes for t in tails))} "
                         f"in {sum(t.files for t in tails)} file(s) - unreferenced files written after the job's "
                         "newest retained checkpoint that no failed checkpoint explains: a job in a root you did not "
                         "give may have been restored (CLAIM) from a newer checkpoint of this job that Flink has "
                         "deleted since, and still read them; index and GC that root too, or pass --roots-complete "
                         "if these roots are every root any job may restore from:")
            lines.extend(self._dir_lines(tails, "gc_runs.claimable"))
        freed = [d for d in self.ownerless if not d.held_back]
        if freed:
            why = {OwnerlessVerdict.ROOTS_COMPLETE: "--roots-complete", OwnerlessVerdict.OLDER_THAN: "older than "
                   "--ownerless-older-than"}
            lines.append(f"  planned in {len(freed)} ownerless job director{'y' if len(freed) == 1 else 'ies'} "
                         f"({human_size(sum(d.bytes for d in freed))}):")
            lines.extend(f"{line} ({why[d.verdict]})" for d, line in zip(freed[:20],
                                                                          self._dir_lines(freed, "gc_runs.ownerless")))
        if self.external_locations:
            lines.append(f"  these roots reference files under {self.external_locations} location(s) outside the "
                         f"given roots (e.g. {', '.join(self.external_examples)}); GC never deletes there, but if "
                         "jobs there restore from these roots, add those roots to the index and GC runs")
        return lines

    def _forst_lines(self) -> list[str]:
        """Dead ForSt databases' bytes per job, and what was left alone as possibly live."""
        if not self.forst:
            return []
        dead = sum(f.dead_bytes for f in self.forst)
        unjudged = sum(f.unjudged_bytes for f in self.forst)
        lines = [f"  ForSt databases in checkpoint storage: {sum(f.databases for f in self.forst)} in "
                 f"{len(self.forst)} job director{'y' if len(self.forst) == 1 else 'ies'}, "
                 f"{sum(f.dead_databases for f in self.forst)} can no longer be written; unreferenced files of "
                 f"those: {human_size(dead)} (reason dead_database); unreferenced files of the others, left "
                 f"alone as possibly live: {human_size(unjudged)}"]
        for f in sorted(self.forst, key=lambda f: (-(f.dead_bytes + f.unjudged_bytes), f.root, f.job_dir))[:20]:
            if f.dead_files or f.unjudged_files:
                lines.append(f"    {job_location(f.root, f.job_dir)}: {f.dead_databases}/{f.databases} database(s) "
                             f"dead, {f.dead_files} file(s) {human_size(f.dead_bytes)} reclaimable; "
                             f"{f.unjudged_files} file(s) {human_size(f.unjudged_bytes)} left alone")
        if unjudged:
            lines.append("    (a database is judged only once its job wrote nothing for the grace period and a "
                         "newer attempt of its subtask exists, or the job is inactive by --inactive-after and the "
                         "run declares --roots-complete: docs/gc.md, \"ForSt databases\")")
        return lines

    @staticmethod
    def _dir_lines(dirs: list[OwnerlessDir], column: str) -> list[str]:
        top = sorted(dirs, key=lambda d: (-d.bytes, d.root, d.job_dir))
        lines = [f"    {job_location(d.root, d.job_dir)}: {d.files} file(s), {human_size(d.bytes)}" for d in top[:20]]
        if len(top) > 20:
            lines.append(f"    ... {len(top) - 20} more in {column}")
        return lines

    def audit_values(self) -> dict[str, Any]:
        return {"protection": [p.row() for p in self.protection],
                "breakdown": [{"root": r.root, "job_dir": r.job_dir, "reason": r.reason, "files": r.files,
                               "bytes": r.bytes} for r in self.breakdown[:_BREAKDOWN_ROWS]],
                "ownerless": [{"root": d.root, "job_dir": d.job_dir, "files": d.files, "bytes": d.bytes,
                               "verdict": d.verdict.value} for d in self.ownerless[:_BREAKDOWN_ROWS]],
                "forst": [dataclasses.asdict(f) for f in self.forst[:_BREAKDOWN_ROWS]],
                "claimable": [{"root": t.root, "job_dir": t.job_dir, "files": t.files, "bytes": t.bytes,
                               "verdict": t.verdict.value} for t in self.claimable[:_BREAKDOWN_ROWS]]}


def _write_actions(ctx: RunContext, df: Any, run_id: str, **metadata: str) -> Any:
    """Replace the run's partition of gc_actions (its plan, then the same rows with outcomes) in one commit."""
    return ctx.engine.write(df, ctx.warehouse, GC_ACTIONS, mode="replace_partitions", replace=[{"run_id": run_id}],
                            metadata=ctx.commit_metadata(**metadata))


class CollectGarbage(StatekeeperJob[GcResult, GcOptions]):
    """Builder for one GC run. Every option is explicit; the defaults plan only."""

    JOB = GC
    SOURCES = ("snapshots", "references", "files")
    OPTIONAL_SOURCES = ("dependencies",)

    # -- run ----------------------------------------------------------------------------------

    def _prepare(self, ctx: RunContext) -> None:
        from statekeeper.tables.reader import TableReader

        # One read serves the newest run (fail-closed rule) and the grace window's history.
        self._index_runs = sorted(TableReader(ctx.warehouse).read(
            "index_runs", columns=["run_id", "status", "finished_at", "roots", "table_versions"]).to_pylist(),
            key=lambda r: r["finished_at"])
        self._newest_index = self._index_runs[-1] if self._index_runs else None
        # What each store was proven to enforce, for this execution (resumed runs and its own share it).
        self._enforcement = Enforcement(ctx.storage, tag=ctx.run_id)

    def _result_fields(self, ctx: RunContext) -> dict[str, Any]:
        opts = self.options
        return {"plan_run_id": ctx.run_id, "mode": opts.mode, "roots": tuple(self.inputs.roots),
                "options": opts.to_json(), "roots_complete": opts.roots_complete, "grace_seconds": opts.grace_seconds}

    def _event(self, ctx: RunContext, result: GcResult) -> None:
        """Append one state transition of a run to gc_runs (the base appends the final one)."""
        self._audit(ctx, result)

    def _run(self, ctx: RunContext) -> GcResult:
        from statekeeper.gc import guards

        opts = self.options
        now = datetime.now(timezone.utc)
        resumed = self._resume_interrupted(ctx) if opts.mode is not GcMode.PLAN else ()

        if opts.mode is GcMode.EXECUTE:
            return self._execute_reviewed(ctx, resumed)

        tables = self._read_cut(ctx, keep=("snapshots", "references", "files"))
        self._event(ctx, self._result(ctx, GcRunStatus.REQUESTED, resumed=resumed))

        ctx.beat.phase("fail-closed checks")
        blockers = self._blockers(ctx, tables["snapshots"], tables["references"])
        plan, values = self._plan(ctx, tables, now)
        values = self._progress = dict(values, resumed=resumed)
        if blockers:
            ctx.log.error("%s: BLOCKED, nothing will be deleted: %s", ctx.label, guards.summary(blockers))
            return self._result(ctx, GcRunStatus.BLOCKED, blocked=tuple(str(b) for b in blockers), **values)
        if opts.mode is GcMode.PLAN:
            return self._result(ctx, GcRunStatus.PLANNED, **values)
        self._event(ctx, self._result(ctx, GcRunStatus.PLANNED, **values))
        return self._delete(ctx, ctx.run_id, plan, tables["snapshots"], values)

    def _plan(self, ctx: RunContext, tables: dict[str, Any], now: datetime) -> tuple[Any, dict[str, Any]]:
        """Expire by policy, sweep, hold back ownerless directories and persist the plan in gc_actions,
        before anything touches storage: the plan's rows (kept) and what the Result says of them."""
        from statekeeper.gc import forst, plan as sweep, policy

        opts = self.options
        snaps, refs, files = tables["snapshots"], tables["references"], tables["files"]
        grace_cutoff = now - opts.older_than
        inputs = sweep.SweepInputs(files, snaps, refs, self._history(ctx, grace_cutoff))
        rule = sweep.OwnerlessRule(opts.roots_complete, None if opts.ownerless_older_than is None
                                   else now - opts.ownerless_older_than)
        inactive_cutoff = None if opts.policy.inactive_after is None else now - opts.policy.inactive_after
        # Kept in three waves, each frame beside those it does not depend on.
        first = run_side_by_side(ctx.spark, ctx.beat, {
            "retention policy": lambda: ctx.keep(policy.expired_snapshots(snaps, opts.policy, now, grace_cutoff)),
            "sweep: active jobs": lambda: ctx.keep(sweep.active_jobs(files, grace_cutoff)),
            "sweep: ownerless directories": lambda: ctx.keep(sweep.ownerless_dirs(files, snaps, rule)),
            "sweep: claimable tails": lambda: ctx.keep(sweep.claimable_tails(files, snaps, opts.roots_complete))})
        expired, active = first["retention policy"], first["sweep: active jobs"]
        ownerless, tails = first["sweep: ownerless directories"], first["sweep: claimable tails"]
        second = run_side_by_side(ctx.spark, ctx.beat, {
            "sweep: reachable files": lambda: ctx.keep(sweep.reachable_files(inputs, expired, active)),
            "sweep: ForSt databases": lambda: ctx.keep(forst.database_verdicts(files, snaps, active, inactive_cutoff,
                                                                               opts.roots_complete))})
        live, databases = second["sweep: reachable files"], second["sweep: ForSt databases"]
        ctx.beat.phase("sweep")
        swept = ctx.keep(sweep.sweep_all(inputs, expired, run_id=ctx.run_id, grace_cutoff=grace_cutoff, live=live,
                                         dead_databases=forst.dead_database_files(files, databases)))
        planned = sweep.withhold(swept, ownerless, tails)
        ctx.beat.phase("writing the plan to gc_actions")
        commit = _write_actions(ctx, planned, ctx.run_id, **{"statekeeper.sourceVersions":
                                                             json.dumps(self.inputs.versions, sort_keys=True)})
        plan = ctx.keep(ctx.engine.read(ctx.spark, ctx.warehouse, GC_ACTIONS.name, version=commit.version,
                                        partitions={"run_id": [ctx.run_id]}))
        # What the Result says of the plan: summaries of kept frames, none depending on another.
        said = run_side_by_side(ctx.spark, ctx.beat, {
            "summing the plan": lambda: self._totals(plan),
            "summing what the plan leaves": lambda: {
                "expired_snapshots": int(expired.count()), "not_judged": int(sweep.not_judged(files).count())},
            "ownerless directories": lambda: self._ownerless(sweep.held_back(swept, ownerless)),
            "claimable tails": lambda: self._ownerless(
                sweep.tail_rows(swept, tails).select("root", "root_id", "job", "size", "verdict")
                .unionByName(forst.held_back_files(files, live, databases)), ClaimableTail),
            "ForSt databases": lambda: self._forst(forst.per_job(files, live, databases, swept)),
            "locations outside the roots": lambda: self._external(refs)})
        return plan, dict(said["summing the plan"], **said["summing what the plan leaves"],
                          table_versions={GC_ACTIONS.name: commit.version},
                          ownerless=said["ownerless directories"], forst=said["ForSt databases"],
                          claimable=said["claimable tails"],
                          **said["locations outside the roots"])

    # -- pieces ---------------------------------------------------------------------------------

    def _blockers(self, ctx: RunContext, snaps: Any, refs: Any) -> list[Blocker]:
        from statekeeper.gc import guards

        cut = self.inputs.cut
        out = guards.index_blockers(self._newest_index, cut.run_id, cut.finished_at, self.options.index_not_before)
        out += guards.chains_blockers(self.inputs.stale, "dependencies" in self.inputs.optional)
        found = run_side_by_side(ctx.spark, ctx.beat, {
            "fail-closed checks: unreadable _metadata":
                lambda: guards.snapshot_blockers(snaps, self.inputs.roots, ctx.storage),
            "fail-closed checks: reference spellings":
                lambda: guards.spelling_blockers(refs, self.inputs.roots, self.options.schemes())})
        return out + [b for blockers in found.values() for b in blockers]

    def _history(self, ctx: RunContext, grace_cutoff: datetime) -> Any:
        """`references` of every other succeeded index run that finished inside the grace window."""
        current = self.inputs.versions["references"]
        versions = sorted({dict(r["table_versions"] or []).get("references") for r in self._index_runs
                           if r["status"] == IndexRunStatus.SUCCEEDED and r["finished_at"] >= grace_cutoff} - {None, current})
        if not versions:
            return None
        ctx.log.info("%s: also keeping files referenced by %d earlier index run(s) inside the grace window "
                     "(references versions %s) in jobs that look active", ctx.label, len(versions), versions)
        frames = [ctx.engine.read(ctx.spark, ctx.warehouse, "references", version=v).select("root_id", "job_dir", "file_uri")
                  for v in versions]
        out = frames[0]
        for frame in frames[1:]:
            out = out.unionByName(frame)
        return out

    @staticmethod
    def _totals(plan: Any) -> dict[str, Any]:
        from pyspark.sql import functions as F

        agg = plan.agg(F.count(F.lit(1)).alias("n"), F.sum("size").alias("b")).first()
        rows = (plan.groupBy("root", job_of("job_dir").alias("job_dir"), "reason")
                .agg(F.count(F.lit(1)).alias("files"), F.sum("size").alias("bytes"))
                .orderBy(F.col("bytes").desc()).limit(_BREAKDOWN_ROWS).collect())
        return {"planned": int(agg["n"] or 0), "planned_bytes": int(agg["b"] or 0),
                "breakdown": tuple(Reclaim(r["root"], r["job_dir"], r["reason"], int(r["files"]), int(r["bytes"] or 0))
                                   for r in rows)}

    @staticmethod
    def _ownerless(held: Any, record: type[OwnerlessDir] = OwnerlessDir) -> tuple[OwnerlessDir, ...]:
        """One `record` per job directory (its `job`) of `held` (`held_back` or `tail_rows`): its unreferenced
        files and bytes and the verdict (at most 1000, largest first)."""
        from pyspark.sql import functions as F

        rows = (held.groupBy("root", F.col("job").alias("job_dir"), "verdict")
                .agg(F.count(F.lit(1)).alias("files"), F.sum("size").alias("bytes"))
                .orderBy(F.col("bytes").desc(), "root", "job_dir").limit(_BREAKDOWN_ROWS).collect())
        return tuple(record.from_row(r) for r in rows)

    @staticmethod
    def _forst(rows: Any) -> tuple[ForstJob, ...]:
        """One ForstJob per job directory with ForSt databases (at most 1000, most unreferenced bytes first)."""
        from pyspark.sql import functions as F

        top = (rows.orderBy((F.col("dead_bytes") + F.col("unjudged_bytes")).desc(), F.col("bytes").desc(), "root",
                            "job_dir").limit(_BREAKDOWN_ROWS).collect())
        return tuple(ForstJob(r["root"], r["job_dir"], int(r["databases"]), int(r["dead_databases"]),
                              int(r["bytes"] or 0), int(r["dead_files"] or 0), int(r["dead_bytes"] or 0),
                              int(r["unjudged_files"] or 0), int(r["unjudged_bytes"] or 0)) for r in top)

    @staticmethod
    def _external(refs: Any) -> dict[str, Any]:
        """How many locations outside the roots the roots' snapshots reference, and a few of them."""
        from pyspark.sql import functions as F

        from statekeeper.gc.plan import external_locations

        locations = external_locations(refs)
        rows = locations.orderBy(F.col("files").desc(), "location").limit(_EXTERNAL_EXAMPLES).collect()
        if not rows:
            return {}
        return {"external_locations": int(locations.count()), "external_examples": tuple(r["location"] for r in rows)}

    def _delete(self, ctx: RunContext, plan_run_id: str, plan: Any, indexed_snapshots: Any,
                values: dict[str, Any]) -> GcResult:
        """Re-list, re-check and delete `plan` (gc_actions rows of `plan_run_id`); record outcomes."""
        from pyspark.sql import functions as F

        from statekeeper.storage.pace_report import describe as describe_prefixes

        self._event(ctx, self._result(ctx, GcRunStatus.RUNNING, plan_run_id=plan_run_id, **values))
        ctx.beat.phase("listing the roots again for _metadata written since the index")
        keep_now, new_count, blocker = self._written_since(ctx, indexed_snapshots)
        values = dict(values, new_snapshots=new_count)
        if blocker is not None:
            ctx.log.error("%s: BLOCKED, nothing deleted: %s", ctx.label, blocker)
            return self._result(ctx, GcRunStatus.BLOCKED, plan_run_id=plan_run_id, blocked=(str(blocker),), **values)
        newly = plan.join(keep_now, "uri", "left_semi")
        outcomes, prefixes, protection = self._delete_files(ctx, plan.join(keep_now, "uri", "left_anti"),
                                                            values.get("planned", 0))
        now = datetime.now(timezone.utc)
        kept = newly.select("uri", F.lit(GcOutcome.CHANGED_SKIPPED.value).alias("outcome"),
                            F.lit("referenced by a _metadata written after the index; kept").alias("message"),
                            F.lit(0).cast("long").alias("retries"), F.lit(now).alias("attempted_at"))
        result_rows = ctx.keep(outcomes.unionByName(kept))
        final = (plan.drop("outcome", "message", "attempted_at")
                 .join(result_rows.drop("retries"), "uri", "left")
                 .withColumn("outcome", F.coalesce(F.col("outcome"), F.lit(GcOutcome.PLANNED.value)))
                 .select(*GC_ACTIONS.schema.names))
        ctx.beat.phase("recording outcomes in gc_actions")
        commit = _write_actions(ctx, final, plan_run_id)
        values = dict(values, table_versions={GC_ACTIONS.name: commit.version}, **_outcome_counts(final, result_rows),
                      prefixes=describe_prefixes(prefixes.value), protection=protection)
        return self._result(ctx, GcRunStatus.COMPLETED, plan_run_id=plan_run_id, **values)

    def _written_since(self, ctx: RunContext, indexed_snapshots: Any) -> tuple[Any, int, Blocker | None]:
        """The files `_metadata` written since the index reference (uri), how many such snapshots there
        are, and the blocker when one of them cannot be parsed (what it references is unknown)."""
        from pyspark.sql import functions as F

        from statekeeper.gc.relist import new_references

        # lists and parses once; every count below reads the cache
        parsed = ctx.keep(new_references(ctx.spark, self.inputs.roots, ctx.storage, indexed_snapshots))
        errors = parsed.where(F.col("error").isNotNull()).select("metadata_uri", "error").limit(10).collect()
        new_count = int(parsed.where(F.col("file_uri").isNotNull()).select("metadata_uri").distinct().count())
        blocker = None
        if errors:
            blocker = Blocker(Rule.NEW_METADATA_UNREADABLE, (
                "_metadata written after the index cannot be parsed, so what they reference is unknown: "
                + "; ".join(f"{r['metadata_uri']} ({r['error'][:200]})" for r in errors)
                + ". Re-run index_checkpoints (it records them) and repair or remove them; then GC"))
        keep_now = parsed.where(F.col("file_uri").isNotNull()).select(F.col("file_uri").alias("uri")).distinct()
        return keep_now, new_count, blocker

    def _delete_files(self, ctx: RunContext, todo: Any, total: int) -> tuple[Any, Any, tuple[StoreProtection, ...]]:
        """Delete `todo` in Spark tasks, each file re-checked first: `_metadata` of expired snapshots
        before any of their files. The outcome rows (kept), the accumulator of what the deletes achieved
        per job prefix (read it once the rows have been written), and what held each store to the plan."""
        from pyspark.sql import functions as F

        from statekeeper.gc import protection as gc_protection
        from statekeeper.gc.execute import delete_plan
        from statekeeper.storage.pace_report import PrefixAccumulator

        opts = self.options
        acc = (ctx.spark.sparkContext.accumulator(0), ctx.spark.sparkContext.accumulator(0),
               ctx.spark.sparkContext.accumulator(0))
        prefixes = ctx.spark.sparkContext.accumulator({}, PrefixAccumulator())
        began = time.monotonic()

        def progress() -> str:
            done, elapsed = acc[0].value, max(time.monotonic() - began, 1e-6)
            return (f"{done}/{total} file(s) done, {human_size(acc[1].value)}, {done / elapsed:.0f} file(s)/s, "
                    f"{acc[2].value} retried request(s)")

        ctx.beat.phase("proving what each store enforces")
        spread, protection = gc_protection.decide(ctx.storage, self._enforcement, gc_protection.planned_roots(todo))
        ctx.beat.phase("deleting", progress)
        outcomes = []
        for order in (0, 1):   # `_metadata` of expired snapshots before any of their files
            part = todo.where(F.col("delete_order") == order)
            outcomes.append(ctx.keep(delete_plan(part, self.inputs.roots, ctx.storage, opts.delete,
                                                 opts.max_deletes_per_second, acc, prefixes,
                                                 enforcement=self._enforcement, spread=spread)))
        return outcomes[0].unionByName(outcomes[1]), prefixes, protection

    def _runs(self, ctx: RunContext) -> list[dict[str, Any]]:
        """Each GC run's newest gc_runs row."""
        from statekeeper.tables.reader import TableReader

        rows = TableReader(ctx.warehouse).read(GC_RUNS.name).to_pylist()
        newest: dict[str, dict[str, Any]] = {}
        for row in rows:
            key = row["run_id"]
            if key not in newest or row["finished_at"] >= newest[key]["finished_at"]:
                newest[key] = row
        return sorted(newest.values(), key=lambda r: r["started_at"])

    def _plan_of(self, ctx: RunContext, run_id: str) -> Any:
        from statekeeper.tables import delta_log

        return ctx.keep(ctx.engine.read(ctx.spark, ctx.warehouse, GC_ACTIONS.name,
                                        version=delta_log.latest_version(ctx.warehouse, GC_ACTIONS.name),
                                        partitions={"run_id": [run_id]}))

    def _snapshots_of(self, ctx: RunContext, row: dict[str, Any]) -> Any:
        version = dict(row["source_versions"] or []).get("snapshots")
        return ctx.engine.read(ctx.spark, ctx.warehouse, "snapshots", version=version)

    def _resume_interrupted(self, ctx: RunContext) -> tuple[str, ...]:
        """Finish every run a kill left `running`: its plan, re-checked (already deleted = done)."""
        from statekeeper.tables import delta_log

        if delta_log.latest_version(ctx.warehouse, GC_RUNS.name) is None:
            return ()
        resumed = []
        for row in self._runs(ctx):
            if row["status"] != GcRunStatus.RUNNING or row["run_id"] == ctx.run_id:
                continue
            ctx.log.warning("%s: run %s was interrupted while deleting; resuming its plan first", ctx.label,
                            row["run_id"])
            self._execute_run(ctx, row, self._snapshots_of(ctx, row))
            resumed.append(row["run_id"])
        return tuple(resumed)

    def _execute_run(self, ctx: RunContext, row: dict[str, Any], indexed_snapshots: Any) -> GcResult:
        """Execute the persisted plan of the earlier run `row` (an interrupted one, or a reviewed dry
        run) and record it under that run's id, completed (else it would look interrupted)."""
        run_id = row["plan_run_id"]
        values = {k: row[k] for k in ("expired_snapshots", "planned", "planned_bytes")}
        values["breakdown"] = tuple(Reclaim(**b) for b in row["breakdown"] or [])
        # absent in rows written before the column existed
        values["ownerless"] = tuple(OwnerlessDir.from_row(d) for d in row.get("ownerless") or [])
        values["forst"] = tuple(ForstJob(**d) for d in row.get("forst") or [])
        values["claimable"] = tuple(ClaimableTail.from_row(d) for d in row.get("claimable") or [])
        other = replace(ctx, run_id=run_id)
        result = self._delete(other, run_id, self._plan_of(ctx, run_id), indexed_snapshots, values)
        self._audit(other, result)
        return result

    def _execute_reviewed(self, ctx: RunContext, resumed: tuple[str, ...]) -> GcResult:
        """--execute RUN_ID: the persisted plan of an earlier dry run, after the same re-checks."""
        target = self.options.plan_run_id
        runs = {r["run_id"]: r for r in self._runs(ctx)}
        row = runs.get(target)
        problem = None
        if row is None:
            problem = f"no GC run {target} in {ctx.warehouse.uri}/gc_runs: pass the run id of a dry run (mode plan)"
        elif row["status"] != GcRunStatus.PLANNED:
            problem = (f"run {target} is {row['status']}, not planned: only a dry-run plan that no fail-closed rule "
                       "blocked can be executed; run a new plan")
        elif row["source_versions"] and dict(row["source_versions"]) != self.inputs.versions:
            # A newer index cut exists: the plan may miss snapshots that appeared since. The re-list
            # would catch new `_metadata`, but a re-plan is cheap and sees everything.
            problem = (f"run {target} was planned on index versions {dict(row['source_versions'])}, the newest "
                       f"succeeded index run is at {self.inputs.versions}: run a new plan and review that")
        values: dict[str, Any] = {"resumed": resumed, "plan_run_id": target}
        if problem is not None:
            return self._result(ctx, GcRunStatus.BLOCKED, blocked=(f"{Rule.PLAN_NOT_EXECUTABLE.value}: {problem}",),
                                **values)
        tables = self.inputs.read(ctx.spark, ctx.engine, ctx.warehouse)
        blockers = self._blockers(ctx, ctx.keep(tables["snapshots"]), tables["references"])
        if blockers:
            return self._result(ctx, GcRunStatus.BLOCKED, blocked=tuple(str(b) for b in blockers), **values)
        result = self._execute_run(ctx, row, tables["snapshots"])
        return replace(result, run_id=ctx.run_id, mode=GcMode.EXECUTE, resumed=resumed)


def _outcome_counts(final: Any, result_rows: Any) -> dict[str, int]:
    """The Result's counts of a deletion: files and bytes by outcome, retried requests."""
    from pyspark.sql import functions as F

    counts = {r["outcome"]: (int(r["n"]), int(r["b"] or 0)) for r in
              final.groupBy("outcome").agg(F.count(F.lit(1)).alias("n"), F.sum("size").alias("b")).collect()}
    return {"deleted": counts.get(GcOutcome.DELETED, (0, 0))[0],
            "deleted_bytes": counts.get(GcOutcome.DELETED, (0, 0))[1],
            "already_gone": counts.get(GcOutcome.ALREADY_GONE, (0, 0))[0],
            "changed_skipped": counts.get(GcOutcome.CHANGED_SKIPPED, (0, 0))[0],
            "failed": counts.get(GcOutcome.FAILED, (0, 0))[0],
            "retries": int(result_rows.agg(F.sum("retries")).first()[0] or 0)}

"""The DR copy job: self-contained copies of restorable snapshots at other roots, verified there.

    result = (CopyToDr(spark)
              .warehouse("s3://bucket/statekeeper")
              .configure(DrOptions(targets=TargetSpec.parse(["s3://dr-bucket/flink"]),
                                   allowed_targets=("s3://dr-bucket/",)))
              .target_storage(StorageConfig.target_from_env())   # None: the source's settings
              .execute())

A run reads the index tables at the newest succeeded cut and the validation tables computed from
it, picks each job's latest restorable checkpoint plus savepoints by policy (or the --snapshot
given), and per round: computes the closure from `references` (`closure`), copies the distinct
objects in Spark tasks (`tasks.CopyTask`, skipping what the target already has), each task then
verifying its objects at the target (`tasks.CopyThenVerifyTask`), and only for snapshots whose
every object verified rewrites and writes the `_metadata`, last (`tasks.MetadataTask`). A snapshot
whose source vanished mid-copy (a running job subsumed it) gets no target `_metadata`; the next
round tries the job's next older restorable checkpoint. Every attempt is a `dr_copies` row, every
object a `dr_files` row.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from statekeeper.jobs import selection
from statekeeper.jobs.base import StatekeeperJob
from statekeeper.jobs.context import RunContext
from statekeeper.jobs.inputs import VALIDATION_TABLES
from statekeeper.jobs.protection import StoreProtection, summary_lines
from statekeeper.jobs.result import JobResult
from statekeeper.jobs.side_by_side import run_side_by_side
from statekeeper.registry import DR
from statekeeper.units import human_size
from statekeeper.replicate.closure import mapped
from statekeeper.replicate.options import DrMode, DrOptions, DrOptionsError, VerifyMode
from statekeeper.storage import StorageConfig
from statekeeper.storage.enforcement import Enforcement
from statekeeper.storage.pace_report import describe as describe_prefixes
from statekeeper.storage.pace_report import merge as merge_prefixes
from statekeeper.tables.catalog import DR_COPIES, DR_FILES
from statekeeper.tables.vocabulary import DrCopyStatus, DrRunStatus, DrSelectedBy

_PROBLEMS_SHOWN = 50


@dataclass(frozen=True, kw_only=True)
class DrResult(JobResult):
    mode: DrMode
    roots: tuple[str, ...] = ()
    targets: dict[str, str] = field(default_factory=dict)
    target_roots: tuple[str, ...] = ()
    options: str = "{}"
    source_versions: dict[str, int] = field(default_factory=dict)
    snapshots: int = 0          # copy groups: jobs (latest restorable checkpoint), savepoints, explicit snapshots
    verified: int = 0           # groups with a verified copy from this run
    failed: int = 0             # groups without one (their dr_copies rows say why)
    fallbacks: int = 0          # older checkpoints tried after a newer one failed at the source
    files_copied: int = 0       # distinct objects written to the target by this run
    bytes_copied: int = 0
    files_skipped: int = 0      # distinct objects the target already had
    bytes_skipped: int = 0
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()     # attempts that failed at the source but whose job got an older copy
    prefixes: tuple[str, ...] = ()  # what the copies achieved per target job prefix (busiest first)
    protection: tuple[StoreProtection, ...] = ()   # per target store and precondition: proven, or what replaced it
    refused: tuple[Refusal, ...] = ()              # follow: the job directories whose newest checkpoint was refused

    def summary(self) -> str:
        verb = "re-verified" if self.mode is DrMode.VERIFY else "copied and verified"
        lines = [f"dr copy run {self.run_id} ({self.mode.value}) {self.status} in {self.seconds:.1f}s: "
                 f"{self.verified}/{self.snapshots} snapshot(s) {verb}, {self.failed} failed; "
                 f"{self.files_copied} object(s) copied ({human_size(self.bytes_copied)}), {self.files_skipped} already "
                 f"at the target ({human_size(self.bytes_skipped)}); {self.fallbacks} fallback(s) to older checkpoints"]
        for src, dst in sorted(self.targets.items()):
            lines.append(f"  {src} -> {dst}")
        for n in self.notes[:20]:
            lines.append(f"  fell back: {n}")
        lines.extend(f"  per prefix: {p}" for p in self.prefixes)
        lines.extend(summary_lines(self.protection))
        lines += self._closing_lines(self.problems, "dr_runs.problems and dr_copies")
        return "\n".join(lines)

    def audit_values(self) -> dict[str, Any]:
        return {"protection": [p.row() for p in self.protection],
                "refused": [asdict(r) for r in self.refused] if self.mode is DrMode.FOLLOW else None}


@dataclass(frozen=True)
class Refusal:
    """A job directory whose newest checkpoint a follow round refused (`dr_runs.refused`)."""

    root: str
    job_dir: str
    metadata_uri: str | None
    reason: str


class CopyToDr(StatekeeperJob[DrResult, DrOptions]):
    """Builder for one DR copy run. Nothing is written without a target allowlist."""

    JOB = DR
    SOURCES = ("snapshots", "references", "files")
    OPTIONAL_SOURCES = VALIDATION_TABLES

    def __init__(self, spark: Any) -> None:
        super().__init__(spark)
        self._target: StorageConfig | None = None
        self._mapping: dict[str, str] = {}
        self._enforcement: Enforcement | None = None       # what the target stores enforce: proven once per run
        self._protection: tuple[StoreProtection, ...] = ()

    def target_storage(self, config: StorageConfig | None) -> CopyToDr:
        """Settings of the DR store (another endpoint or identity); None: the source's. A store's
        settings, like `storage`, not an option: its secrets stay out of the recorded options."""
        self._target = config
        return self

    # -- run ----------------------------------------------------------------------------------

    def _prepare(self, ctx: RunContext) -> None:
        if self.options.mode is not DrMode.FOLLOW:   # follow mode trusts the codec, not a validation run
            self.inputs.require_validation(ctx.warehouse, because="a DR copy takes only snapshots validation found "
                                           "restorable", then="the DR copy")
        self._mapping = self.options.mapping(self.inputs.roots)
        self._enforcement, self._protection = None, ()
        if self.options.snapshots:
            self._check_explicit(ctx)
        ctx.log.info("%s: targets %s", ctx.label, self._mapping)

    def _target_config(self, ctx: RunContext) -> StorageConfig:
        return self._target if self._target is not None else ctx.storage

    def _result_fields(self, ctx: RunContext) -> dict[str, Any]:
        return {"mode": self.options.mode, "roots": tuple(self.inputs.roots), "targets": dict(self._mapping),
                "target_roots": tuple(sorted(self._mapping.values())), "options": self.options.to_json(),
                "protection": self._protection}

    def _proven(self, ctx: RunContext) -> Enforcement:
        """What the target stores enforce, proven on the driver before the run's first copy (once per run: every
        round and task reuses it), and recorded for the run's row."""
        if self._enforcement is None:
            from statekeeper.replicate.protection import decide

            ctx.beat.phase("proving what each target store enforces")
            target = self._target_config(ctx)
            self._enforcement = Enforcement(target, tag=ctx.run_id)
            self._protection = decide(ctx.storage, target, self._enforcement, self._mapping)
        return self._enforcement

    def _run(self, ctx: RunContext) -> DrResult:
        if self.options.mode is DrMode.VERIFY:
            return self._reverify(ctx)      # reads dr_copies and dr_files only, not the index
        if self.options.mode is DrMode.FOLLOW:
            return self._follow(ctx)        # lists the indexed roots; reads no index table
        # The cut check runs beside choosing the snapshots (the first queries), and the copy waits for it
        # (`_copy`): nothing is copied from a torn cut, and no Spark job of its own keeps `snapshots` first.
        tables = self._read_cut(ctx)
        validation = self.inputs.read(ctx.spark, ctx.engine, ctx.warehouse, optional=True)
        return self._copy(ctx, tables["snapshots"], tables["references"], tables["files"],
                          validation["validation_results"], validation["validation_jobs"])

    # -- copy ----------------------------------------------------------------------------------

    def _copy(self, ctx: RunContext, snaps: Any, refs: Any, files: Any, results: Any, jobs: Any) -> DrResult:
        from pyspark.sql import functions as F

        from statekeeper.replicate import select

        opts = self.options

        def choose() -> tuple[Any, int]:
            kept = ctx.keep(select.candidates(opts, results, jobs, snaps))
            # every group has exactly one rank-0 candidate: counting those needs no shuffle
            return kept, int(kept.where(F.col("rank") == 0).count())

        # Each only reads the validation tables or dr_files: side by side, not one small Spark job after another.
        parts = {"choosing snapshots": choose,
                 # Read once: the rounds' own dr_files rows only add targets that this run's later rounds do not share.
                 "reading what the targets hold": lambda: self._known_targets(ctx)}
        if not opts.snapshots:
            parts["finding jobs with nothing to copy"] = lambda: self._jobs_without_restorable(jobs)
        found = run_side_by_side(ctx.spark, ctx.beat, parts)
        (candidates, groups), known = found["choosing snapshots"], found["reading what the targets hold"]
        problems: list[str] = list(found.get("finding jobs with nothing to copy", []))
        ctx.deferred.settle()   # the cut check has passed: only now does the run touch a target
        self._create_local_targets()
        totals = {"files_copied": 0, "bytes_copied": 0, "files_skipped": 0, "bytes_skipped": 0}
        verified: set[str] = set()
        attempts: dict[str, list[str]] = {}
        fallbacks = 0
        chosen = candidates.where(F.col("rank") == 0)
        versions: dict[str, int] = {}
        prefixes: dict[str, list[Any]] = {}
        for round_no in range(opts.max_fallbacks + 1):
            # Every group has a rank-0 candidate: the first round is empty only when there are no groups.
            attempted = groups if round_no == 0 else int(chosen.count())
            if attempted == 0:
                break
            if round_no:
                fallbacks += attempted
            outcome = self._copy_round(ctx, chosen, refs, files, round_no, known)
            versions.update(outcome["versions"])
            for k in totals:
                totals[k] += outcome[k]
            verified |= set(outcome["verified_groups"])
            merge_prefixes(prefixes, outcome["prefixes"])
            for group, text in outcome["problems"]:
                attempts.setdefault(group, []).append(text)
            self._progress = dict(totals, snapshots=groups, verified=len(verified), fallbacks=fallbacks,
                                  table_versions=versions)
            retry = outcome["retry_groups"]
            if not retry:
                break
            chosen = candidates.where((F.col("rank") == round_no + 1) & F.col("group_key").isin(retry))
        problems += [t for g, texts in sorted(attempts.items()) if g not in verified for t in texts]
        notes = [t for g, texts in sorted(attempts.items()) if g in verified for t in texts]
        failed = groups - len(verified)
        status = DrRunStatus.SUCCEEDED if failed == 0 and not problems else DrRunStatus.ATTENTION
        return self._result(ctx, status, snapshots=groups, verified=len(verified), failed=failed,
                            fallbacks=fallbacks, problems=tuple(problems[:_PROBLEMS_SHOWN]),
                            notes=tuple(notes[:_PROBLEMS_SHOWN]), table_versions=versions,
                            prefixes=describe_prefixes(prefixes), **totals)

    # -- follow --------------------------------------------------------------------------------

    def _follow(self, ctx: RunContext) -> DrResult:
        """--mode follow: per job directory of the indexed roots, its newest completed checkpoint since the
        last verified copy, found by listing and parsed by the codec in Spark tasks (replicate.follow), then
        one copy round as the nightly run's (copy, verify, `_metadata` last; dr_copies and dr_files). No
        fallback: a checkpoint Flink subsumed mid-copy fails its row, and the next round takes the newer one."""
        from pyspark.sql import functions as F

        from statekeeper.replicate.follow import FollowStatus
        from statekeeper.replicate.tasks import FOLLOW_OUT_SPARK, FollowTask
        from statekeeper.tables.vocabulary import FileKind, SnapshotType

        self._create_local_targets()
        roots = list(self.inputs.roots)
        jobs, problems = self._followed_jobs(ctx, roots)
        ctx.beat.phase(f"looking for new checkpoints in {len(jobs)} job director(ies)")
        looks = self._first_looks(ctx, jobs)
        # dr_copies is read only when some job's newest checkpoint is not at the target: an idle round reads no table
        read = any(look.unpublished for look in looks)
        last = self._last_copied(ctx) if read else {}
        news = [(look.root, look.job_dir) for look in looks
                if look.unpublished or (read and look.due_after(last.get((look.root, look.job_dir))))]
        per_job: list[Any] = []
        if news:
            parts = max(1, ctx.spark.sparkContext.defaultParallelism) * 4
            wanted = ctx.spark.createDataFrame([(r, j, last.get((r, j))) for r, j in news],
                                               "root string, job_dir string, last_copied long")
            found = ctx.keep(wanted.repartition(min(parts, len(news)))
                             .mapInArrow(FollowTask(ctx.storage, roots), FOLLOW_OUT_SPARK))
            per_job = found.where(F.col("kind") == "job").select("root", "job_dir", "status", "metadata_uri",
                                                                "problem").collect()   # one row per job directory
        status = {(r["root"], r["job_dir"]): FollowStatus(r["status"]) for r in per_job}
        refusals = sorted((r for r in per_job if r["status"] == FollowStatus.REFUSED.value),
                          key=lambda r: r["metadata_uri"] or r["job_dir"])
        problems += [r["problem"] for r in refusals]
        refused = tuple(Refusal(r["root"], r["job_dir"], r["metadata_uri"], r["problem"]) for r in refusals)
        notes = [r["problem"] for r in per_job if r["status"] == FollowStatus.SUBSUMED.value]
        due = sum(1 for s in status.values() if s is FollowStatus.DUE)
        # nothing new: no completed checkpoint yet, or the newest already has a verified copy
        nothing_new = len(jobs) - len(news) + sum(
            1 for s in status.values() if s in (FollowStatus.UP_TO_DATE, FollowStatus.NO_CHECKPOINT))
        totals = {"files_copied": 0, "bytes_copied": 0, "files_skipped": 0, "bytes_skipped": 0}
        versions: dict[str, int] = {}
        prefixes: dict[str, list[Any]] = {}
        verified: list[str] = []
        mid_copy = 0        # due checkpoints whose source vanished during the copy
        if due:
            due_rows = found.where(F.col("status") == FollowStatus.DUE.value)
            chosen = (due_rows.where(F.col("kind") == "job").select(
                F.concat_ws("|", F.lit("job"), "root", "job_dir").alias("group_key"), F.lit(0).alias("rank"),
                F.lit(DrSelectedBy.FOLLOW.value).alias("selected_by"), F.col("metadata_uri").alias("snapshot_uri"),
                "root", "job_dir", F.col("job_dir").alias("job_id"), "checkpoint_id",
                F.lit(SnapshotType.CHECKPOINT.value).alias("snapshot_type"), "metadata_etag", "metadata_mtime",
                "metadata_body"))
            objects = due_rows.where(F.col("kind") == "object")
            refs = objects.select(F.col("metadata_uri").alias("snapshot_uri"), "root", F.col("uri").alias("file_uri"),
                                  F.lit(FileKind.UNKNOWN.value).alias("file_kind"))
            files = objects.select("uri", "size", "etag").dropDuplicates(["uri"])
            outcome = self._copy_round(ctx, chosen, refs, files, 0, self._known_targets(ctx))
            versions.update(outcome["versions"])
            for k in totals:
                totals[k] += outcome[k]
            merge_prefixes(prefixes, outcome["prefixes"])
            verified = list(outcome["verified_groups"])
            vanished = set(outcome["retry_groups"])
            mid_copy = len(vanished)
            for group, text in outcome["problems"]:
                # a source that vanished mid-copy is the race with a running job: the next round copies the newer one
                (notes if group in vanished else problems).append(text)
        failed = due - len(verified)
        run_status = (DrRunStatus.SUCCEEDED if failed == mid_copy and not problems else DrRunStatus.ATTENTION)
        ctx.log.info("%s: %d job director(ies): %d due, %d with nothing new, %d subsumed while read, %d during the "
                     "copy", ctx.label, len(jobs), due, nothing_new, len(notes) - mid_copy, mid_copy)
        return self._result(ctx, run_status, snapshots=due, verified=len(verified), failed=failed,
                            problems=tuple(problems[:_PROBLEMS_SHOWN]), notes=tuple(notes[:_PROBLEMS_SHOWN]),
                            table_versions=versions, prefixes=describe_prefixes(prefixes), refused=refused,
                            **totals)

    def _first_looks(self, ctx: RunContext, jobs: list[tuple[str, str]]) -> list[Any]:
        """replicate.follow.first_look of every job, on the driver, 16 at a time (a row per job, no object
        listing): a round with nothing new ends without the Spark task and Python worker of the discovery."""
        from concurrent.futures import ThreadPoolExecutor

        from statekeeper.replicate.follow import first_look
        from statekeeper.storage import RoutingFileIO

        source, target = RoutingFileIO(ctx.storage), RoutingFileIO(self._target_config(ctx))
        with ThreadPoolExecutor(max_workers=16) as pool:
            return list(pool.map(lambda job: first_look(source, target, job[0], job[1], self._mapping), jobs))

    def _followed_jobs(self, ctx: RunContext, roots: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
        """(root, job directory) pairs to follow: each root's child directories named by a job id, through the
        job filter; and a problem for each root with a flat layout (chk-N straight in the root), which follow
        mode does not take. One delimited LIST per root, on the driver: a row per job."""
        from statekeeper.replicate.follow import job_dirs
        from statekeeper.storage import RoutingFileIO

        fileio = RoutingFileIO(ctx.storage)
        jobs: list[tuple[str, str]] = []
        problems: list[str] = []
        for root in roots:
            names, flat = job_dirs(root, fileio.list_dirs(root))
            if flat:
                problems.append(f"{root}: checkpoints written straight into the root ({', '.join(flat[:3])}) are not "
                                "followed; copy them with the nightly DR run, or give the job a directory of its own")
            glob = self.options.job_filter
            jobs += [(root, n) for n in names if not glob or selection.job_dir_matched(glob, n)]
        return jobs, problems

    def _last_copied(self, ctx: RunContext) -> dict[tuple[str, str], int]:
        """(source root, job directory) -> the checkpoint id of its newest verified copy at this run's targets, by
        any run (nightly or follow). A row per job directory reaches the driver."""
        from pyspark.sql import functions as F

        from statekeeper.tables import delta_log
        from statekeeper.tables.vocabulary import SnapshotType

        if delta_log.latest_version(ctx.warehouse, DR_COPIES.name) is None:
            return {}
        copies = ctx.engine.read(ctx.spark, ctx.warehouse, DR_COPIES.name)
        here = F.lit(False)
        for src, dst in sorted(self._mapping.items()):
            here = here | ((F.col("source_root") == src) & (F.col("target_root") == dst))
        rows = (copies.where((F.col("status") == DrCopyStatus.VERIFIED.value) & here
                             & (F.col("snapshot_type") == SnapshotType.CHECKPOINT.value)
                             & (F.col("selected_by") != DrSelectedBy.REVERIFY.value))
                .groupBy("source_root", "job_dir").agg(F.max("checkpoint_id").alias("id")).collect())
        return {(r["source_root"], r["job_dir"]): int(r["id"]) for r in rows if r["id"] is not None}

    def _create_local_targets(self) -> None:
        """Every local target root exists after a copy run, also one nothing was copied to yet (e.g. a
        savepoint root without savepoints): the target is indexed as a store of its own, and the index
        refuses a missing local root as a likely typo or unmounted volume."""
        import os

        from statekeeper.storage import local_path

        for target in self._mapping.values():
            if target.startswith("file://"):
                os.makedirs(local_path(target), exist_ok=True)

    def _check_explicit(self, ctx: RunContext) -> None:
        """--snapshot: each must be indexed, parsed and restorable (a handful of rows on the driver).
        Checked before the run starts, so a refused request leaves no trace but its error."""
        tables = self.inputs.read(ctx.spark, ctx.engine, ctx.warehouse)
        optional = self.inputs.read(ctx.spark, ctx.engine, ctx.warehouse, optional=True)
        glob = self.options.job_filter
        for snapshot in selection.explicit_snapshots(tables["snapshots"], optional["validation_results"],
                                                     list(self.options.snapshots)):
            refusal = snapshot.refusal("copied", error_chars=300)
            if refusal is not None:
                raise DrOptionsError(refusal)
            if glob and not selection.job_dir_matched(glob, snapshot.job_dir or ""):
                raise DrOptionsError(f"--snapshot {snapshot.uri} is in {snapshot.job_dir}, which the job filter "
                                     f"{glob!r} excludes")

    def _jobs_without_restorable(self, jobs: Any) -> list[str]:
        from pyspark.sql import functions as F

        from statekeeper.tables.vocabulary import UnitKind

        none = jobs.where((F.col("kind") == UnitKind.JOB.value) & F.col("latest_restorable_uri").isNull())
        if self.options.job_filter:
            none = none.where(selection.job_dir_matches(self.options.job_filter))
        return [f"{r['location']}: no restorable checkpoint to copy (validation_jobs)"
                for r in none.select("location").orderBy("location").limit(_PROBLEMS_SHOWN).collect()]

    def _known_targets(self, ctx: RunContext) -> Any:
        """(target_uri, known_version, known_checksum): per target object, the version it had when a run of this
        tool last wrote or verified it (dr_files), and the SHA-256 recorded with it. Only that proves a same-size
        target holds the source's bytes without reading them; a DataFrame joined into the tasks, never collected.
        Rows of dr_files written before target_version existed prove nothing and are left out. None: no dr_files
        yet (a first copy joins nothing: a join with an empty frame still shuffles the other side)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        from statekeeper.storage.transfer import TransferOutcome
        from statekeeper.tables import delta_log

        if delta_log.latest_version(ctx.warehouse, DR_FILES.name) is None:
            return None
        rows = ctx.engine.read(ctx.spark, ctx.warehouse, DR_FILES.name)
        newest = Window.partitionBy("target_uri").orderBy(F.col("run_id").desc())   # run ids sort by start time
        return ctx.keep(
            rows.where(F.col("verified") & F.col("target_version").isNotNull()
                       & F.col("outcome").isin(TransferOutcome.COPIED.value, TransferOutcome.SKIPPED.value))
            .withColumn("_n", F.row_number().over(newest)).where(F.col("_n") == 1)
            .select("target_uri", F.col("target_version").alias("known_version"),
                    F.col("checksum").alias("known_checksum")))

    def _copy_round(self, ctx: RunContext, chosen: Any, refs: Any, files: Any, round_no: int,
                    known: Any) -> dict[str, Any]:
        """One round: the closure of `chosen`, its objects copied and verified at the target, then each
        snapshot whose every object verified gets its rewritten `_metadata`, last; dr_files and dr_copies
        record it all. What the round did, and which copy groups to retry one checkpoint older."""
        from pyspark.sql import functions as F

        from statekeeper.replicate.tasks import in_target_order

        started = datetime.now(timezone.utc)
        parts = max(1, ctx.spark.sparkContext.defaultParallelism) * 4
        cl, refused = self._closure(ctx, chosen, refs, files)
        # Not kept: the copy's own kept outcomes compute it in the same Spark job (a keep of its own was one more
        # job, ~0.3 s of a small run); `cl` is kept, so the progress line's count of it recomputes little.
        objects = in_target_order(
            cl.where(~F.col("is_dir")).select("source_uri", "target_uri", "expected_size", "expected_version")
            .dropDuplicates(["target_uri"]).transform(lambda df: _with_known(df, known)), parts)
        copied, prefixes = self._transfer(ctx, objects, parts, round_no)
        per_file = ctx.keep(
            cl.where(~F.col("is_dir")).join(copied.drop("source_uri"), "target_uri", "left")
            .withColumn("ok", _transferred() & F.coalesce(F.col("verified"), F.lit(False))))
        # follow mode hands over the `_metadata` bytes its discovery parsed; the nightly copy reads the source again
        held = (F.col("metadata_body") if "metadata_body" in chosen.columns
                else F.lit(None).cast("binary").alias("metadata_body"))
        # kept: the `_metadata` writes and the dr_copies rows both start from it
        base = ctx.keep(
            chosen.select("snapshot_uri", "metadata_etag", "metadata_mtime", held, "group_key", "selected_by",
                          "root", "job_dir", "job_id", "checkpoint_id", "snapshot_type")
            .withColumn("target_metadata_uri", mapped("snapshot_uri", self._mapping))
            .join(refused, "snapshot_uri", "left").join(_per_snapshot(per_file), "snapshot_uri", "left"))
        ctx.beat.phase(f"writing the rewritten _metadata, last (round {round_no})")
        meta = self._metadata_writes(ctx, base, parts)
        rows = ctx.keep(self._copies(ctx, base, meta, started))
        # The counts read only kept frames: they run beside the two commits rather than after them.
        done = run_side_by_side(ctx.spark, ctx.beat, {
            f"recording dr_files and dr_copies (round {round_no})": lambda: self._record(ctx, per_file, rows),
            f"counting the round's outcomes (round {round_no})": lambda: {**_transfer_counts(copied),
                                                                           **_round_groups(rows)}})
        versions, counts = done.values()
        return {"versions": versions, **counts, "prefixes": prefixes.value}

    def _closure(self, ctx: RunContext, chosen: Any, refs: Any, files: Any) -> tuple[Any, Any]:
        """The objects each chosen snapshot needs, mapped to the target (kept), without the snapshots
        refused for naming files outside every root; and those refusals (snapshot_uri, refusal)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        from statekeeper.replicate.closure import closure

        # Files outside every root are refused unless --include-external (then they go below _external/).
        outside = F.col("external") & F.lit(not self.options.include_external)
        cl = ctx.keep(closure(chosen, refs, files, self._mapping)
                      .withColumn("refused", F.max(outside).over(Window.partitionBy("snapshot_uri"))))
        refused = (cl.where(outside).groupBy("snapshot_uri")
                   .agg(F.count(F.lit(1)).alias("n"), F.min("source_uri").alias("example"))
                   .select("snapshot_uri", F.concat(F.lit("references "), F.col("n").cast("string"),
                                                    F.lit(" file(s) outside every indexed root, e.g. "),
                                                    F.col("example"),
                                                    F.lit(": index that location as a root, or pass --include-external"))
                           .alias("refusal")))
        return cl.where(~F.col("refused")).drop("refused"), refused

    def _transfer(self, ctx: RunContext, objects: Any, parts: int, round_no: int) -> tuple[Any, Any]:
        """Copy the distinct objects (kept, in_target_order) in Spark tasks (what the target provably has is
        skipped), each task then verifying at the target what it copied or skipped: the outcomes with their
        verification (COPY_VERIFIED_OUT), kept, and the accumulator of what the copies achieved per target job
        prefix (complete once the outcomes have been computed)."""
        from statekeeper.replicate.tasks import COPY_VERIFIED_OUT_SPARK, CopyTask, CopyThenVerifyTask
        from statekeeper.storage.pace_report import PrefixAccumulator

        opts = self.options
        sc = ctx.spark.sparkContext
        acc_files, acc_bytes = sc.accumulator(0), sc.accumulator(0)
        acc_prefixes = sc.accumulator({}, PrefixAccumulator())
        total: list[int] = []   # counted when a progress line first needs it: a short copy never logs one
        began = time.monotonic()

        def progress() -> str:
            if not total:
                total.append(int(objects.count()))
            done, elapsed = acc_files.value, max(time.monotonic() - began, 1e-6)
            return (f"{done}/{total[0]} object(s) done, {human_size(acc_bytes.value)} copied, "
                    f"{human_size(acc_bytes.value / elapsed)}/s")

        ctx.beat.phase(f"copying and verifying at the target (round {round_no})", progress)
        checksum = opts.verify is VerifyMode.CHECKSUM
        slots = max(1, sc.defaultParallelism)
        per_task = opts.max_copies_per_second / min(slots, parts) if opts.max_copies_per_second else None
        copy = CopyTask(ctx.storage, self._target, self.inputs.roots, sorted(self._mapping.values()),
                        opts.copies_in_flight, checksum, per_task, self._proven(ctx), acc_files, acc_bytes,
                        acc_prefixes)
        copied = ctx.keep(objects.mapInArrow(
            CopyThenVerifyTask(copy, self._target_config(ctx), checksum, opts.copies_in_flight),
            COPY_VERIFIED_OUT_SPARK))
        return copied, acc_prefixes

    def _metadata_writes(self, ctx: RunContext, base: Any, parts: int) -> Any:
        """The rewritten `_metadata` of each snapshot that is not refused and whose every object verified,
        written by Spark tasks (lazily: when the dr_copies rows are computed)."""
        from pyspark.sql import functions as F

        from statekeeper.replicate.tasks import META_OUT_SPARK, MetadataTask

        ready = base.where(F.col("refusal").isNull() & (F.coalesce(F.col("bad"), F.lit(0)) == 0))
        return ready.select("snapshot_uri", "target_metadata_uri", "metadata_etag", "metadata_body",
                            F.coalesce("verified_targets", F.array().cast("array<string>")).alias("verified_targets"),
                            "external").repartition(parts, "snapshot_uri").mapInArrow(
            MetadataTask(ctx.storage, self._target_config(ctx), sorted(self._mapping.values()), dict(self._mapping)),
            META_OUT_SPARK)

    def _copies(self, ctx: RunContext, base: Any, meta: Any, started: datetime) -> Any:
        """The round's dr_copies rows, one per snapshot attempted (with its copy group and whether to retry it)."""
        from pyspark.sql import functions as F

        finished = datetime.now(timezone.utc)
        ok = F.coalesce(F.col("ok"), F.lit(False))
        return base.join(meta.drop("target_metadata_uri"), "snapshot_uri", "left").select(
            F.lit(ctx.run_id).alias("run_id"),
            F.when(ok, F.lit(DrCopyStatus.VERIFIED.value)).otherwise(F.lit(DrCopyStatus.FAILED.value)).alias("status"),
            F.col("snapshot_uri").alias("source_metadata_uri"),
            F.when(ok, F.col("target_metadata_uri")).alias("target_metadata_uri"),
            F.col("root").alias("source_root"), mapped("root", self._mapping).alias("target_root"),
            "job_dir", "job_id", "checkpoint_id", "snapshot_type", "selected_by",
            *[F.coalesce(F.col(c), F.lit(0)).cast("long").alias(c)
              for c in ("files", "bytes", "files_copied", "bytes_copied", "files_skipped", "bytes_skipped")],
            F.lit(self.options.verify.value).alias("verification"), "metadata_sha256", "metadata_bytes",
            F.coalesce("refusal", "file_problem", "problem").alias("problem"),
            F.lit(None).cast("string").alias("error"),
            F.lit(started).alias("started_at"), F.lit(finished).alias("finished_at"),
            F.col("metadata_mtime").alias("source_completed_at"),
            F.when(ok, F.col("published_at")).alias("published_at"),
            "group_key", (F.coalesce("source_bad", F.lit(False)) | F.coalesce("source_problem", F.lit(False)))
            .alias("retry"))

    def _record(self, ctx: RunContext, per_file: Any, rows: Any) -> dict[str, int]:
        """Append the round's dr_files and dr_copies rows: the versions written."""
        from pyspark.sql import functions as F

        # Every per_file row belongs to a snapshot of `rows` (the closure is of the chosen snapshots), and its
        # target_metadata_uri is the one `rows` names when the copy verified (both map the snapshot's URI): no join.
        files_rows = per_file.select(
            F.lit(ctx.run_id).alias("run_id"), F.col("snapshot_uri").alias("source_metadata_uri"),
            "target_metadata_uri", "source_uri", "target_uri",
            F.coalesce("size", "expected_size").alias("size"), "checksum",
            F.coalesce("outcome", F.lit("not_copied")).alias("outcome"), "method", "verified",
            F.coalesce("verify_message", "message").alias("message"),
            # what the next run trusts instead of reading the bytes: only a version verified by this run
            F.when(F.col("ok"), F.col("found_version")).alias("target_version"))
        meta_commit = ctx.engine.write(files_rows.select(*DR_FILES.schema.names), ctx.warehouse, DR_FILES,
                                       mode="append", metadata=ctx.commit_metadata())
        copies_commit = ctx.engine.write(rows.select(*DR_COPIES.schema.names), ctx.warehouse, DR_COPIES,
                                         mode="append", metadata=ctx.commit_metadata())
        return {DR_FILES.name: meta_commit.version, DR_COPIES.name: copies_commit.version}

    # -- re-verify -----------------------------------------------------------------------------

    def _reverify(self, ctx: RunContext) -> DrResult:
        """--mode verify: each target `_metadata`'s newest verified copy, checked again object by object."""
        from pyspark.sql import functions as F

        from statekeeper.replicate.tasks import VERIFY_OUT_SPARK, VerifyTask, in_target_order
        from statekeeper.tables import delta_log

        opts = self.options
        if delta_log.latest_version(ctx.warehouse, DR_COPIES.name) is None:
            raise DrOptionsError(f"{ctx.warehouse.uri} has no dr_copies yet: run a copy first")
        started = datetime.now(timezone.utc)
        newest = ctx.keep(self._newest_copies(ctx))
        items = self._copied_objects(ctx, newest)
        checksum = opts.verify is VerifyMode.CHECKSUM
        parts = max(1, ctx.spark.sparkContext.defaultParallelism) * 4
        ctx.beat.phase("re-verifying copies at the target")
        checked = ctx.keep(in_target_order(items.select("target_uri", "size", "checksum", "version").distinct(), parts)
                           .mapInArrow(VerifyTask(self._target_config(ctx), checksum, opts.copies_in_flight),
                                       VERIFY_OUT_SPARK))
        unverified = ~F.coalesce("verified", F.lit(False))
        per = (items.join(checked, "target_uri", "left").groupBy("target_metadata_uri").agg(
            F.count(F.lit(1)).alias("n"), F.sum(F.coalesce("size", F.lit(0))).alias("b"),
            F.sum(unverified.cast("long")).alias("bad"),
            F.min(F.when(unverified, F.concat(F.col("target_uri"), F.lit(": "),
                                              F.coalesce("verify_message", F.lit("not checked"))))).alias("problem")))
        rows = ctx.keep(self._reverified(ctx, newest, per, started))
        commit = ctx.engine.write(rows.select(*DR_COPIES.schema.names), ctx.warehouse, DR_COPIES, mode="append",
                                  metadata=ctx.commit_metadata())
        total = int(rows.count())
        bad = rows.where(F.col("status") == DrCopyStatus.FAILED.value)
        failed = int(bad.count())
        problems = tuple(f"{r['target_metadata_uri']}: {r['problem']}" for r in
                         bad.select("target_metadata_uri", "problem").orderBy("target_metadata_uri")
                         .limit(_PROBLEMS_SHOWN).collect())
        return self._result(ctx, DrRunStatus.SUCCEEDED if failed == 0 else DrRunStatus.ATTENTION, snapshots=total,
                            verified=total - failed, failed=failed, problems=problems,
                            table_versions={DR_COPIES.name: commit.version})

    def _newest_copies(self, ctx: RunContext) -> Any:
        """The newest verified dr_copies row of each target `_metadata` below the targets (re-verifications
        excluded: they copy nothing)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        copies = ctx.engine.read(ctx.spark, ctx.warehouse, DR_COPIES.name)
        in_targets = F.lit(False)
        for t in sorted(self._mapping.values()):
            in_targets = in_targets | F.col("target_metadata_uri").startswith(t + "/")
        w = Window.partitionBy("target_metadata_uri").orderBy(F.col("finished_at").desc(), F.col("run_id").desc())
        return (copies.where((F.col("status") == DrCopyStatus.VERIFIED.value) & in_targets
                             & (F.col("selected_by") != DrSelectedBy.REVERIFY.value))
                .withColumn("_n", F.row_number().over(w)).where(F.col("_n") == 1).drop("_n"))

    def _copied_objects(self, ctx: RunContext, newest: Any) -> Any:
        """Every object of those copies (target_metadata_uri, target_uri, size, checksum, version) and
        each `_metadata` itself."""
        from pyspark.sql import functions as F

        files = ctx.engine.read(ctx.spark, ctx.warehouse, DR_FILES.name)
        # An object must still be the version last verified (by any run: a shared file re-copied later is
        # that run's version); a copy whose object changed since is flagged, whatever its size.
        objects = (files.join(newest.select("run_id", "target_metadata_uri"), ["run_id", "target_metadata_uri"],
                              "left_semi")
                   .select("target_metadata_uri", "target_uri", "size", "checksum")
                   .transform(lambda df: _with_known(df, self._known_targets(ctx)))
                   .drop("known_checksum").withColumnRenamed("known_version", "version"))
        metadata = newest.select("target_metadata_uri", F.col("target_metadata_uri").alias("target_uri"),
                                 F.col("metadata_bytes").alias("size"), F.col("metadata_sha256").alias("checksum"),
                                 F.lit(None).cast("string").alias("version"))
        return objects.unionByName(metadata)

    def _reverified(self, ctx: RunContext, newest: Any, per: Any, started: datetime) -> Any:
        """The re-verification's dr_copies rows: each copy again, verified or failed with its first problem."""
        from pyspark.sql import functions as F

        finished = datetime.now(timezone.utc)
        return newest.drop("problem", "files", "bytes").join(per, "target_metadata_uri").select(
            F.lit(ctx.run_id).alias("run_id"),
            F.when(F.col("bad") == 0, F.lit(DrCopyStatus.VERIFIED.value)).otherwise(F.lit(DrCopyStatus.FAILED.value))
            .alias("status"), "source_metadata_uri", "target_metadata_uri", "source_root", "target_root", "job_dir",
            "job_id", "checkpoint_id", "snapshot_type", F.lit(DrSelectedBy.REVERIFY.value).alias("selected_by"),
            (F.col("n") - 1).cast("long").alias("files"), F.col("b").cast("long").alias("bytes"),
            *[F.lit(0).cast("long").alias(c) for c in ("files_copied", "bytes_copied", "files_skipped",
                                                       "bytes_skipped")],
            F.lit(self.options.verify.value).alias("verification"), "metadata_sha256", "metadata_bytes", "problem",
            F.lit(None).cast("string").alias("error"), F.lit(started).alias("started_at"),
            F.lit(finished).alias("finished_at"),
            # the copy's recovery point, as recorded when it was made (null on rows older than these columns)
            "source_completed_at", "published_at")

def _with_known(rows: Any, known: Any) -> Any:
    """`rows` (with target_uri) with what dr_files knows of each target (_known_targets; None: nothing yet)."""
    from pyspark.sql import functions as F

    if known is None:
        return (rows.withColumn("known_version", F.lit(None).cast("string"))
                .withColumn("known_checksum", F.lit(None).cast("string")))
    return rows.join(known, "target_uri", "left")


def _transferred() -> Any:
    """An object the copy wrote, or skipped on proof that the target holds the source's bytes."""
    from pyspark.sql import functions as F

    from statekeeper.storage.transfer import TransferOutcome

    return F.col("outcome").isin(TransferOutcome.COPIED.value, TransferOutcome.SKIPPED.value)


def _per_snapshot(per_file: Any) -> Any:
    """Per snapshot: its objects and bytes, what this round copied and skipped, how many did not verify
    (and the first such problem), whether its source changed or vanished, the targets that verified, and the
    external files' mapping."""
    from pyspark.sql import functions as F

    from statekeeper.storage.transfer import TransferOutcome

    source_bad = F.col("outcome").isin(TransferOutcome.SOURCE_MISSING.value, TransferOutcome.SOURCE_CHANGED.value)
    problem = F.concat(F.col("target_uri"), F.lit(" (from "), F.col("source_uri"), F.lit("): "),
                       F.coalesce(F.col("verify_message"), F.col("message"), F.col("outcome"), F.lit("not copied")))
    copied_now = F.col("outcome") == TransferOutcome.COPIED.value
    skipped = F.col("outcome") == TransferOutcome.SKIPPED.value
    return per_file.groupBy("snapshot_uri").agg(
        F.count(F.lit(1)).alias("files"), F.sum(F.coalesce("size", "expected_size", F.lit(0))).alias("bytes"),
        F.sum(copied_now.cast("long")).alias("files_copied"),
        F.sum(F.when(copied_now, F.col("size")).otherwise(0)).alias("bytes_copied"),
        F.sum(skipped.cast("long")).alias("files_skipped"),
        F.sum(F.when(skipped, F.col("size")).otherwise(0)).alias("bytes_skipped"),
        F.sum((~F.col("ok")).cast("long")).alias("bad"),
        F.max(source_bad).alias("source_bad"),
        F.min(F.when(~F.col("ok"), problem)).alias("file_problem"),
        F.collect_list(F.when(F.col("ok"), F.col("target_uri"))).alias("verified_targets"),
        # files outside every root copied below _external/ (--include-external): the rewrite maps each
        F.collect_list(F.when(F.col("external"), F.struct("source_uri", "target_uri"))).alias("external"))


def _transfer_counts(copied: Any) -> dict[str, int]:
    """Objects (and bytes) the round copied, and those the target already had."""
    from pyspark.sql import functions as F

    from statekeeper.storage.transfer import TransferOutcome

    counts = copied.groupBy("outcome").agg(F.count(F.lit(1)).alias("n"), F.sum("size").alias("b")).collect()
    by = {r["outcome"]: (int(r["n"]), int(r["b"] or 0)) for r in counts}
    return {"files_copied": by.get(TransferOutcome.COPIED.value, (0, 0))[0],
            "bytes_copied": by.get(TransferOutcome.COPIED.value, (0, 0))[1],
            "files_skipped": by.get(TransferOutcome.SKIPPED.value, (0, 0))[0],
            "bytes_skipped": by.get(TransferOutcome.SKIPPED.value, (0, 0))[1]}


def _round_groups(rows: Any) -> dict[str, Any]:
    """Per copy group, a few rows on the driver (one per job directory, savepoint or --snapshot, each
    attempted once a round), in one pass: those verified, those to retry one checkpoint older, and
    the problems of the failed ones."""
    attempts = rows.select("group_key", "status", "retry", "source_metadata_uri", "problem").collect()
    verified_now = [r["group_key"] for r in attempts if r["status"] == DrCopyStatus.VERIFIED.value]
    failed = [r for r in attempts if r["status"] == DrCopyStatus.FAILED.value]
    retry = sorted({r["group_key"] for r in failed if r["retry"]})
    problems = [(r["group_key"], f"{r['source_metadata_uri']}: {r['problem']}")
                for r in sorted(failed, key=lambda r: r["source_metadata_uri"])[:_PROBLEMS_SHOWN]]
    return {"verified_groups": verified_now, "retry_groups": retry, "problems": problems}

"""Nightly Flink checkpoint-storage maintenance: index -> chains -> validate -> gc | compact -> maintain_warehouse -> report.

Thin by design: each task submits one entry point from spark_jobs/ through
StatekeeperSparkSubmitOperator; the logic lives in include/statekeeper. Each task's id, entry point
and exit-code contract (which failures are retried) come from statekeeper.registry.
"""
from __future__ import annotations

from datetime import datetime, timezone

from airflow.sdk import DAG, Param
from statekeeper.defaults import COMPACT_MAX_METADATA_SIZE_TEXT as MAX_METADATA_SIZE
from statekeeper.defaults import GC_GRACE_TEXT as GRACE
from statekeeper.defaults import WAREHOUSE_RETENTION_TEXT as RETENTION
from statekeeper.metrics.names import Scope
from statekeeper.registry import CHAINS, COMPACT, GC, INDEX, MAINTAIN, REPORT, VALIDATE
from statekeeper_airflow import dag_params as p
from statekeeper_airflow.assets import VALIDATION_JOBS
from statekeeper_airflow.dag_defaults import DEFAULT_ARGS, SPARK_SUBMIT
from statekeeper_airflow.operators import RunOutcomeOperator, StatekeeperSparkSubmitOperator
from statekeeper_airflow.run_driver import StartRunDriverOperator, StopRunDriverOperator


DAG_DOC = f"""
### Flink checkpoint-storage maintenance

Runs Statekeeper's Spark jobs against the checkpoint and savepoint **roots**, writing Delta tables
to the **warehouse**.

| step | reads | writes |
|---|---|---|
| `index` | every object and `_metadata` under the roots (incremental: unchanged `_metadata` are not re-parsed) | `files`, `snapshots`, `references`, `inline_state`, `index_runs` |
| `chains` | the index tables | `dependencies` (what each snapshot uses, across jobs and savepoints), `pins` (who keeps each directory alive), `chains_runs` |
| `validate` | the index and chains tables; `stat` of referenced files outside the indexed roots | `validation_results`, `validation_jobs`, `validation_runs`, a Great Expectations report and Data Docs under `<warehouse>/_reports/validation/` |
| `gc` | the index and chains tables (refused when the newest index run finished before this DAG run started) | `gc_runs`, `gc_actions` (the plan and each file's outcome); in `delete` mode it deletes the planned files |

**Garbage collection** (`gc`, see docs/gc.md) plans by default: a dry run that writes the plan to
`gc_actions` and deletes nothing. It runs only when `validate` succeeded (the default trigger rule,
`all_success`): a run whose newest checkpoint does not restore never deletes anything. Scheduled and
backfill runs take the mode and the grace period from the Variables `statekeeper_gc_mode` (`plan`
unless set to `delete`) and `statekeeper_gc_older_than` (default `{GRACE}`); manual runs take them from
the form (`gc_mode`, `older_than`; an empty grace period falls back to the Variable, then `{GRACE}`).
The retention policy (`retain_last`, `inactive_after`/`inactive_retain`,
`expire_savepoints_older_than`) and `max_deletes_per_second` are form parameters; scheduled runs use
their defaults, which expire nothing by policy. To **execute a reviewed plan**, trigger a manual run
with `gc_execute_plan` set to the dry run's run id (from `gc_runs`): `gc` then deletes that plan's
files instead of planning anew, and the mode is ignored. `gc` exits 1, not retried, when a fail-closed rule
blocked it (nothing deleted; the log says what to do) or some deletes failed (`gc_actions` names
them; the next run retries them); an internal failure (3) is retried and resumes.

**Compaction** (`compact`, see docs/compaction.md) is off unless enabled: scheduled runs follow the
Variable `statekeeper_compact_enabled` (`false` unless set to `true`), manual runs the form's
`compact`. It runs after a successful `validate`, beside `gc`, and moves inline state out of every
`_metadata` larger than `compact_max_metadata_size` (default `{MAX_METADATA_SIZE}`) into a new
`<job dir>/compacted/chk-N/` snapshot directory, verified before its `_metadata` is written; the
source is never modified. A manual run can name one snapshot (`compact_snapshot`), plan only
(`compact_dry_run`), or replace the `_metadata` of a stopped job in place (`compact_in_place`).

**Warehouse maintenance** (`maintain_warehouse`, see docs/tables.md) compacts Statekeeper's own Delta
tables' small files and vacuums versions older than the Variable `statekeeper_warehouse_retention`
(default `{RETENTION}`; refused when a job still reads an older version), recorded in `maintenance_runs`. Scheduled runs do it on Sundays, after `gc` and `compact`,
unless one of them (or `validate` before them) failed; a manual run when the form's
`maintain_warehouse` is set. Both steps show as
skipped when off.

**Report** (`report`, see docs/reports.md) runs last, after every other task whatever their outcome
(trigger rule `all_done`): one self-contained HTML page of where the storage goes, which jobs keep
which other jobs' files alive, whether every job's newest checkpoint restores, `_metadata` bloat and
the GC, DR and compaction outcomes, under `<warehouse>/_reports/runs/<run>/`. The Airflow UI shows the
latest one under **Browse > Statekeeper**. `run_outcome` fails the run when any task before it failed
(and is skipped otherwise), so a successful report never makes a failed run look successful.

**Metrics** (see docs/metrics.md): after its job, `report` pushes the run's figures (restorability and
storage per job, each step's newest run, GC's outcome, the index's age) to a Prometheus Pushgateway, grouped
by DAG and warehouse, when the form's `metrics_conn_id` or the Variable `statekeeper_metrics_conn_id` names
one (an `http` connection), and through OpenTelemetry when Airflow's `[metrics] otel_on` is set. A push that
fails is one line in the log; the run's outcome stays its own. The alerting rules
(`monitoring/statekeeper.rules.yml`) compare with the thresholds the run pushes (`alert_*`, Variables
`statekeeper_alert_*`).

**Spark driver.** On a local master the run starts one Spark driver (`spark_driver`, a setup task) and
every step runs its job in it instead of a spark-submit of its own: the JVM starts once per run and
later steps find it warm. `stop_spark_driver` (teardown) stops it. A step whose Spark settings differ,
or that finds no driver, submits its own spark-submit; neither task ever fails the run. The first run's
driver also writes the class-data-sharing archive of every step's classes at its exit, which every later
local driver maps (statekeeper.launch.jvm_startup).

**Failures.** `validate` fails the run, without retries, when a job's newest retained checkpoint
would not restore; its log names the job, the snapshot, the failing checks and the latest
checkpoint that does restore. Configuration errors also fail without retries; internal failures
and a partial index (some job directories could not be listed) are retried with back-off. Each task's XCom holds its job's result (counts, status, table versions).

**Asset.** A successful `validate` publishes the asset `statekeeper_validation_jobs` (the
`validation_jobs` table), which schedules the `checkpoint_dr_copy` DAG. A failed `validate` publishes
nothing, so no DR copy follows a run whose newest checkpoint does not restore.

**Manual runs** take the form's parameters; empty values fall back to the Airflow Variables
`statekeeper_roots` and `statekeeper_warehouse` (what scheduled runs use). **Backfills**
(`airflow backfill create --dag-id checkpoint_maintenance --from-date ... --to-date ...`) record each
run's data interval in `index_runs`. Only one run at a time (`max_active_runs=1`): two maintenance
runs never race on one warehouse. Spark submissions share the `statekeeper_spark` pool.
"""

ROOTS = "{{ (params.roots | join(',')) if params.roots else var.value.statekeeper_roots }}"
WAREHOUSE_AND_RUN = ["--warehouse", p.form_or_variable("warehouse", "statekeeper_warehouse"), *p.RUN_ID]
INDEX_ARGS = [
    "--roots", ROOTS,
    *WAREHOUSE_AND_RUN,
    "--job-filter", "{{ params.job_filter }}",
    p.flag_arg("allow-empty-root", "params.allow_empty_roots"),
    *p.DATA_INTERVAL,
]

# gc: scheduled and backfill runs follow the Variables (a deployment opts in to deleting once, there);
# only a manual run takes the form's mode, grace period and plan to execute.
GC_MODE = ("{{ '--execute=' ~ params.gc_execute_plan if " + p.MANUAL + " and params.gc_execute_plan else '--mode=' ~ "
           + p.manual_or_variable("gc_mode", "statekeeper_gc_mode", "plan") + " | trim }}")
GC_ARGS = [
    *WAREHOUSE_AND_RUN,
    p.INDEX_NOT_BEFORE,
    GC_MODE,
    p.gc_older_than_arg("statekeeper_gc_older_than", param="older_than"),
    p.optional("retain-last", "retain_last"),
    p.optional("inactive-after", "inactive_after"),
    p.optional("inactive-retain", "inactive_retain"),
    p.optional("expire-savepoints-older-than", "expire_savepoints_older_than"),
    p.optional("max-deletes-per-second", "max_deletes_per_second"),
    # Ownerless job directories (docs/gc.md "Which roots a GC run must be given"): manual runs only, so
    # no schedule ever declares its roots complete by default.
    p.flag_arg("roots-complete", p.MANUAL + " and params.gc_roots_complete"),
    p.optional("ownerless-older-than", "gc_ownerless_older_than"),
]

COMPACT_ENABLED = ("{{ (params.compact if " + p.MANUAL + " else var.value.get('statekeeper_compact_enabled', '')) "
                   "| string | lower | trim in ('true', '1', 'yes', 'on') }}")
COMPACT_ARGS = [
    *WAREHOUSE_AND_RUN,
    "--max-metadata-size={{ params.compact_max_metadata_size or var.value.get('statekeeper_compact_max_metadata_size', "
    f"'') or '{MAX_METADATA_SIZE}' }}}}",
    "--snapshot={{ params.compact_snapshot if " + p.MANUAL + " else '' }}",
    p.flag_arg("dry-run", p.MANUAL + " and params.compact_dry_run"),
    p.flag_arg("in-place", p.MANUAL + " and params.compact_in_place"),
]
# Weekly on scheduled runs (the run that fires on a Sunday), on request on manual ones.
MAINTAIN_ENABLED = "{{ params.maintain_warehouse if " + p.MANUAL + " else (dag_run.run_after.weekday() == 6) }}"
MAINTAIN_ARGS = [
    *WAREHOUSE_AND_RUN,
    f"--warehouse-retention={{{{ var.value.get('statekeeper_warehouse_retention', '') or '{RETENTION}' }}}}",
]

SUBMIT = {**SPARK_SUBMIT, "storage_conn_id": "{{ params.storage_conn_id }}"}
# The run's figures, pushed by its last step (docs/metrics.md).
METRICS = p.metrics_push((Scope.MAINTENANCE, p.form_or_variable("warehouse", "statekeeper_warehouse"),
                          "{{ params.storage_conn_id }}"))

with DAG(
    dag_id="checkpoint_maintenance",
    description="Index Flink checkpoints and savepoints into Delta tables, compute reference chains, validate.",
    schedule="0 2 * * *",
    start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,
    doc_md=DAG_DOC,
    tags=["statekeeper", "flink"],
    default_args=DEFAULT_ARGS,
    params={
        "roots": p.uri_list(
            "Roots", "Checkpoint base directories (<root>/<job-id>/chk-N) or savepoint base directories, as file://, "
                     "s3://, oss://, gs:// or abfss:// URIs. Empty: the Variable statekeeper_roots (comma-separated)."),
        "job_filter": p.job_filter("job directories"),
        "allow_empty_roots": p.flag(
            "Allow empty S3 roots", "Index an s3:// root with no object under it (e.g. a savepoint prefix nobody "
                                    "wrote to yet) as empty. Off: such a root fails the index as a likely typo."),
        "warehouse": p.warehouse("Where the Delta tables live (a local path, file:// or s3:// prefix)."),
        "storage_conn_id": p.storage_connection("Storage connection", "The storage connection of the roots and the "
                                                "warehouse", "Empty for local disks and NFS mounts."),
        **p.spark(),
        "gc_mode": p.gc_mode(
            "GC mode", "plan: a dry run that writes the plan to gc_actions and deletes nothing. delete: plan and "
                       "delete. Manual runs only; scheduled runs use the Variable statekeeper_gc_mode (default plan)."),
        "gc_execute_plan": p.text(
            "GC: execute a reviewed plan", "The run id of a reviewed dry run (gc_runs): delete exactly its planned "
                                           "files instead of planning anew; the GC mode is then ignored. Empty: plan "
                                           "(or delete) as usual."),
        "older_than": p.text(
            "GC grace period", f"Never delete anything newer than this (e.g. 3d, 12h, 90m; under 1h is refused). "
                               f"Empty: the Variable statekeeper_gc_older_than, else {GRACE}."),
        "retain_last": Param(
            None, type=["null", "integer"], minimum=1, title="GC: retain last N checkpoints",
            description="Expire all but the newest N retained checkpoints of each job. Empty: expire nothing "
                        "by count.",
        ),
        "inactive_after": p.text(
            "GC: inactive after", "A job whose newest checkpoint is older than this (e.g. 30d) is inactive and keeps "
                                  "only its newest 'GC: inactive jobs keep' checkpoints. Empty: no job counts as "
                                  "inactive."),
        "inactive_retain": Param(
            1, type="integer", minimum=1, title="GC: inactive jobs keep",
            description="How many newest checkpoints an inactive job keeps (see 'GC: inactive after').",
        ),
        "expire_savepoints_older_than": p.text(
            "GC: expire savepoints older than", "Expire savepoints older than this (e.g. 90d). Empty: savepoints "
                                                "never expire."),
        "gc_roots_complete": p.flag(
            "GC: the roots are complete", "Declare that the roots are every root any job may restore from (all "
                                          "deployments, savepoint roots). Then files of job directories without any "
                                          "snapshot (ownerless: e.g. a job whose checkpoint a job in another root "
                                          "claimed) may be deleted. Off: they are held back and listed in the GC "
                                          "summary and report."),
        "gc_ownerless_older_than": p.text(
            "GC: collect ownerless directories older than", "Also collect ownerless job directories whose newest "
                                                             "object is older than this (e.g. 90d; must exceed the "
                                                             "grace period). Empty: never."),
        "max_deletes_per_second": Param(
            None, type=["null", "number"], exclusiveMinimum=0, title="GC: max deletes per second",
            description="Rate limit on deletions against the storage. Empty: unlimited.",
        ),
        "compact": p.flag(
            "Compact bloated _metadata", "Run the compaction step (manual runs; scheduled runs follow the Variable "
                                         "statekeeper_compact_enabled, default off)."),
        "compact_max_metadata_size": p.text(
            "Compaction: select _metadata larger than", "e.g. 64MiB, 512KiB. Empty: the Variable "
                                                        f"statekeeper_compact_max_metadata_size, else {MAX_METADATA_SIZE}."),
        "compact_snapshot": p.text(
            "Compaction: only this snapshot", "A snapshot directory or its _metadata URI (manual runs). Empty: select "
                                              "by size."),
        "compact_dry_run": p.flag(
            "Compaction: dry run", "Plan only: report what would move and the sizes after; write nothing."),
        "compact_in_place": p.flag(
            "Compaction: in place (stopped jobs only)", "Replace the source _metadata itself, keeping the original "
                                                        "beside it. Refused for a job that wrote anything in the last "
                                                        "hour. Off: a new <job dir>/compacted/chk-N/ directory."),
        "maintain_warehouse": p.flag(
            "Maintain the warehouse tables", "Compact the Delta tables' small files and vacuum old versions (manual "
                                             "runs; scheduled runs do it on Sundays)."),
        **p.metrics("index_age", "gc_age"),
    },
) as dag:
    index = StatekeeperSparkSubmitOperator(
        task_id=INDEX.name,
        job=INDEX.entry_point,
        job_args=INDEX_ARGS,
        # Exit 1 = some job directories could not be listed, often a transient storage error: the
        # registry retries it (INDEX.retried), so only exit 2 fails for good.
        doc_md="Lists every object under the roots and parses every `_metadata` (streaming, in Spark tasks), "
               "then commits `files`, `snapshots`, `references`, `inline_state` and an `index_runs` audit row.",
        **SUBMIT,
    )
    chains = StatekeeperSparkSubmitOperator(
        task_id=CHAINS.name,
        job=CHAINS.entry_point,
        job_args=WAREHOUSE_AND_RUN,
        doc_md="From the index tables: which directories (own job, other jobs, savepoints, outside the roots) "
               "every snapshot uses, with files and bytes, and its lineage; writes `dependencies` and `pins`.",
        **SUBMIT,
    )
    validate = StatekeeperSparkSubmitOperator(
        task_id=VALIDATE.name,
        job=VALIDATE.entry_point,
        job_args=[*WAREHOUSE_AND_RUN, "--roots", ROOTS],
        # Airflow records an event for the asset only when the task succeeds.
        outlets=[VALIDATION_JOBS],
        doc_md="Checks every snapshot (parses; referenced files exist and are long enough; relative handles "
               "resolve; cross-directory dependencies) and each job's newest retained checkpoint. Fails without "
               "retries when a newest retained checkpoint is not restorable. On success it publishes the asset "
               "`statekeeper_validation_jobs`, which schedules the DR copy DAG.",
        **SUBMIT,
    )
    gc = StatekeeperSparkSubmitOperator(
        task_id=GC.name,
        job=GC.entry_point,
        job_args=GC_ARGS,
        # After compact, never beside it: compaction writes new snapshots (`compacted/<dir>/_metadata`)
        # into the roots, and one written between GC's last re-list and its deletes would lose files
        # the plan calls garbage (issue 28). none_failed: a compaction that is off (skipped) does not
        # hold GC back; a failed validate or compact does (upstream_failed), as before. Exit 1
        # (blocked, or some deletes failed) is final (GC.retried).
        trigger_rule="none_failed",
        doc_md="Expires snapshots by the retention policy and plans the deletion of every file no remaining "
               "snapshot references and older than the grace period; writes `gc_runs` and `gc_actions`. "
               "Deletes only in `delete` mode (or when executing a reviewed plan). Runs only after a "
               "successful `validate`, and after `compact` (never beside it: compaction writes snapshots into "
               "the roots); a failed compaction holds it back, a disabled one does not. Exit 1 (blocked by a fail-closed rule, or some deletes failed) is "
               "not retried.",
        **SUBMIT,
    )
    compact = StatekeeperSparkSubmitOperator(
        task_id=COMPACT.name,
        job=COMPACT.entry_point,
        job_args=COMPACT_ARGS,
        enabled=COMPACT_ENABLED,
        skip_reason="enable it with the Variable statekeeper_compact_enabled=true (scheduled runs) or the form's "
                    "compact (manual runs)",
        doc_md="Moves inline state out of every `_metadata` larger than the threshold into a new "
               "`compacted/chk-N/` snapshot directory, verified before its `_metadata` is written; writes "
               "`compactions` and `compaction_runs`, and logs inline bytes per job and operator. Off unless "
               "enabled; runs only after a successful `validate`, before `gc`.",
        **SUBMIT,
    )
    maintain = StatekeeperSparkSubmitOperator(
        task_id=MAINTAIN.name,
        job=MAINTAIN.entry_point,
        job_args=MAINTAIN_ARGS,
        enabled=MAINTAIN_ENABLED,
        skip_reason="it runs on Sundays, or when the form's maintain_warehouse is set",
        # Not after a failure upstream: a run that went wrong leaves the warehouse as it is for a look,
        # and the run must end failed (a leaf that skips after a failure would make it look successful).
        # A skipped `compact` (off) does not hold it back.
        trigger_rule="none_failed_min_one_success",
        doc_md="Compacts the warehouse's Delta tables (small files) and vacuums versions older than the "
               "retention, never one a job still reads; writes `maintenance_runs`. Weekly.",
        **SUBMIT,
    )
    report = StatekeeperSparkSubmitOperator(
        task_id=REPORT.name,
        job=REPORT.entry_point,
        job_args=WAREHOUSE_AND_RUN,
        # After every step whatever happened: the report of a run whose validation failed is the one
        # people need. run_outcome keeps such a run failed.
        trigger_rule="all_done",
        doc_md="Writes the run's HTML report under `<warehouse>/_reports/runs/` (storage per job, lineage, "
               "restorability, `_metadata` bloat, GC/DR/compaction outcomes); Browse > Statekeeper shows it. "
               "Then pushes the run's figures to the Pushgateway, if one is configured (docs/metrics.md).",
        metrics=METRICS,
        **SUBMIT,
    )
    outcome = RunOutcomeOperator(task_id="run_outcome")
    driver = StartRunDriverOperator(
        task_id="spark_driver",
        doc_md="Starts the run's shared Spark driver (local masters): every step runs its job in it, warm.",
        **SUBMIT,
    )
    stop_driver = StopRunDriverOperator(task_id="stop_spark_driver", doc_md="Stops the run's shared Spark driver.")
    driver >> index
    report >> stop_driver.as_teardown(setups=driver)
    # compact before gc, never side by side: GC's re-list must see every snapshot compaction wrote.
    index >> chains >> validate >> compact >> gc >> maintain >> report
    [index, chains, validate, gc, compact, maintain, report] >> outcome

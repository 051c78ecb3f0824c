"""Disaster-recovery copy of Flink checkpoints: dr_copy -> target_index -> target_chains -> target_gc -> report.

Scheduled on the asset the maintenance DAG's `validate` publishes (the `validation_jobs` table), so a
copy starts from a freshly validated warehouse. Thin like the maintenance DAG: `dr_copy` submits
spark_jobs/copy_to_dr.py; retention at the target reuses the index, chains and gc jobs on a warehouse
of the DR store's own; `report` then rewrites the source warehouse's report, so the page shows this copy.
Task entry points and exit-code contracts come from statekeeper.registry.
"""
from __future__ import annotations

from datetime import datetime, timezone

from airflow.sdk import DAG, Param
from statekeeper.defaults import GC_GRACE_TEXT as GRACE
from statekeeper.metrics.names import Scope
from statekeeper.registry import CHAINS, DR, GC, INDEX, REPORT
from statekeeper_airflow import dag_params as p
from statekeeper_airflow.assets import VALIDATION_JOBS
from statekeeper_airflow.dag_defaults import DEFAULT_ARGS, SPARK_SUBMIT
from statekeeper_airflow.operators import RunOutcomeOperator, StatekeeperSparkSubmitOperator
from statekeeper_airflow.run_driver import StartRunDriverOperator, StopRunDriverOperator


DAG_DOC = f"""
### Flink checkpoints: disaster-recovery copy

Copies each job's **latest restorable checkpoint** (from the `validation_jobs` table of the
warehouse), the newest restorable savepoint per job (by default) and every file they reference
(their own, other jobs' `shared/` files, savepoints' files) to the **DR targets**, with each
`_metadata` rewritten so every absolute path points at the target. Files are copied and verified
first; a snapshot's `_metadata` is written last, only once everything it names is verified at the
target. The source is never modified; re-runs copy only what is missing. Then the DR store's own
retention runs on the copies.

| step | job | what it does |
|---|---|---|
| `dr_copy` | `copy_to_dr` | selects, copies, verifies; records `dr_runs` and `dr_copies` in the source warehouse. XCom: `target_roots`, `targets` (source root -> target root) |
| `target_index` | `index_checkpoints` | indexes the target roots (`target_roots` from `dr_copy`'s XCom) into the **DR warehouse** |
| `target_chains` | `compute_chains` | reference chains of the copies, in the DR warehouse |
| `target_gc` | `collect_garbage` | retention at the target: keeps the newest `keep` checkpoints of each job (`--retain-last`), plans (or deletes) what no kept copy references |
| `report` | `build_report` | rewrites the **source** warehouse's report (as the maintenance DAG's last task does), so its DR section and Browse > Statekeeper show this copy, failed snapshots included |

**When it runs.** Scheduled on the asset `statekeeper_validation_jobs`: Airflow records an event for
it only when the maintenance DAG's `validate` task **succeeds**. `validate` fails (exit 1) when some
job's newest retained checkpoint does not restore, and then no DR copy follows until a later
maintenance run validates cleanly; a manual trigger still works at any time (it copies each job's
latest *restorable* checkpoint, which may be older than its newest). The DAG is **paused when it is
first created** (it writes to another store and can delete there): unpause it to let the asset
schedule it. Runs of a paused DAG, manual ones included, stay queued. Only one run at a time
(`max_active_runs=1`); Spark submissions share the `statekeeper_spark` pool.

**Where to.** Scheduled runs read the Airflow Variables:
* `statekeeper_dr_targets`: one base URI below which every indexed root is mirrored by its last
  path segment, and/or `SOURCE_ROOT=TARGET_ROOT` pairs, comma-separated;
* `statekeeper_dr_allowed_targets`: the **allowlist**, comma-separated URI prefixes; every target
  must lie below one of them. It is always the Variable, never a form value: the form may choose
  targets, the deployment decides where a DR copy may write. Unset, the copy refuses to start;
* `statekeeper_warehouse` (the source warehouse, as in the maintenance DAG) and
  `statekeeper_dr_warehouse` (the DR warehouse, for the retention steps; it must not lie inside a
  target root);
* `statekeeper_dr_storage_conn_id`: the DR store's connection ({p.CONNECTION_TYPES}; its settings
  reach `copy_to_dr` as `STATEKEEPER_DR_*` variables, never on a command line). Empty: the targets are
  reached with the source's settings (`storage_conn_id`), and so are the retention steps.

A scheduled run follows the Variable `statekeeper_warehouse`, whichever warehouse the maintenance run
that published the event used (a manual maintenance run on another warehouse also publishes it).

**Retention at the target.** `target_gc` keeps the newest `keep` checkpoints of each job
(scheduled: Variable `statekeeper_dr_keep`, default 3; manual: the form), never expires savepoints,
never deletes anything newer than the grace period (Variable `statekeeper_dr_gc_older_than`, default
{GRACE}) and only **plans** (a dry run written to the DR warehouse's `gc_actions`) unless the mode is
`delete` (scheduled: Variable `statekeeper_dr_gc_mode`, default `plan`; manual: the form).

**Failures.** The retention steps run only when `dr_copy` succeeded (trigger rule `all_success`): a
copy run with any failed snapshot (exit 1: `dr_copies` names the snapshot and the object; the other
snapshots were copied, and the next run copies only what is missing) never leads to a deletion at
the target. `report` runs whatever happened before it (trigger rule `all_done`: the page of a copy with
a failed snapshot is the one people need), and `run_outcome` keeps such a run failed. Exit 1 and
configuration errors (exit 2: a target outside the allowlist or inside a source root, a `--snapshot`
that is not indexed or does not restore, missing settings) fail without retries; internal failures (3)
are retried with back-off, and a retry skips the files already copied.
`target_index` also fails without XCom from `dr_copy` (a driver in cluster deploy mode returns none).

**Spark driver.** On a local master the steps run in one Spark driver, started by `spark_driver` (a
setup task, with the retention steps' settings) and stopped by `stop_spark_driver`. `dr_copy` and
`report` (which use the source's settings) run in it too unless the DR store has a connection of its own
(`dr_storage_conn_id`); then each submits its own spark-submit. Neither task ever fails the run: without
the driver each step submits its own.

**Metrics** (see docs/metrics.md): after its job, `report` pushes the run's figures to a Prometheus
Pushgateway when the form's `metrics_conn_id` or the Variable `statekeeper_metrics_conn_id` names one: each
job's recovery point and last verified copy and the copy run's outcome (from the source warehouse), and the
DR store's own index and GC runs and storage (from the DR warehouse), one group per warehouse. A push that
fails is one line in the log; the run's outcome stays its own.

**Trigger from the UI.** *Trigger* opens the form: leave *Targets* empty to use
`statekeeper_dr_targets`, or give target bases / `SOURCE=TARGET` pairs (still checked against the
allowlist); *Snapshots* copies only the listed snapshots (directory or `_metadata` URIs) instead of
every job's latest restorable checkpoint; *Mode* `verify` re-checks the newest copies at the target
(an object changed since it was verified fails the copy: re-run the copy, which replaces it) and copies
nothing. *Verification* `size` or `checksum`: an object already at the target is never trusted by its
size; it is skipped only on proof that it is the source's bytes (docs/dr-copy.md, "Identity"). Empty warehouse and connection fields fall back to the Variables.
"""

# The target and warehouses: a form value, else the Variable (what scheduled runs use).
WAREHOUSE = p.form_or_variable("warehouse", "statekeeper_warehouse")
DR_WAREHOUSE = p.form_or_variable("dr_warehouse", "statekeeper_dr_warehouse")

DR_ARGS = [
    "--warehouse", WAREHOUSE,
    *p.RUN_ID,
    p.DR_TARGETS,
    p.DR_ALLOWED_TARGETS,
    "--mode={{ params.mode }}",
    "--savepoints={{ params.savepoints }}",
    # One token whatever the list holds: an empty value means "no --snapshot given".
    "--snapshot={{ params.snapshots | join(',') if params.snapshots else '' }}",
    "--job-filter={{ params.job_filter }}",
    "--verify={{ params.verify }}",
    p.flag_arg("include-external", "params.include_external"),
]

# The roots dr_copy wrote to, from its result. No result (a cluster-mode driver returns none): an
# empty value, which the index refuses (exit 2) rather than indexing anything else.
TARGET_ROOTS = ("{{ ((ti.xcom_pull(task_ids='" + DR.name + "') or {}).get('target_roots') or []) "
                "| join(',') }}")
TARGET_INDEX_ARGS = [
    "--roots", TARGET_ROOTS,
    "--warehouse", DR_WAREHOUSE,
    *p.RUN_ID,
    # A target root the copy has not written to yet (e.g. a savepoint root with no savepoint) is
    # empty, not a typo: dr_copy derived it from the allowlisted targets.
    "--allow-empty-root=true",
    *p.DATA_INTERVAL,
]

# target_gc: scheduled runs follow the Variables; only a manual run takes the form's keep and mode.
KEEP = ("--retain-last={{ (params.keep if " + p.MANUAL + " else "
        "(var.value.get('statekeeper_dr_keep', '') or 3)) | string | trim }}")
TARGET_GC_ARGS = [
    "--warehouse", DR_WAREHOUSE,
    *p.RUN_ID,
    # target_index of this run finished after the run started: an older newest index run is stale.
    p.INDEX_NOT_BEFORE,
    p.gc_mode_arg("statekeeper_dr_gc_mode"),
    p.gc_older_than_arg("statekeeper_dr_gc_older_than"),
    KEEP,
]

# The retention steps read and write the DR store only: its connection, else the source's (as dr_copy).
TARGET_SUBMIT = {**SPARK_SUBMIT, "storage_conn_id": "{{ " + p.DR_CONN + " or params.storage_conn_id }}"}
# The run's figures, pushed by its last step (docs/metrics.md): the copies, from the source warehouse's dr_runs and
# dr_copies; the retention at the target, from the DR warehouse's own tables.
METRICS = p.metrics_push((Scope.DR_COPY, WAREHOUSE, "{{ params.storage_conn_id }}"),
                         (Scope.MAINTENANCE, DR_WAREHOUSE, TARGET_SUBMIT["storage_conn_id"]))

with DAG(
    dag_id="checkpoint_dr_copy",
    description="Copy each job's latest restorable Flink checkpoint to disaster-recovery roots, then apply "
                "retention there.",
    schedule=[VALIDATION_JOBS],
    start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,
    # It writes to another store and its retention can delete there: a deployment turns it on.
    is_paused_upon_creation=True,
    doc_md=DAG_DOC,
    tags=["statekeeper", "flink", "dr"],
    default_args=DEFAULT_ARGS,
    params={
        "targets": p.uri_list(
            "Targets", "A target base URI (every indexed root is mirrored below it by its path below the roots' "
                       "common directory) and/or SOURCE_ROOT=TARGET_ROOT pairs. Each must lie below a prefix of the "
                       "Variable statekeeper_dr_allowed_targets. Empty: the Variable statekeeper_dr_targets."),
        "snapshots": p.uri_list(
            "Snapshots", "Copy only these snapshots (a chk-N or savepoint directory, or its _metadata URI), instead "
                         "of every job's latest restorable checkpoint. Empty: the usual selection."),
        "job_filter": p.job_filter("job (and savepoint) directories"),
        "savepoints": p.choice(
            "newest", ["none", "newest", "all"], "Savepoints",
            "Savepoints to copy besides each job's latest restorable checkpoint: none, the newest restorable one per "
            "job, or all restorable ones."),
        "verify": p.choice(
            "size", ["size", "checksum"], "Verification",
            "Either way an object already at the target is skipped only when it is proven to be the source's bytes "
            "(the version this tool recorded when it wrote or verified it, or an equal content hash: S3 MD5 ETag, "
            "GCS CRC32C, SHA-256); anything else is copied again. size: what this run wrote exists at the target "
            "with the source's size. checksum: also compare a SHA-256 of the source with the target's bytes (reads "
            "both). With Mode verify: an object whose version changed since it was verified fails the copy (size "
            "mode), or is compared by SHA-256 (checksum mode)."),
        "mode": p.choice(
            "copy", ["copy", "verify"], "Mode",
            "copy: copy what is missing and verify. verify: re-verify the newest copies at the target, copy nothing."),
        "include_external": p.flag(
            "Include files outside the roots", "Also copy referenced files outside the indexed roots (below "
                                               "<target>/_external/). Off: a snapshot that references one is not "
                                               "copied."),
        "keep": Param(
            3, type="integer", minimum=1, title="Keep at the target",
            description="Retention at the target: the newest N checkpoints of each job are kept. Manual runs only; "
                        "scheduled runs use the Variable statekeeper_dr_keep (default 3).",
        ),
        "gc_mode": p.gc_mode(
            "Retention mode at the target", "plan: a dry run that writes the plan to the DR warehouse's gc_actions "
                                            "and deletes nothing. delete: plan and delete at the target. Manual runs "
                                            "only; scheduled runs use the Variable statekeeper_dr_gc_mode (default "
                                            "plan)."),
        "warehouse": p.warehouse("The source warehouse (its validation_jobs table selects what to copy)."),
        "dr_warehouse": p.text(
            "DR warehouse", "Where the retention steps keep the DR store's index tables (not inside a target root). "
                            "Empty: the Variable statekeeper_dr_warehouse."),
        "storage_conn_id": p.storage_connection("Storage connection", "The source storage connection (source roots "
                                                "and warehouse)", "Empty for local disks and NFS mounts."),
        "dr_storage_conn_id": p.storage_connection("DR storage connection", "The DR store's connection (targets "
                                                   "and DR warehouse)", "Empty: the Variable "
                                                   "statekeeper_dr_storage_conn_id, else the storage connection's "
                                                   "settings."),
        **p.spark(),
        **p.metrics("dr_rpo"),
    },
) as dag:
    dr_copy = StatekeeperSparkSubmitOperator(
        task_id=DR.name,
        job=DR.entry_point,
        job_args=DR_ARGS,
        **p.DR_CONNECTIONS,
        # Exit 1 (some snapshot not copied) and 2 are final (DR.retried); 3 is retried and resumes.
        doc_md="Copies each job's latest restorable checkpoint (and savepoints by policy, or the given snapshots) "
               "with every file it references to the allowlisted targets, rewrites and writes each `_metadata` "
               "last, verifies. XCom: `target_roots` and `targets`. Exit 1 (some snapshot failed) is not retried.",
        **SPARK_SUBMIT,
    )
    target_index = StatekeeperSparkSubmitOperator(
        task_id="target_index",
        job=INDEX.entry_point,
        job_args=TARGET_INDEX_ARGS,
        # Default trigger rule (all_success): a failed copy run never leads to retention at the target.
        doc_md="Indexes the target roots `dr_copy` wrote to (its XCom `target_roots`) into the DR warehouse.",
        **TARGET_SUBMIT,
    )
    target_chains = StatekeeperSparkSubmitOperator(
        task_id="target_chains",
        job=CHAINS.entry_point,
        job_args=["--warehouse", DR_WAREHOUSE, *p.RUN_ID],
        doc_md="Reference chains of the copies (what each copied snapshot uses), in the DR warehouse.",
        **TARGET_SUBMIT,
    )
    target_gc = StatekeeperSparkSubmitOperator(
        task_id="target_gc",
        job=GC.entry_point,
        job_args=TARGET_GC_ARGS,
        doc_md="Retention at the target: keeps the newest `keep` checkpoints of each job and plans (or, in "
               "`delete` mode, deletes) the files no kept copy references, older than the grace period.",
        **TARGET_SUBMIT,
    )
    report = StatekeeperSparkSubmitOperator(
        task_id=REPORT.name,
        job=REPORT.entry_point,
        job_args=["--warehouse", WAREHOUSE, *p.RUN_ID],
        # The source warehouse, where dr_copy records dr_runs and dr_copies: the source's settings, as dr_copy's.
        storage_conn_id="{{ params.storage_conn_id }}",
        # Whatever happened before it: the page of a copy with a failed snapshot is the one people need.
        trigger_rule="all_done",
        doc_md="Rewrites the source warehouse's HTML report (as the maintenance DAG's `report` does) so its DR "
               "section and Browse > Statekeeper show this copy. Then pushes the run's figures to the Pushgateway, "
               "if one is configured (docs/metrics.md).",
        metrics=METRICS,
        **SPARK_SUBMIT,
    )
    outcome = RunOutcomeOperator(task_id="run_outcome")
    # Started with the retention steps' settings. dr_copy runs in it too when its own are the same (no separate
    # DR connection: the usual case, and local stores); with a DR connection of its own it submits its own
    # spark-submit, and the driver waits for the retention steps (or exits after its idle timeout, should
    # the copy run longer: they then submit their own).
    driver = StartRunDriverOperator(
        task_id="spark_driver",
        doc_md="Starts the run's shared Spark driver (local masters) with the retention steps' settings.",
        **TARGET_SUBMIT,
    )
    stop_driver = StopRunDriverOperator(task_id="stop_spark_driver", doc_md="Stops the run's shared Spark driver.")
    driver >> dr_copy >> target_index >> target_chains >> target_gc >> report
    report >> stop_driver.as_teardown(setups=driver)
    [dr_copy, target_index, target_chains, target_gc, report] >> outcome

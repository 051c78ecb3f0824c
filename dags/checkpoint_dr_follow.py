"""DR copies that trail running jobs: `copy_to_dr --mode follow` every five minutes.

Thin like the other DAGs: one task submits spark_jobs/copy_to_dr.py in follow mode
(statekeeper.replicate.follow), which needs no index, chains or validation run of its own. The targets,
the allowlist and the DR store's connection are the DR copy DAG's Variables, so both DAGs write the same
copies; retention at the target stays with the DR copy DAG.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow.sdk import DAG
from statekeeper.metrics.names import Scope
from statekeeper.registry import DR
from statekeeper_airflow import dag_params as p
from statekeeper_airflow.dag_defaults import DEFAULT_ARGS, SPARK_SUBMIT
from statekeeper_airflow.operators import StatekeeperSparkSubmitOperator

CADENCE = timedelta(minutes=5)

DAG_DOC = f"""
### Flink checkpoints: DR copies that follow running jobs

Every {int(CADENCE.total_seconds() // 60)} minutes, for each job directory of the roots the newest
index run covers: the newest checkpoint Flink **completed** (its `chk-N/_metadata` exists) since the
job's last verified DR copy, with every object it references (its own, other jobs' `shared/` after a
CLAIM restore, segments, channel state), copied to the DR targets, verified there, and its rewritten
`_metadata` written last, as the nightly DR copy does (`dr_copies.selected_by` = `follow`). It does not
wait for the maintenance DAG: it reads the checkpoint's `_metadata` with Statekeeper's codec instead
of a validation run, and it refuses, by name and without copying any of it, a checkpoint whose
`_metadata` does not parse, that names an object its directory does not hold (or holds shorter), or
that references a file outside every root. A checkpoint Flink subsumed during the round is noted;
the next round copies the newer one.

**Settings.** The DR copy DAG's Variables: `statekeeper_dr_targets`, the allowlist
`statekeeper_dr_allowed_targets` (always the Variable), `statekeeper_warehouse` (the source
warehouse: its newest index run names the roots, and `dr_copies` lives there) and
`statekeeper_dr_storage_conn_id`. Savepoints and retention at the target stay with the DR copy DAG.

**Metrics** (see docs/metrics.md): every round, whatever its exit, pushes each job's recovery point (the
RPO is its age), last verified copy and follow refusals in a row, and the round's outcome, to a Prometheus
Pushgateway when the form's `metrics_conn_id` or the Variable `statekeeper_metrics_conn_id` names one.

**Scheduling.** Paused when first created (it writes to another store). One run at a time and no
catch-up: a round that takes longer than the cadence delays the next one instead of piling up. A
failed round is not retried (the next round is the retry); exit 1 (a refused or failed checkpoint,
named in the task's log and in `dr_copies`) fails the run so that it shows.
"""

WAREHOUSE = p.form_or_variable("warehouse", "statekeeper_warehouse")
FOLLOW_ARGS = [
    "--warehouse", WAREHOUSE,
    *p.RUN_ID,
    p.DR_TARGETS,
    p.DR_ALLOWED_TARGETS,
    "--mode=follow",
    "--job-filter={{ params.job_filter }}",
    "--verify={{ params.verify }}",
]
# Every round's figures (docs/metrics.md): each job's recovery point and refusals in a row, the round's outcome.
METRICS = p.metrics_push((Scope.DR_FOLLOW, WAREHOUSE, "{{ params.storage_conn_id }}"))

with DAG(
    dag_id="checkpoint_dr_follow",
    description="Copy each running job's newest completed Flink checkpoint to the DR roots every few minutes.",
    schedule=CADENCE,
    start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=True,
    dagrun_timeout=timedelta(hours=1),
    doc_md=DAG_DOC,
    tags=["statekeeper", "flink", "dr"],
    default_args={**DEFAULT_ARGS, "retries": 0},
    params={
        "targets": p.uri_list(
            "Targets", "A target base URI and/or SOURCE_ROOT=TARGET_ROOT pairs, each below a prefix of the Variable "
                       "statekeeper_dr_allowed_targets. Empty: the Variable statekeeper_dr_targets."),
        "job_filter": p.job_filter("job directories"),
        "verify": p.choice(
            "size", ["size", "checksum"], "Verification",
            "size: what a round wrote exists at the target with the source's size; checksum: also compare SHA-256 "
            "of the source with the target's bytes. An object already at the target is skipped only on proof that "
            "it holds the source's bytes."),
        "warehouse": p.warehouse("The source warehouse: its newest index run names the roots; dr_copies is here."),
        "storage_conn_id": p.storage_connection("Storage connection", "The source storage connection",
                                                "Empty for local disks and NFS mounts."),
        "dr_storage_conn_id": p.storage_connection("DR storage connection", "The DR store's connection (targets)",
                                                   "Empty: the Variable statekeeper_dr_storage_conn_id, else the "
                                                   "storage connection's settings."),
        **p.spark(),
        **p.metrics("dr_rpo", "follow_refusals"),
    },
) as dag:
    StatekeeperSparkSubmitOperator(
        task_id="dr_follow",
        job=DR.entry_point,
        job_args=FOLLOW_ARGS,
        **p.DR_CONNECTIONS,
        doc_md="Copies each job's newest completed checkpoint since its last verified copy (copy_to_dr --mode "
               "follow), verifies it, writes its rewritten `_metadata` last. Exit 1: a checkpoint was refused or "
               "failed; `dr_copies` and the log name it. Then, whatever its exit, pushes the round's figures to the "
               "Pushgateway, if one is configured (docs/metrics.md).",
        metrics=METRICS,
        **SPARK_SUBMIT,
    )

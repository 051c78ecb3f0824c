"""Nightly Flink checkpoint-storage maintenance: index -> chains -> validate.

Thin by design: each task submits one entry point from spark_jobs/ through
StatekeeperSparkSubmitOperator; the logic lives in include/statekeeper. Each task's id, entry point
and exit-code contract (which failures are retried) come from statekeeper.jobs.registry.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow.sdk import DAG, Param
from statekeeper.jobs.registry import CHAINS, INDEX, VALIDATE
from statekeeper_airflow.operators import StatekeeperSparkSubmitOperator

DAG_DOC = """
### Flink checkpoint-storage maintenance

Runs Statekeeper's Spark jobs against the checkpoint and savepoint **roots**, writing Delta tables
to the **warehouse**.

| step | reads | writes |
|---|---|---|
| `index` | every object and `_metadata` under the roots (incremental: unchanged `_metadata` are not re-parsed) | `files`, `snapshots`, `references`, `inline_state`, `index_runs` |
| `chains` | the index tables | `dependencies` (what each snapshot uses, across jobs and savepoints), `pins` (who keeps each directory alive), `chains_runs` |
| `validate` | the index and chains tables; `stat` of referenced files outside the indexed roots | `validation_results`, `validation_jobs`, `validation_runs`, a Great Expectations report and Data Docs under `<warehouse>/_reports/validation/` |

**Failures.** `validate` fails the run, without retries, when a job's newest retained checkpoint
would not restore; its log names the job, the snapshot, the failing checks and the latest
checkpoint that does restore. Configuration errors also fail without retries; internal failures
and a partial index (some job directories could not be listed) are retried with back-off. Each task's XCom holds its job's result (counts, status, table versions).

**Manual runs** take the form's parameters; empty values fall back to the Airflow Variables
`statekeeper_roots` and `statekeeper_warehouse` (what scheduled runs use). **Backfills**
(`airflow backfill create --dag-id checkpoint_maintenance --from-date ... --to-date ...`) record each
run's data interval in `index_runs`. Only one run at a time (`max_active_runs=1`): two maintenance
runs never race on one warehouse. Spark submissions share the `statekeeper_spark` pool.
"""

ROOTS = "{{ (params.roots | join(',')) if params.roots else var.value.statekeeper_roots }}"
WAREHOUSE_AND_RUN = [
    "--warehouse", "{{ params.warehouse or var.value.statekeeper_warehouse }}",
    "--run-id", "{{ run_id }}",
]
INDEX_ARGS = [
    "--roots", ROOTS,
    *WAREHOUSE_AND_RUN,
    "--job-filter", "{{ params.job_filter }}",
    "--allow-empty-root={{ 'true' if params.allow_empty_roots else 'false' }}",
    # Manual runs triggered without a logical date have no data interval (the names are undefined).
    "--data-interval-start", "{{ data_interval_start | ts if data_interval_start is defined and data_interval_start else '' }}",
    "--data-interval-end", "{{ data_interval_end | ts if data_interval_end is defined and data_interval_end else '' }}",
]

SUBMIT = {
    "spark_conn_id": "{{ params.spark_conn_id }}",
    "storage_conn_id": "{{ params.storage_conn_id }}",
    "spark_master": "{{ params.spark_master }}",
}

with DAG(
    dag_id="checkpoint_maintenance",
    description="Index Flink checkpoints and savepoints into Delta tables, compute reference chains, validate.",
    schedule="0 2 * * *",
    start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,
    doc_md=DAG_DOC,
    tags=["statekeeper", "flink"],
    default_args={
        "owner": "statekeeper",
        "retries": 2,
        "retry_delay": timedelta(minutes=2),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=30),
        "pool": "statekeeper_spark",
    },
    params={
        "roots": Param(
            [], type="array", items={"type": "string"},
            title="Roots",
            description="Checkpoint base directories (<root>/<job-id>/chk-N) or savepoint base directories, "
                        "as file:// or s3:// URIs. Empty: the Variable statekeeper_roots (comma-separated).",
        ),
        "job_filter": Param(
            "", type="string", title="Job filter",
            description="Only job directories whose name matches this glob (e.g. 'a1b2*'). Empty: all jobs.",
        ),
        "allow_empty_roots": Param(
            False, type="boolean", title="Allow empty S3 roots",
            description="Index an s3:// root with no object under it (e.g. a savepoint prefix nobody wrote to yet) "
                        "as empty. Off: such a root fails the index as a likely typo.",
        ),
        "warehouse": Param(
            "", type="string", title="Warehouse",
            description="Where the Delta tables live (a local path, file:// or s3:// prefix). "
                        "Empty: the Variable statekeeper_warehouse.",
        ),
        "storage_conn_id": Param(
            "", type="string", title="Storage connection",
            description="An 'aws' connection for s3:// roots or warehouse (e.g. statekeeper_s3_local). "
                        "Empty for local disks and NFS mounts.",
        ),
        "spark_conn_id": Param(
            "spark_local", type="string", title="Spark connection",
            description="The Spark connection whose master spark-submit uses.",
        ),
        "spark_master": Param(
            "", type="string", title="Spark master override",
            description="Overrides the connection's master for this run, e.g. local[2] or spark://host:7077.",
        ),
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
        doc_md="Checks every snapshot (parses; referenced files exist and are long enough; relative handles "
               "resolve; cross-directory dependencies) and each job's newest retained checkpoint. Fails without "
               "retries when a newest retained checkpoint is not restorable.",
        **SUBMIT,
    )
    index >> chains >> validate

"""What every Statekeeper DAG shares: task defaults, the Spark form fields and how tasks submit.

One place, so the maintenance and DR DAGs cannot drift apart in retries, pool or the meaning of a
form field they both show.
"""
from __future__ import annotations

from datetime import timedelta

from airflow.sdk import Param

DEFAULT_ARGS = {
    "owner": "statekeeper",
    "retries": 2,
    "retry_delay": timedelta(minutes=2),
    "retry_exponential_backoff": True,
    "max_retry_delay": timedelta(minutes=30),
    # Bounds concurrent spark-submits from every Statekeeper DAG (airflow_settings.yaml).
    "pool": "statekeeper_spark",
}

# The operator arguments that pick the cluster, from the form fields below.
SPARK_SUBMIT = {
    "spark_conn_id": "{{ params.spark_conn_id }}",
    "spark_master": "{{ params.spark_master }}",
}


def spark_params() -> dict[str, Param]:
    """The form fields that pick the cluster a run submits to."""
    return {
        "spark_conn_id": Param(
            "spark_local", type="string", title="Spark connection",
            description="The Spark connection whose master spark-submit uses.",
        ),
        "spark_master": Param(
            "", type="string", title="Spark master override",
            description="Overrides the connection's master for this run, e.g. local[2] or spark://host:7077.",
        ),
    }

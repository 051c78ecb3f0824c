"""What every Statekeeper DAG's tasks share: retries, pool, and how they submit to Spark.

One place, so the maintenance and DR DAGs cannot drift apart in retries or pool; the form fields and
argument templates they share are statekeeper_airflow.dag_params.
"""
from __future__ import annotations

from datetime import timedelta

DEFAULT_ARGS = {
    "owner": "statekeeper",
    "retries": 2,
    "retry_delay": timedelta(minutes=2),
    "retry_exponential_backoff": True,
    "max_retry_delay": timedelta(minutes=30),
    # Bounds concurrent spark-submits from every Statekeeper DAG (airflow_settings.yaml).
    "pool": "statekeeper_spark",
}

# The operator arguments that pick the cluster, from the form fields of dag_params.spark().
SPARK_SUBMIT = {
    "spark_conn_id": "{{ params.spark_conn_id }}",
    "spark_master": "{{ params.spark_master }}",
}

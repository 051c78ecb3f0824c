"""The Airflow Assets Statekeeper's DAGs publish and consume, each defined once.

VALIDATION_JOBS stands for the `validation_jobs` table (each job's newest and latest restorable
checkpoint) that the maintenance DAG's `validate` task rewrites on every successful run; the DR copy
DAG is scheduled on it, because that table is what copy_to_dr selects from.

Why this URI: the warehouse's location is not known when DAGs are parsed (it is the Variable
`statekeeper_warehouse`, or a manual run's form value), and reading a Variable at parse time would hit
the metadata database on every parse, so the asset cannot be named by the table's real file:// or
s3:// path. A real path would also tell Airflow's URI handlers for those schemes (file in core, s3 in
the Amazon provider) something that is not true for every run. The URI therefore uses a scheme of our
own with the `x-` prefix, which Airflow 3's asset URI check passes through verbatim (no scheme
normalizer is looked up, nothing is rewritten; only the scheme `airflow` is reserved); the URI
identifies the logical table, the event's run says which warehouse was validated.
"""
from __future__ import annotations

from airflow.sdk import Asset

VALIDATION_JOBS = Asset(
    name="statekeeper_validation_jobs",
    uri="x-statekeeper://warehouse/validation_jobs",
    group="statekeeper",
)

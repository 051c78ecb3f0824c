"""Airflow glue for Statekeeper: the operator that submits Statekeeper's Spark jobs.

Lives in plugins/ so DAG files stay declarative; everything that decides *what* a job does is in
include/statekeeper and spark_jobs/.
"""

"""Tests of the Airflow side: DAG, operator, settings loader, local Airflow (not named `airflow`, which
would shadow the real package)."""

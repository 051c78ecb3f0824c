"""For a person at a terminal, not for deployments: `make demo` (`demo`), the embedded Airflow of `make airflow-ui`
(`airflow_local`, `airflow_settings`), and a DAG run with one line per task (`dag_console`)."""

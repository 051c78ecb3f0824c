"""statekeeper.metrics: figures from the tables, the push, the OpenTelemetry export, the rules, the DAG runs."""

"""What every Statekeeper job shares: the registry (names, entry points, exit codes), the builder
base with its run context and audit path, and progress heartbeats.

`statekeeper.jobs.registry` imports only the standard library (the Airflow operator reads it);
`statekeeper.jobs.base` imports pyspark lazily, inside `execute()`.
"""

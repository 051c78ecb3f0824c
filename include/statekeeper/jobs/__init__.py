"""What every Statekeeper job shares: the builder base with its run context, pinned inputs and audit
path, the Result, what the action jobs select snapshots by, and progress heartbeats.

The registry of jobs (names, entry points, audit tables, exit codes) is `statekeeper.registry`, on the
ground floor. `statekeeper.jobs.base` imports pyspark lazily, inside `execute()`.
"""

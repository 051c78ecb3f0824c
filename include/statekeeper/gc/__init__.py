"""Garbage collection: expire retained snapshots by policy, then delete what nothing references.

    statekeeper.gc.options   the run's options (grace, retention policy, rate limits) and their checks
    statekeeper.gc.policy    which snapshots the retention policy expires (pure, per job directory)
    statekeeper.gc.plan      reachability and candidates over the pinned index cut (Spark)
    statekeeper.gc.guards    the fail-closed rules: what blocks any deletion
    statekeeper.gc.relist    `_metadata` written after the index, found and parsed just before deleting
    statekeeper.gc.deleter   delete one partition's planned files, each only while it is the planned version
                             (conditional batch deletes on the bulk engine; lstat + unlink on disks)
    statekeeper.gc.job       the `CollectGarbage` builder (`spark_jobs/collect_garbage.py`)

docs/gc.md describes the rules, the tables (`gc_runs`, `gc_actions`) and how to review a plan.
"""

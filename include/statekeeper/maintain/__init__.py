"""Warehouse maintenance as a job: compact, vacuum and checkpoint Statekeeper's own Delta tables.

    options.py   what a run is asked to do: the vacuum retention, a dry run
    job.py       the MaintainWarehouse builder and its Result (the `maintenance_runs` row)
    entry.py     its command line (`spark_jobs/maintain_warehouse.py`)

The table-level verbs and the retention floor are `statekeeper.tables.maintenance` (no Spark).
"""

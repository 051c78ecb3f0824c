"""Compaction: move inline state out of bloated `_metadata` files (spec §7, §9, §11.11).

    plan.py      pure: where the result goes, which payloads move, the new model
    verify.py    pure: the candidate against its source, handle by handle, payload by payload
    apply.py     storage side: write the files, the candidate, verify, install last (one snapshot)
    options.py   what a run may do; select.py / report.py / tasks.py / job.py: the Spark job
"""

"""Reports people look at: one self-contained HTML page per maintenance run (storage per job, lineage,
restorability, `_metadata` bloat, GC, DR and compaction outcomes), built from the warehouse's tables.

    statekeeper.report.store   where pages live in the warehouse and how to find them (no Spark)
"""

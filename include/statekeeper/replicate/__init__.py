"""Disaster-recovery copies: self-contained snapshots at another root, `_metadata` rewritten.

    options   what a run is asked to do (targets, allowlist, selection, verification)
    select    which snapshots to copy (Spark, from validation_jobs / validation_results)
    closure   every object a selected snapshot references, and where it goes at the target (Spark)
    relocate  a source `_metadata` rewritten for the target (pure, the codec)
    tasks     the Spark tasks: copy, verify, write `_metadata` last
    job       the CopyToDr builder, its Result and the dr_copies / dr_runs rows
"""

"""Integrity validation: "will my latest checkpoint actually restore?"

    statekeeper.validate.checks        pure: check names, severities, the per-file rule and messages
    statekeeper.validate.stat          executor-side stat of files outside the indexed roots
    statekeeper.validate.spark_checks  the checks as Spark DataFrame transformations
    statekeeper.validate.quality       the Great Expectations suite over the index tables
    statekeeper.validate.job           ValidateCheckpoints builder -> ValidationResult

Its tables are specified in statekeeper.tables.catalog.validation.
"""

"""Index logic: layout classification, per-directory listing and parsing, the index job builder.

Importing this package pulls in nothing heavy; the Spark-facing builder lives in
`statekeeper.index.job` and imports pyspark lazily.
"""

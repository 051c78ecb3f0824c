"""Index logic: per-directory listing and parsing, the index job builder (layout classification:
statekeeper.layout.classify).

Importing this package pulls in nothing heavy; the Spark-facing builder lives in
`statekeeper.index.job` and imports pyspark lazily.
"""

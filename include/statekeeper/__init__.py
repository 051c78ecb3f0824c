"""Statekeeper: maintenance for Apache Flink checkpoint storage.

Layers (side effects at the edges):
  statekeeper.format   - the `_metadata` codec (pure; no I/O beyond a byte stream it is handed)
  statekeeper.storage  - FileIO for file://, s3:// and oss:// (boto3), gs:// and abfss:// (the vendors' SDKs), no Spark or Airflow
  statekeeper.tables   - Delta table IO (delta-spark in jobs, delta-rs where no Spark runs), the table
                         catalog and the vocabulary of column values
  statekeeper.layout   - Flink's directory layout: classifying objects, locating a file's owner
  statekeeper.jobs     - what every job shares: registry, builder base, run context, Result
  statekeeper.index, .chains, .validate - one package per job, none importing another;
                         spark_jobs/ and dags/ are thin entry points.
"""

__version__ = "0.1.0"

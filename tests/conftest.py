"""Session-wide test infrastructure.

Each area of real infrastructure has its own plugin module, so they can evolve independently:
the real-Flink harness (fixtures written by real Flink, the oracle, the restore verifier), the
moto S3 server on loopback, the shared local SparkSession and a private Airflow home.
"""
pytest_plugins = [
    "tests.plugins.airflow",
    "tests.plugins.flink",
    "tests.plugins.s3",
    "tests.plugins.spark",
]

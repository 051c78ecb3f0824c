"""Session-wide test infrastructure.

Each area of real infrastructure has its own plugin module, so they can evolve independently:
the real-Flink harness (fixtures written by real Flink, the oracle, the restore verifier), the
S3 servers on loopback (SeaweedFS; moto as released), the GCS and Azure emulators, the shared local
SparkSession, a private Airflow home, and an Airflow API server with headless Chromium for the UI pages.

Tiers: a test is marked by the infrastructure its fixtures use (below), on top of any marker it
sets itself, and `unit` when it ends up with none of flink/s3/gcs/azure/spark/airflow/cluster/browser/slow.
So `pytest -m unit` (make test-unit) never needs a JVM, an S3 server, an emulator, Airflow or a browser, as
long as tests reach that infrastructure through the plugins' fixtures; tests that call tests.harness or
spark-submit directly must still say so with an explicit marker.
"""
import os

import pytest

pytest_plugins = [
    "tests.plugins.airflow",
    "tests.plugins.budget",
    "tests.plugins.browser",
    "tests.plugins.fault_proxy",
    "tests.plugins.flink",
    "tests.plugins.flink_s3",
    "tests.plugins.object_stores",
    "tests.plugins.prepared",
    "tests.plugins.prometheus",
    "tests.plugins.s3",
    "tests.plugins.seaweedfs",
    "tests.plugins.spark",
    "tests.plugins.spark_cluster",
]

# Marker -> the plugin fixtures that need it. `item.fixturenames` is the whole closure, so a test
# using e.g. `s3_bucket` also counts as using `seaweedfs`. A new fixture in tests/plugins/ that
# starts infrastructure belongs here too.
TIER_FIXTURES = {
    "spark": frozenset({"spark"}),                                          # tests/plugins/spark.py
    "s3": frozenset({"plain_moto_server", "s3_config", "s3_bucket", "s3_upload_tree",  # tests/plugins/s3.py
                     "slow_s3",                                                    # tests/plugins/fault_proxy.py
                     "seaweedfs", "second_seaweedfs", "flink_s3_store"}),  # tests/plugins/seaweedfs.py, flink_s3.py
    "gcs": frozenset({"gcs_emulator", "plain_gcs_emulator", "gcs_config", "gcs_bucket", "gcs_upload_tree"}),   # tests/plugins/object_stores.py
    "azure": frozenset({"azurite", "azure_config", "azure_container", "azure_upload_tree"}),  # (the same)
    "flink": frozenset({"flink_harness", "flink_fixture", "flink_oracle",   # tests/plugins/flink.py
                        "flink_s3_store",                                   # tests/plugins/flink_s3.py
                        "flink_store_for_airflow"}),                        # (a harness store, below)
    "airflow": frozenset({"airflow_home", "airflow_db", "flink_store_for_airflow",   # tests/plugins/airflow.py
                          "airflow_ui"}),                                        # tests/plugins/browser.py
    "browser": frozenset({"chromium_driver", "airflow_ui"}),               # tests/plugins/browser.py
    "cluster": frozenset({"spark_cluster"}),                                # tests/plugins/spark_cluster.py
    "prometheus": frozenset({"pushgateway", "prometheus"}),                 # tests/plugins/prometheus.py
}
NOT_UNIT = frozenset(TIER_FIXTURES) | {"slow"}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full-matrix", action="store_true", default=os.environ.get("STATEKEEPER_FULL_MATRIX") == "1",
                     help="also run the tests marked full_matrix (every harness Flink version where `make test` "
                          "runs the newest only, every kill point of the index crash test; also "
                          "STATEKEEPER_FULL_MATRIX=1)")


@pytest.hookimpl(tryfirst=True)   # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--full-matrix"):
        # Deselected, not skipped: `make test` lists what it runs; the nightly/release run adds them.
        matrix = [item for item in items if item.get_closest_marker("full_matrix")]
        if matrix:
            config.hook.pytest_deselected(items=matrix)
            items[:] = [item for item in items if not item.get_closest_marker("full_matrix")]
    for item in items:
        used = set(item.fixturenames)
        for marker, fixtures in TIER_FIXTURES.items():
            if used & fixtures and item.get_closest_marker(marker) is None:
                item.add_marker(marker)
        if not any(item.get_closest_marker(name) for name in NOT_UNIT):
            item.add_marker("unit")

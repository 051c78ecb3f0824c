"""The settings a step's session gets on a local master, and what it leaves to the deployment."""
from __future__ import annotations

from statekeeper.launch.entrypoint import local_master_settings


def test_a_local_master_gets_shuffles_sized_to_its_cores() -> None:
    assert local_master_settings({"spark.master": "local[2]"}, 2) == {"spark.sql.shuffle.partitions": "4"}
    assert local_master_settings({"spark.master": "local[*]"}, 8) == {"spark.sql.shuffle.partitions": "16"}


def test_what_the_deployment_set_is_kept() -> None:
    assert local_master_settings({"spark.master": "local[2]", "spark.sql.shuffle.partitions": "7"}, 2) == {}


def test_a_cluster_keeps_sparks_defaults() -> None:
    for master in ("spark://10.0.0.1:7077", "yarn", "k8s://https://api:6443", ""):
        assert local_master_settings({"spark.master": master}, 64) == {}
    assert local_master_settings({}, 2) == {}

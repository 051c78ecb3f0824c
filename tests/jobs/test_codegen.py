"""A run's driver interprets the code it evaluates outside tasks only on a store small enough for that to pay."""
from __future__ import annotations

from pathlib import Path

import pytest

from statekeeper.chains.job import ComputeChains
from statekeeper.launch.codegen import FACTORY_MODE, INTERPRETED, INTERPRETED_BELOW_OBJECTS, driver_interprets
from statekeeper.storage import StorageConfig
from statekeeper.tables import Warehouse
from statekeeper.tables.cut import latest_cut
from tests.index.support import run_index

LOCAL = {"spark.master": "local[2]"}


def test_a_small_store_is_interpreted_a_large_one_compiled() -> None:
    assert driver_interprets(LOCAL, 0) is True
    assert driver_interprets(LOCAL, INTERPRETED_BELOW_OBJECTS - 1) is True
    assert driver_interprets(LOCAL, INTERPRETED_BELOW_OBJECTS) is False
    assert driver_interprets(LOCAL, 1_000_000) is False


def test_a_run_that_reads_no_index_compiles() -> None:
    # its store's size is unknown; a shared session may still hold what the previous run chose
    assert driver_interprets(LOCAL, None) is False


def test_the_deployments_choice_and_a_cluster_are_left_alone() -> None:
    assert driver_interprets({**LOCAL, FACTORY_MODE: "FALLBACK"}, 5) is None
    assert driver_interprets({**LOCAL, FACTORY_MODE: INTERPRETED}, 10**7) is None
    for master in ("spark://10.0.0.1:7077", "yarn", "k8s://https://api:6443"):
        assert driver_interprets({"spark.master": master}, 5) is None


@pytest.mark.spark
def test_runs_set_the_session_by_the_size_their_index_run_listed(spark, tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    for name in ("job-a/shared/one", "job-a/shared/two", "job-a/taskowned/three"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"x")
    warehouse = Warehouse(str(tmp_path / "warehouse"))
    try:
        spark.conf.set(FACTORY_MODE, INTERPRETED)   # as a run over a small store left a shared session
        assert run_index(spark, [str(root)], warehouse).status == "succeeded"
        assert spark.conf.get(FACTORY_MODE) != INTERPRETED      # the index reads no cut: Spark's default
        cut = latest_cut(warehouse)
        assert cut is not None and cut.objects == 3
        ComputeChains(spark).warehouse(warehouse).storage(StorageConfig()).progress_interval(0).execute()
        assert spark.conf.get(FACTORY_MODE) == INTERPRETED
    finally:
        spark.conf.unset(FACTORY_MODE)

"""Smallest end-to-end check of the harness: one store, Flink's oracle, a restore."""
import pytest

pytestmark = pytest.mark.flink


def test_incremental_store_loads_and_restores(flink_harness):
    version = flink_harness.FLINK_VERSIONS[0]
    fixture = flink_harness.get_fixture(version, "incremental")
    files = fixture.metadata_files()
    assert len(files) == 3
    results = flink_harness.run_oracle(version, files)
    assert [r.get("error") for r in results] == [None, None, None]
    assert {r["metadata_version"] for r in results} == {flink_harness.metadata_version_for(version)}
    verdict = flink_harness.verify_restore(version, fixture.retained_checkpoints()[-1])
    assert verdict.ok, verdict.output

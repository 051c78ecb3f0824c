"""pytest plugin for the real-Flink harness (tests/harness).

* `flink_harness` (session): checks Java/javac and makes sure every version's Flink jars are
  downloaded and our Java sources compiled; returns the `tests.harness` module. It never skips:
  without Java or PyPI access the tests error loudly.
* `flink_version_scenarios()` / `flink_params()`: parametrization over (version, scenario).
* `flink_fixture(version, scenario)`: the cached store (read-only!).
* `flink_oracle(version, scenario)`: {metadata path: oracle dict} for that store, one JVM each.

Mark tests that use it with `@pytest.mark.flink`.
"""
from __future__ import annotations

import shutil

import pytest

import tests.harness as harness
from tests.harness.cache import prune_stale
from tests.harness.flink import HarnessSetupError, harness_classes


def flink_version_scenarios(versions: list[str] | None = None,
                            scenarios: list[str] | None = None) -> list[tuple[str, str]]:
    """Every supported (version, scenario) pair, optionally restricted."""
    pairs = []
    for version in versions or harness.FLINK_VERSIONS:
        for scenario in harness.scenarios_for(version):
            if scenarios is None or scenario in scenarios:
                pairs.append((version, scenario))
    return pairs


def flink_params(versions: list[str] | None = None, scenarios: list[str] | None = None) -> list:
    """`pytest.param(version, scenario, id="<version>-<scenario>")` for parametrize."""
    return [pytest.param(v, s, id=f"{v}-{s}") for v, s in flink_version_scenarios(versions, scenarios)]


def flink_dedicated_params(scenarios: list[str], versions: list[str] | None = None) -> list:
    """`flink_params` for dedicated scenarios (which `flink_params` leaves out): every version that supports
    each of `scenarios`."""
    return [pytest.param(v, s, id=f"{v}-{s}") for v in versions or harness.FLINK_VERSIONS for s in scenarios
            if harness.supports(v, s)]


def matrix_versions() -> list:
    """Flink versions to parametrize over where the version does not change what is under test: the
    restore proofs of GC, DR copy and compaction, whose version-dependent parts (the codec's reading and
    rewriting, the chains) are tested on every harness version by tests/format, tests/index and
    tests/chains. The newest version runs in `make test`; the others are marked `full_matrix` and run
    only with `--full-matrix` (or STATEKEEPER_FULL_MATRIX=1): the nightly or release run (tests/README.md)."""
    newest = harness.FLINK_VERSIONS[-1]
    return [pytest.param(v, id=v, marks=() if v == newest else pytest.mark.full_matrix)
            for v in harness.FLINK_VERSIONS]


@pytest.fixture(scope="session")
def flink_harness():
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            raise HarnessSetupError(f"{tool} not found on PATH: the real-Flink tests need a JDK 17")
    for version in harness.FLINK_VERSIONS:
        harness_classes(version)   # downloads Flink once per cache, compiles once per source hash
    prune_stale()                  # fixtures/classes of old source hashes, untouched for a day
    return harness


@pytest.fixture(scope="session")
def flink_fixture(flink_harness):
    """Callable (version, scenario) -> Fixture, cached per session (and on disk across sessions)."""
    cache: dict[tuple[str, str], harness.Fixture] = {}

    def get(version: str, scenario: str) -> harness.Fixture:
        key = (version, scenario)
        if key not in cache:
            cache[key] = flink_harness.get_fixture(version, scenario)
        return cache[key]

    return get


@pytest.fixture(scope="session")
def flink_oracle(flink_fixture):
    """Callable (version, scenario) -> {metadata path: oracle dict}, one oracle JVM per store."""
    cache: dict[tuple[str, str], dict] = {}

    def get(version: str, scenario: str) -> dict:
        key = (version, scenario)
        if key not in cache:
            fixture = flink_fixture(version, scenario)
            files = fixture.metadata_files()
            results = harness.run_oracle(version, files)
            cache[key] = {str(path): result for path, result in zip(files, results)}
        return cache[key]

    return get

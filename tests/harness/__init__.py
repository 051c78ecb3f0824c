"""Real-Flink test harness: stores written by real Flink, Flink's own `_metadata` reader, and a
restore verifier.

Public API (other parts of the test suite code against exactly this):

    FLINK_VERSIONS                  versions under test (env STATEKEEPER_FLINK_VERSIONS=1.20.3,2.0.2,...)
    SCENARIOS                       scenario names the generic per-scenario tests iterate over
    scenarios_for(version)          those a version supports (file_merging needs >= 1.20)
    DEDICATED_SCENARIOS             scenarios only their own tests use (odd_path, Flink 2.3+; forst, 2.0+;
                                    changelog; rotated_job_id; incremental_inline; recovery_checkpoints, 2.3+)
    supports(version, scenario)     whether get_fixture(version, scenario) can generate it
    metadata_version_for(version)   `_metadata` version that Flink writes (4, 5, 6)
    get_fixture(version, scenario)  cached store (generated once per generator hash); READ-ONLY
    generate_store(version, scenario, dest)   fresh store at `dest` for destructive tests
    run_oracle(version, paths)      Flink's own reading of `_metadata` files as dicts
    named_paths(reading)            every path one such reading names (files, managed dirs)
    verify_restore(version, snapshot_dir, scenario)   restore + state check -> VerifyResult
    start_job(version, checkpoint_root)   live job checkpointing in the background -> RunningJob
                                    (.job_dir, .stop() -> RunStats: completed, failed, newest_checkpoint)
    verify_restore_many(version, cases)   the same for many snapshots in one JVM -> [VerifyResult]

Fixtures are cached under `$STATEKEEPER_CACHE/fixtures/<version>/<scenario>-<hash>/` and hold
ABSOLUTE paths: never move, modify or delete anything in them; copy (or use generate_store).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from tests.harness import clustered, placed, recovering
from tests.harness.oracle import named_paths, run_oracle
from tests.harness import scenarios as _scenarios
from tests.harness.scenarios import DEDICATED_SCENARIOS, PLANS, SCENARIOS, metadata_version_for
from tests.harness.store import MANIFEST, cached_store
from tests.harness.store import generate as _generate
from tests.harness.running import RunningJob, RunStats, start_job
from tests.harness.s3_plugin import PluginChecksumError, S3Endpoint
from tests.harness.verify import VerifyCase, VerifyResult, verify_restore, verify_restore_many

DEFAULT_FLINK_VERSIONS = ("1.20.3", "2.0.2", "2.3.0")


def _versions_from_env() -> list[str]:
    raw = os.environ.get("STATEKEEPER_FLINK_VERSIONS", "").strip()
    if not raw:
        return list(DEFAULT_FLINK_VERSIONS)
    return [v.strip() for v in raw.split(",") if v.strip()]


FLINK_VERSIONS: list[str] = _versions_from_env()


def scenarios_for(version: str) -> list[str]:
    """Scenarios of `SCENARIOS` that Flink `version` supports (the generic tests' parametrization)."""
    return _scenarios.scenarios_for(version, dedicated=False)


def supports(version: str, scenario: str) -> bool:
    """Whether `scenario` (generic or dedicated) can be generated with Flink `version`."""
    return scenario in _scenarios.scenarios_for(version)


@dataclass(frozen=True)
class Fixture:
    """One generated store: `root/checkpoints/<job-id>/...`, `root/savepoints/...`, manifest."""
    version: str
    scenario: str
    root: Path
    manifest: dict

    def metadata_files(self) -> list[Path]:
        """Every `_metadata` under the store, sorted."""
        return sorted(p for p in self.root.rglob("_metadata") if p.is_file())

    def job(self, name: str) -> dict:
        """Manifest entry of the job with logical name `name` (A, B, B_legacy, C)."""
        for job in self.manifest["jobs"]:
            if job["name"] == name:
                return job
        raise KeyError(f"{self.scenario} has no job {name!r}")

    def retained_checkpoints(self, job: str | None = None) -> list[Path]:
        """Retained `chk-N` dirs (with `_metadata`), of one job or of all jobs, by id."""
        jobs = [self.job(job)] if job else self.manifest["jobs"]
        return [Path(d) for j in jobs for d in j["retained_checkpoints"]]

    def savepoint_dirs(self, format: str | None = None) -> list[Path]:
        return [Path(s["dir"]) for s in self.manifest["savepoints"] if format in (None, s["format"])]


def get_fixture(version: str, scenario: str) -> Fixture:
    """The cached store for (version, scenario); generated on first use. Do not modify it.

    For a plan with a `store_dir` (odd_path) the root is that subdirectory of the cache entry."""
    if PLANS[scenario].store_dir:
        root, manifest = placed.cached_store(version, scenario)
    elif PLANS[scenario].recovering:
        root, manifest = recovering.cached_store(version, scenario)
    elif PLANS[scenario].clustered:
        root, manifest = clustered.cached_store(version, scenario)
    else:
        root, manifest = cached_store(version, scenario)
    return Fixture(version=version, scenario=scenario, root=root, manifest=manifest)


def generate_store(version: str, scenario: str, dest: Path) -> Fixture:
    """A fresh, uncached store generated directly at `dest` (must be empty or absent); for a plan
    with a `store_dir` the store root is `dest / store_dir`."""
    dest = Path(dest).absolute()
    store_dir = PLANS[scenario].store_dir
    if store_dir:
        dest = dest / store_dir
        manifest = placed.generate(version, scenario, dest)
    elif PLANS[scenario].recovering:
        manifest = recovering.generate(version, scenario, dest)
    elif PLANS[scenario].clustered:
        manifest = clustered.generate(version, scenario, dest)
    else:
        manifest = _generate(version, scenario, dest)
    return Fixture(version=version, scenario=scenario, root=dest, manifest=manifest)


def load_fixture(root: Path) -> Fixture:
    """Fixture object for an existing store directory (its manifest.json)."""
    manifest = json.loads((Path(root) / MANIFEST).read_text())
    return Fixture(version=manifest["version"], scenario=manifest["scenario"], root=Path(root), manifest=manifest)


__all__ = [
    "DEDICATED_SCENARIOS", "FLINK_VERSIONS", "SCENARIOS", "Fixture", "RunStats", "RunningJob", "VerifyCase",
    "VerifyResult", "generate_store", "get_fixture", "load_fixture", "metadata_version_for", "named_paths",
    "PluginChecksumError", "S3Endpoint", "run_oracle", "scenarios_for", "start_job", "supports", "verify_restore", "verify_restore_many",
]

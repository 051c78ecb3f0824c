"""Stores that real Flink writes straight into an S3 server (Flink's own S3 plugin, s3_plugin.py).

The same scenario plans as the local fixture stores (scenarios.py), run by `S3Generate` with `s3://` checkpoint
and savepoint roots: every object, its key, its ETag and the order of its writes and deletes are Flink's, and every
path inside a `_metadata` is the `s3://` URI Flink wrote (no rewriting, unlike tests.chains.support.relocate_store).
An S3 server's data does not outlive its test session (tests/plugins/seaweedfs.py), so these stores are generated
once per session (tests/plugins/flink_s3.py), never cached; plans that plant leftovers by hand are refused.

The manifest has the local stores' keys (harness README, "Store layout and manifest") with URIs for paths.
"""
from __future__ import annotations

import json
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from statekeeper.storage.base import FileIO
from tests.harness import scenarios
from tests.harness.runner import HarnessRunError, run_java, tail
from tests.harness.s3_plugin import S3Endpoint

_CHK_METADATA = re.compile(r"/chk-(\d+)/_metadata$")


@dataclass(frozen=True)
class S3Store:
    version: str
    scenario: str
    root: str                 # s3://bucket/prefix: checkpoints/ and savepoints/ below it
    manifest: dict

    @property
    def roots(self) -> list[str]:
        """The checkpoint and the savepoint root (what the index is given)."""
        return [self.manifest["checkpoint_root"], self.manifest["savepoint_root"]]

    def job(self, name: str) -> dict:
        for job in self.manifest["jobs"]:
            if job["name"] == name:
                return job
        raise KeyError(f"{self.scenario} on S3 has no job {name!r}")

    def retained_checkpoints(self, job: str | None = None) -> list[str]:
        jobs = [self.job(job)] if job else self.manifest["jobs"]
        return [d for j in jobs for d in j["retained_checkpoints"]]

    def savepoint_dirs(self, format: str | None = None) -> list[str]:
        return [s["dir"] for s in self.manifest["savepoints"] if format is None or s["format"] == format]


def generate_s3_store(version: str, scenario: str, root: str, s3: S3Endpoint, fileio: FileIO,
                      attempts: int = 2) -> S3Store:
    """Run `scenario` with Flink `version`, checkpointing into `root` (an empty `s3://` prefix) on the server of
    `s3`; `fileio` (the same server) reads back what Flink wrote for the manifest. One retry from scratch, as
    store.generate does, for a run that timed out on a loaded machine."""
    plan = scenarios.PLANS[scenario]
    if plan.leftovers or plan.store_dir or plan.clustered or plan.recovering:
        raise ValueError(f"{scenario}: only plain Generate plans are written to S3 (no planted leftovers, store_dir, "
                         "clustered or recovering plans)")
    root = root.rstrip("/")
    last: HarnessRunError | None = None
    for attempt in range(1, attempts + 1):
        leftover = [i.uri for i in fileio.list(root)]
        if leftover:
            if attempt == 1:
                raise FileExistsError(f"refusing to generate into non-empty {root}")
            fileio.delete_many(leftover)
        try:
            return _generate_once(version, plan, root, s3, fileio)
        except HarnessRunError as exc:
            last = exc
            print(f"[harness] generating {version}/{scenario} on S3 failed (attempt {attempt}/{attempts}):\n{exc}",
                  file=sys.stderr)
    assert last is not None
    raise last


def _generate_once(version: str, plan: scenarios.ScenarioPlan, root: str, s3: S3Endpoint,
                   fileio: FileIO) -> S3Store:
    checkpoints, savepoints = f"{root}/checkpoints", f"{root}/savepoints"
    with tempfile.TemporaryDirectory(prefix="statekeeper-s3gen-") as work:
        plan_file, result_file = Path(work) / "plan.properties", Path(work) / "result.jsonl"
        plan_file.write_text(scenarios.properties(plan, checkpoints, savepoints))
        run = run_java(version, "S3Generate", [str(plan_file), str(result_file)], timeout=120 + 90 * len(plan.jobs),
                       env=s3.environment(version))
        results = [json.loads(line) for line in result_file.read_text().splitlines()] \
            if result_file.exists() else []
    if run.returncode != 0 or len(results) != len(plan.jobs):
        raise HarnessRunError(f"Flink {version} S3Generate for {plan.name} exited {run.returncode} after "
                              f"{len(results)}/{len(plan.jobs)} jobs:\n{tail(run.output)}")
    by_name = {r["name"]: r for r in results}
    metadata = sorted(i.uri for i in fileio.list(checkpoints) if i.uri.endswith("/_metadata"))
    jobs, savepoint_rows = [], []
    for job in plan.jobs:
        r = by_name[job.name]
        spec = job.spec()
        retained = sorted((m[: -len("/_metadata")] for m in metadata if m.startswith(r["job_dir"] + "/")
                           and _CHK_METADATA.search(m)), key=lambda d: int(d.rsplit("-", 1)[1]))
        if not retained:
            raise HarnessRunError(f"job {job.name}: no checkpoint under {r['job_dir']}")
        jobs.append({
            "name": job.name, "job_id": r["job_id"], "job_dir": r["job_dir"], "backend": spec["backend"],
            "incremental": bool(spec["incremental"]) and spec["backend"] == "rocksdb",
            "parallelism": spec["parallelism"], "config": spec, "restored_from": r["restored_from"],
            "restored_from_job": job.restore_from, "claim_mode": r["claim_mode"],
            "completed_checkpoints": r["completed_checkpoints"], "retained_checkpoints": retained,
            "savepoints": [s["path"].rstrip("/") for s in r["savepoints"]],
        })
        savepoint_rows += [{"dir": s["path"].rstrip("/"), "format": s["format"], "job": job.name}
                           for s in r["savepoints"]]
    manifest = {"version": version, "scenario": plan.name, "metadata_version": scenarios.metadata_version_for(version),
                "root": root, "checkpoint_root": checkpoints, "savepoint_root": savepoints, "jobs": jobs,
                "savepoints": savepoint_rows, "failed_checkpoint_dirs": [], "planted_failed_checkpoints": [],
                "orphan_files": []}
    return S3Store(version, plan.name, root, manifest)

"""Fixture stores: generate a scenario with real Flink at its final location, write the manifest.

Flink writes ABSOLUTE paths into `_metadata`, so a store must be generated where it will be read;
the cache therefore generates in place under a lock and marks completion with a marker file
written last (a directory without the marker is wiped and regenerated).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

from tests.harness import scenarios
from tests.harness._fs import cache_root, file_lock, is_complete, mark_complete, wipe
from tests.harness.flink import java_sources_hash
from tests.harness.runner import HarnessRunError, run_java, tail

MANIFEST = "manifest.json"
_CHK = re.compile(r"^chk-(\d+)$")


def generator_hash(version: str, scenario: str) -> str:
    """Hash of everything that determines a store: the generator's Java sources, this scenario's
    plan as the generator receives it, and this module (leftovers, manifest). Editing another
    scenario, the oracle or the verifier does not invalidate this store."""
    plan = scenarios.PLANS[scenario]
    digest = hashlib.sha256()
    digest.update(java_sources_hash(generator_only=True).encode())
    digest.update(json.dumps(plan.fingerprint(), sort_keys=True).encode())
    digest.update(scenarios.properties(plan, "<checkpoints>", "<savepoints>").encode())
    digest.update(Path(__file__).read_bytes())
    digest.update(version.encode())
    return digest.hexdigest()[:12]


def fixture_dir(version: str, scenario: str) -> Path:
    return cache_root() / "fixtures" / version / f"{scenario}-{generator_hash(version, scenario)}"


def check_scenario(version: str, scenario: str) -> scenarios.ScenarioPlan:
    if scenario not in scenarios.PLANS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {scenarios.SCENARIOS}")
    if scenario not in scenarios.scenarios_for(version):
        raise ValueError(f"scenario {scenario!r} needs Flink >= "
                         f"{'.'.join(map(str, scenarios.PLANS[scenario].min_flink))}, not {version}")
    return scenarios.PLANS[scenario]


def cached_store(version: str, scenario: str) -> tuple[Path, dict]:
    """Root and manifest of the cached store, generating it once (inter-process safe)."""
    check_scenario(version, scenario)
    root = fixture_dir(version, scenario)
    if not is_complete(root):
        with file_lock(root.parent / f"{root.name}.lock"):
            if not is_complete(root):
                wipe(root)
                generate(version, scenario, root)
                mark_complete(root)
    return root, json.loads((root / MANIFEST).read_text())


def generate(version: str, scenario: str, root: Path, attempts: int = 2, generator: str = "Generate") -> dict:
    """Generate `scenario` with Flink `version` into the empty or missing directory `root`.

    A Flink run on a loaded 2-core machine can time out; one retry from scratch (the first
    failure's log goes to stderr) keeps CI robust without hiding a deterministic failure.
    """
    plan = check_scenario(version, scenario)
    root = root.resolve()
    last_error: Exception | None = None
    for attempt in range(1, attempts + 1):
        if root.exists() and any(root.iterdir()):
            if attempt == 1:
                raise FileExistsError(f"refusing to generate into non-empty {root}")
            wipe(root)
        try:
            return _generate_once(version, plan, root, generator)
        except HarnessRunError as exc:
            last_error = exc
            print(f"[harness] generating {version}/{scenario} failed (attempt {attempt}/{attempts}):\n{exc}",
                  file=sys.stderr)
    assert last_error is not None
    raise last_error


def _generate_once(version: str, plan: scenarios.ScenarioPlan, root: Path, generator: str = "Generate") -> dict:
    checkpoints = root / "checkpoints"
    savepoints = root / "savepoints"
    checkpoints.mkdir(parents=True, exist_ok=True)
    savepoints.mkdir(parents=True, exist_ok=True)
    # Plan, per-job results and the JVM log stay outside the store: the store holds only what
    # Flink (and the planted leftovers) wrote, plus manifest.json.
    with tempfile.TemporaryDirectory(prefix="statekeeper-gen-") as work:
        plan_file = Path(work) / "plan.properties"
        result_file = Path(work) / "result.jsonl"
        plan_file.write_text(scenarios.properties(plan, str(checkpoints), str(savepoints)))
        timeout = 120 + 90 * len(plan.jobs)
        run = run_java(version, generator, [str(plan_file), str(result_file)], timeout=timeout)
        results = [json.loads(line) for line in result_file.read_text().splitlines()] \
            if result_file.exists() else []
        if run.returncode != 0 or len(results) != len(plan.jobs):
            raise HarnessRunError(
                f"Flink {version} {generator} for {plan.name} exited {run.returncode} after "
                f"{len(results)}/{len(plan.jobs)} jobs:\n{tail(run.output)}")
    manifest = _manifest(version, plan, root, results)
    for job in manifest["jobs"]:
        # The generator reports where it looked; Flink must have written exactly there.
        if not any(Path(d, "_metadata").is_file() for d in job["retained_checkpoints"]):
            raise HarnessRunError(f"job {job['name']}: no checkpoint under {job['job_dir']}")
    if plan.leftovers:
        _plant_leftovers(manifest)
    manifest["failed_checkpoint_dirs"] = sorted(
        str(d) for job in manifest["jobs"] for d in _chk_dirs(Path(job["job_dir"]))
        if not (d / "_metadata").is_file())
    _write_json(root / MANIFEST, manifest)
    return manifest


def _manifest(version: str, plan: scenarios.ScenarioPlan, root: Path, results: list[dict]) -> dict:
    by_name = {r["name"]: r for r in results}
    jobs = []
    savepoints = []
    for job in plan.jobs:
        r = by_name[job.name]
        spec = job.spec()
        job_dir = Path(r["job_dir"])
        retained = [str(d) for d in _chk_dirs(job_dir) if (d / "_metadata").is_file()]
        restored_from = _local_path(r["restored_from"]) if r["restored_from"] else None
        jobs.append({
            "name": job.name,
            "job_id": r["job_id"],
            "job_dir": str(job_dir),
            "backend": spec["backend"],
            "incremental": bool(spec["incremental"]) and spec["backend"] == "rocksdb",
            "parallelism": spec["parallelism"],
            "config": spec,
            "restored_from": restored_from,
            "restored_from_job": job.restore_from,
            "claim_mode": r["claim_mode"],
            "completed_checkpoints": r["completed_checkpoints"],
            "retained_checkpoints": retained,
            "savepoints": [_local_path(s["path"]) for s in r["savepoints"]],
        })
        for s in r["savepoints"]:
            savepoints.append({"dir": _local_path(s["path"]), "format": s["format"], "job": job.name})
    return {
        "version": version,
        "scenario": plan.name,
        "generator_hash": generator_hash(version, plan.name),
        "metadata_version": scenarios.metadata_version_for(version),
        "root": str(root),
        "checkpoint_root": str(root / "checkpoints"),
        "savepoint_root": str(root / "savepoints"),
        "jobs": jobs,
        "savepoints": savepoints,
        "failed_checkpoint_dirs": [],
        "planted_failed_checkpoints": [],
        "orphan_files": [],
    }


def _plant_leftovers(manifest: dict) -> None:
    """What crashes and failed uploads leave behind, made from real data files under new names.

    * `chk-<last+1>/` without `_metadata`: two data files plus a half-written hidden
      `._metadata.inprogress.<uuid>` (the local/HDFS RecoverableWriter's in-progress name);
    * three unreferenced files in `shared/` (like FLINK-30461's orphaned uploads).
    """
    job = manifest["jobs"][0]
    job_dir = Path(job["job_dir"])
    shared = sorted((p for p in (job_dir / "shared").iterdir() if p.is_file()), key=lambda p: p.name)
    if len(shared) < 3:
        raise HarnessRunError(f"cannot plant leftovers: only {len(shared)} files in {job_dir / 'shared'}")
    last = max(job["completed_checkpoints"])
    failed = job_dir / f"chk-{last + 1}"
    failed.mkdir()
    planted = []
    for src in shared[:2]:
        dst = failed / str(uuid.uuid4())
        shutil.copyfile(src, dst)
        planted.append(str(dst))
    newest = Path(job["retained_checkpoints"][-1]) / "_metadata"
    data = newest.read_bytes()
    partial = failed / f"._metadata.inprogress.{uuid.uuid4()}"
    partial.write_bytes(data[: len(data) // 2])
    planted.append(str(partial))
    manifest["planted_failed_checkpoints"].append({"dir": str(failed), "files": sorted(planted)})
    for src in shared[-3:]:
        dst = job_dir / "shared" / str(uuid.uuid4())
        shutil.copyfile(src, dst)
        manifest["orphan_files"].append(str(dst))
    manifest["orphan_files"].sort()


def _chk_dirs(job_dir: Path) -> list[Path]:
    found = []
    if job_dir.is_dir():
        for d in job_dir.iterdir():
            m = _CHK.match(d.name)
            if m and d.is_dir():
                found.append((int(m.group(1)), d))
    return [d for _, d in sorted(found)]


def _local_path(pointer: str) -> str:
    """Flink pointers are `file:/abs/path`; the manifest stores plain absolute paths."""
    if pointer.startswith("file:"):
        pointer = pointer[len("file:"):]
        while pointer.startswith("//"):
            pointer = pointer[1:]
    return str(Path(pointer))


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)

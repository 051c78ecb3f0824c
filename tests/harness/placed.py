"""Stores of plans with a `store_dir`: the store root is a subdirectory with an odd name.

`fixtures/<v>/<scenario>-<hash>/<store_dir>/` is the store root (`checkpoints/`, `savepoints/`,
`manifest.json` as in any store), so every path Flink writes into `_metadata` passes through a
directory named, say, `odd dir%41+x`. Generation runs `VerbatimGenerate`, which hands Flink the
directories exactly as written (`Generate` passes `File.toURI()` strings, which Flink does not
decode). The fixture hash is `store.generator_hash`, whose plan fingerprint covers `store_dir`, the
`VerbatimGenerate` source and this module (`fingerprint()`); the other scenarios' hashes are
untouched. `COMPLETE` is written into both the store root and the fixture directory (cache pruning
reads the latter).
"""
from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

from tests.harness import scenarios, store
from tests.harness._fs import file_lock, is_complete, mark_complete, wipe
from tests.harness.flink import java_source_hash
from tests.harness.runner import HarnessRunError, run_java, tail

GENERATOR = "VerbatimGenerate"


def fingerprint() -> dict:
    """What, besides the plan, determines a placed store (part of the plan's fingerprint)."""
    return {"generator": GENERATOR, "java": java_source_hash(f"{GENERATOR}.java"),
            "module": hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]}


def store_root(version: str, scenario: str, fixture_dir: Path | None = None) -> Path:
    plan = store.check_scenario(version, scenario)
    assert plan.store_dir, f"{scenario} has no store_dir"
    return (fixture_dir or store.fixture_dir(version, scenario)) / plan.store_dir


def cached_store(version: str, scenario: str) -> tuple[Path, dict]:
    """Root (inside the fixture directory) and manifest of the cached store, generated once."""
    outer = store.fixture_dir(version, scenario)
    root = store_root(version, scenario, outer)
    if not is_complete(outer):
        with file_lock(outer.parent / f"{outer.name}.lock"):
            if not is_complete(outer):
                wipe(outer)
                generate(version, scenario, root)
                mark_complete(root)
                mark_complete(outer)
    return root, json.loads((root / store.MANIFEST).read_text())


def generate(version: str, scenario: str, root: Path, attempts: int = 2) -> dict:
    """Generate `scenario` into the store root `root` (empty or missing); one retry as store.generate."""
    plan = store.check_scenario(version, scenario)
    root = root.resolve()
    last_error: Exception | None = None
    for attempt in range(1, attempts + 1):
        if root.exists() and any(root.iterdir()):
            if attempt == 1:
                raise FileExistsError(f"refusing to generate into non-empty {root}")
            wipe(root)
        try:
            return _generate_once(version, plan, root)
        except HarnessRunError as exc:
            last_error = exc
            print(f"[harness] generating {version}/{scenario} failed (attempt {attempt}/{attempts}):\n{exc}",
                  file=sys.stderr)
    assert last_error is not None
    raise last_error


def _generate_once(version: str, plan: scenarios.ScenarioPlan, root: Path) -> dict:
    # store._generate_once with VerbatimGenerate as the entry point.
    checkpoints = root / "checkpoints"
    savepoints = root / "savepoints"
    checkpoints.mkdir(parents=True, exist_ok=True)
    savepoints.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="statekeeper-gen-") as work:
        plan_file = Path(work) / "plan.properties"
        result_file = Path(work) / "result.jsonl"
        plan_file.write_text(scenarios.properties(plan, str(checkpoints), str(savepoints)))
        timeout = 120 + 90 * len(plan.jobs)
        run = run_java(version, GENERATOR, [str(plan_file), str(result_file)], timeout=timeout)
        results = [json.loads(line) for line in result_file.read_text().splitlines()] \
            if result_file.exists() else []
        if run.returncode != 0 or len(results) != len(plan.jobs):
            raise HarnessRunError(
                f"Flink {version} {GENERATOR} for {plan.name} exited {run.returncode} after "
                f"{len(results)}/{len(plan.jobs)} jobs:\n{tail(run.output)}")
    manifest = store._manifest(version, plan, root, results)
    for job in manifest["jobs"]:
        # The generator reports where it looked; Flink must have written exactly there.
        if not any(Path(d, "_metadata").is_file() for d in job["retained_checkpoints"]):
            raise HarnessRunError(f"job {job['name']}: no checkpoint under {job['job_dir']}")
    if plan.leftovers:
        store._plant_leftovers(manifest)
    manifest["failed_checkpoint_dirs"] = sorted(
        str(d) for job in manifest["jobs"] for d in store._chk_dirs(Path(job["job_dir"]))
        if not (d / "_metadata").is_file())
    store._write_json(root / store.MANIFEST, manifest)
    return manifest

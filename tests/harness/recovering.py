"""Stores of `recovering` plans: checkpoints a restored job takes while it still processes the data it restored.

`RecoveryGenerate` runs the plan's jobs as `ClusterGenerate` does (a MiniCluster each, the plan's `flink.<key>`
options) and reads, from the snapshots themselves, how far each restored job's retained checkpoints had got
through the in-flight data of the snapshot it restored (RecoveryGenerate.java says how). The manifest is
`store`'s, plus per restored job `recovery`:

    restored_checkpoint_id, restored_gate_next (R: elements emitted before the restored snapshot),
    restored_tally_count, restored_in_flight_elements (R minus the tally count: what it held in flight),
    retained_checkpoints: [{id, dir, gate_next, tally_count, taken_during_recovery (tally_count < R)}],
    completed_during_recovery: [ids of completed checkpoints older than a retained one taken during recovery]

A store whose restored job took no checkpoint during recovery (it depends on how fast Flink runs) is generated
again, like clustered.py's stores that miss their promise (promises.py). The fixture hash is
`store.generator_hash`, whose plan fingerprint covers RecoveryGenerate.java, the ClusterGenerate.java and
ExtraOptions.java it runs, and this module (`fingerprint()`); no other plan's hash covers them together.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests.harness import store
from tests.harness._fs import file_lock, is_complete, mark_complete, wipe
from tests.harness.clustered import GENERATION_ATTEMPTS, PromiseNotMet
from tests.harness.flink import java_source_hash
from tests.harness.promises import PROMISES

GENERATOR = "RecoveryGenerate"
JAVA_SOURCES = ("RecoveryGenerate.java", "ClusterGenerate.java", "ExtraOptions.java")
REPORT = "recovery.json"   # written by RecoveryGenerate beside checkpoints/, moved into the manifest


def fingerprint() -> dict:
    """What, besides the plan, determines a recovering store (part of the plan's fingerprint)."""
    return {"generator": GENERATOR, "java": {name: java_source_hash(name) for name in JAVA_SOURCES},
            "module": hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]}


def cached_store(version: str, scenario: str) -> tuple[Path, dict]:
    """Root and manifest of the cached store, generated once (inter-process safe)."""
    store.check_scenario(version, scenario)
    root = store.fixture_dir(version, scenario)
    if not is_complete(root):
        with file_lock(root.parent / f"{root.name}.lock"):
            if not is_complete(root):
                _generate_keeping_promise(version, scenario, root)
                mark_complete(root)
    return root, json.loads((root / store.MANIFEST).read_text())


def _generate_keeping_promise(version: str, scenario: str, root: Path) -> None:
    missed = []
    for _ in range(GENERATION_ATTEMPTS):
        wipe(root)
        manifest = generate(version, scenario, root)
        problem = PROMISES[scenario](version, manifest) if scenario in PROMISES else None
        if problem is None:
            return
        missed.append(problem)
    wipe(root)
    raise PromiseNotMet(f"{scenario} (Flink {version}) generated {GENERATION_ATTEMPTS} times, never with what its "
                        f"tests need: {missed[-1]}. Look at the plan in tests/harness/scenarios.py (a slower tally "
                        f"in the restored job makes its recovery longer).")


def generate(version: str, scenario: str, root: Path) -> dict:
    """Generate `scenario` into `root` (empty or missing) with RecoveryGenerate; each restored job's manifest
    entry gains `recovery`."""
    manifest = store.generate(version, scenario, root, generator=GENERATOR)
    store_root = Path(manifest["root"])
    report = json.loads((store_root / REPORT).read_text())
    for job in manifest["jobs"]:
        if job["restored_from"]:
            job["recovery"] = report[job["name"]]
    path = store_root / store.MANIFEST
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    tmp.replace(path)
    (store_root / REPORT).unlink()   # the store holds only what Flink wrote, plus the manifest
    return manifest

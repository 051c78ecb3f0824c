"""Stores of `clustered` plans: jobs run by `ClusterGenerate` in a MiniCluster of their own.

What those plans need beyond `Generate`: Flink options JobSpec does not know (`flink.<key>` params:
ForSt's database in checkpoint storage, the changelog backend) and a failover (`failover_after`: the
TaskManager is lost after N checkpoints, every subtask restarts as the next attempt). The fixture hash
is `store.generator_hash`, whose plan fingerprint covers `ClusterGenerate.java`, `ExtraOptions.java` and
this module (`fingerprint()`); the other scenarios' hashes are untouched (flink.py leaves the two Java
sources out of the common generator hash).

The manifest is `store`'s, plus per job `forst_databases`: every `shared/op_*_attempt_<n>/` directory
Flink created (as listed on disk after generation: which databases exist, never which files are live;
that only the oracle's reading of the `_metadata` files says).
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from tests.harness import store
from tests.harness._fs import file_lock, is_complete, mark_complete, wipe
from tests.harness.flink import java_source_hash
from tests.harness.promises import PROMISES

GENERATOR = "ClusterGenerate"
JAVA_SOURCES = ("ClusterGenerate.java", "ExtraOptions.java")
_DATABASE = re.compile(r"^op_(?P<operator>.+)_attempt_(?P<attempt>\d+)$")
# Whether a generated store holds what its tests are about can depend on timing inside Flink (when ForSt
# compacts), so a store that misses its promise (tests/harness/promises.py) is generated again, this many
# times in all, and then refused: a cached store without the case would fail its test on every later run.
GENERATION_ATTEMPTS = 3


class PromiseNotMet(RuntimeError):
    """A generated store lacks the case its scenario exists for."""


def fingerprint() -> dict:
    """What, besides the plan, determines a clustered store (part of the plan's fingerprint)."""
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
                        f"tests need: {missed[-1]}. Look at the plan in tests/harness/scenarios.py (more checkpoints "
                        f"after the failover give ForSt more chances to compact).")


def generate(version: str, scenario: str, root: Path) -> dict:
    """Generate `scenario` into `root` (empty or missing) with ClusterGenerate; the manifest gains
    `forst_databases` per job."""
    manifest = store.generate(version, scenario, root, generator=GENERATOR)
    for job in manifest["jobs"]:
        job["forst_databases"] = forst_databases(Path(job["job_dir"]))
    path = Path(manifest["root"]) / store.MANIFEST
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    tmp.replace(path)
    return manifest


def forst_databases(job_dir: Path) -> list[dict]:
    """`shared/op_<operator>_attempt_<n>/` directories of a job: dir, operator, attempt."""
    shared = job_dir / "shared"
    found = []
    if shared.is_dir():
        for d in sorted(shared.iterdir()):
            m = _DATABASE.match(d.name)
            if m and d.is_dir():
                found.append({"dir": str(d), "operator": m["operator"], "attempt": int(m["attempt"])})
    return found

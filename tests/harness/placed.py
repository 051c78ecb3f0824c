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
from pathlib import Path

from tests.harness import store
from tests.harness._fs import file_lock, is_complete, mark_complete, wipe
from tests.harness.flink import java_source_hash

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


def generate(version: str, scenario: str, root: Path) -> dict:
    """Generate `scenario` into the store root `root` (empty or missing) with VerbatimGenerate."""
    return store.generate(version, scenario, root, generator=GENERATOR)

"""The scale benchmark's store generator: real `_metadata`, rewritten so the copy is self-contained.

A small store is generated from the harness fixtures of one Flink version; every `_metadata` in it
must parse, reference only files inside the store that exist, keep the restore chains between
jobs (a restored job's checkpoints reference its parent's replicated shared/ files), and each
replica must be independent of the others and of the cached fixtures.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from statekeeper.format import extract_references, read_metadata
from statekeeper.layout.classify import classify
from statekeeper.uri import normalize_uri

pytestmark = pytest.mark.flink


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> tuple[Path, dict]:
    from bench._scale_store import build
    from tests.harness import FLINK_VERSIONS

    root = tmp_path_factory.mktemp("scale") / "store"
    # Enough `_metadata` for two copies of every fixture: replicas must not reference each other.
    info = build(root, objects=3_000, metadata=100, versions=[FLINK_VERSIONS[0]])
    return root, info


def _references(root: Path) -> dict[str, set[str]]:
    out = {}
    for path in sorted(root.rglob("_metadata")):
        uri = normalize_uri(str(path))
        out[uri] = {ref.uri for ref in extract_references(read_metadata(path, uri), uri).files}
    return out


def test_counts_match_the_files_on_disk(store):
    root, info = store
    files = [p for p in root.rglob("*") if p.is_file()]
    assert len(files) == info["objects"] == 3_000
    assert sum(p.name == "_metadata" for p in files) == info["metadata"] >= 100
    assert info["padding_objects"] > 0 and info["replicas"] >= 2


def test_every_reference_points_at_an_existing_file_inside_the_store(store):
    root, _ = store
    prefix = normalize_uri(str(root)) + "/"
    refs = _references(root)
    # Some fixtures keep all state inline (hashmap, small incremental): no file references there.
    assert sum(1 for files in refs.values() if files) > len(refs) // 2
    outside = {f for files in refs.values() for f in files if not f.startswith(prefix)}
    assert not outside
    # (file-merging handles also name their managed directories: those exist as directories)
    missing = {f for files in refs.values() for f in files if not Path(f[len("file://"):]).exists()}
    assert not missing


def test_restore_chains_cross_job_directories_within_one_replica(store):
    root, info = store
    checkpoints = normalize_uri(str(root / "checkpoints"))
    # job directory -> the job directories its checkpoints reference files of
    uses: dict[str, set[str]] = defaultdict(set)
    for meta, files in _references(root).items():
        if not meta.startswith(checkpoints + "/"):
            continue
        own = classify(meta[len(checkpoints) + 1:]).job_dir
        for f in files:
            if f.startswith(checkpoints + "/"):
                other = classify(f[len(checkpoints) + 1:]).job_dir
                if other != own:
                    uses[own].add(other)
    assert uses, "no checkpoint references another job's files"
    assert info["cross_job_paths"] > 0 and info["metadata_cross_job"] > 0
    # Each fixture's chain (A <- B <- C, B_legacy <- A) is replicated as its own group: the job
    # directories linked by references form components of at most one fixture's jobs, at least
    # one per replica (chain_claim; after a NO_CLAIM restore Flink's first checkpoint is full, so
    # chain_noclaim may share nothing); shared files across replicas would merge them.
    components = _components(uses)
    assert all(len(c) <= 4 for c in components), components
    # every replica but the last, which may stop before the chain fixtures
    assert len(components) >= info["replicas"] - 1 >= 2


def _components(edges: dict[str, set[str]]) -> list[set[str]]:
    neighbours: dict[str, set[str]] = defaultdict(set)
    for a, bs in edges.items():
        for b in bs:
            neighbours[a].add(b)
            neighbours[b].add(a)
    seen: set[str] = set()
    out = []
    for start in neighbours:
        if start in seen:
            continue
        stack, component = [start], set()
        while stack:
            node = stack.pop()
            if node not in component:
                component.add(node)
                stack += neighbours[node] - component
        seen |= component
        out.append(component)
    return out

"""A synthetic store of N objects and M `_metadata` made of real harness `_metadata`, for scale runs.

Every harness fixture (one Flink version and scenario: a group of jobs, some restored from each
other's retained checkpoints, plus savepoints) is replicated as a whole under fresh job ids and
savepoint names, and each of its `_metadata` is rewritten with our codec so that every absolute
path points into the replica: a job restored from another job's checkpoint keeps referencing
the replica of that other job's shared/ files (the cross-job chains of FLINK-24149), never the
cached fixture. Data files are hard links (no space); only `_metadata` are written as new bytes.
Replicas are added until the store holds M `_metadata`; then the replicated job directories'
shared/ are padded with hard links of their own files under new names (unreferenced leftovers, as
real stores accumulate) until it holds N objects.

The fixtures themselves are only read (they are shared, read-only caches).
"""
from __future__ import annotations

import hashlib
import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench import cache_dir
from bench._links import link_or_copy, pad_job_dirs

REPO = Path(__file__).resolve().parents[1]
BUILD_VERSION = 1
KINDS = ("checkpoints", "savepoints")


@dataclass(frozen=True)
class Group:
    """One fixture: the job and savepoint directories that reference each other."""
    version: str
    scenario: str
    root: Path
    dirs: tuple[tuple[str, Path], ...]   # (kind, directory)


def fixture_groups(versions: list[str]) -> list[Group]:
    sys.path[:0] = [str(REPO / "include"), str(REPO)]
    import tests.harness as harness

    groups = []
    for version in versions:
        for scenario in harness.scenarios_for(version):
            fixture = harness.get_fixture(version, scenario)
            dirs = tuple((kind, d) for kind in KINDS if (fixture.root / kind).is_dir()
                         for d in sorted((fixture.root / kind).iterdir()) if d.is_dir())
            groups.append(Group(version, scenario, fixture.root, dirs))
    return groups


def _replica_name(kind: str, replica: int, group: Group, src: Path) -> str:
    digest = hashlib.md5(f"{replica}/{group.version}/{group.scenario}/{kind}/{src.name}".encode()).hexdigest()
    # The layout Flink writes: <job id, 32 hex>/ and savepoint-<6 hex of the job id>-<12 hex>/.
    return digest if kind == "checkpoints" else f"savepoint-{digest[:6]}-{digest[6:18]}"


class _Rewriter:
    """Rewrites fixture `_metadata` for a replica; parses each source once (a replica differs from
    the source only in its path prefixes)."""

    def __init__(self) -> None:
        self.models: dict[Path, object] = {}

    def rewrite(self, src: Path, mapping: dict[str, str], own_dir: str) -> tuple[bytes, list[str]]:
        """(new bytes, the distinct paths that now point into another directory of the replica)."""
        from statekeeper.format import read_metadata, rewrite_prefixes, to_bytes
        from statekeeper.uri import normalize_uri

        model = self.models.get(src)
        if model is None:
            model = self.models[src] = read_metadata(src, normalize_uri(str(src)))
        result = rewrite_prefixes(model, mapping)
        if result.unmapped:
            raise RuntimeError(f"{src}: paths outside its fixture's directories: {result.unmapped[:3]}")
        foreign = sorted({c.new for c in result.changes if not c.new.startswith(own_dir + "/")})
        return to_bytes(result.model, inline_source=src), foreign


def _replicate(group: Group, replica: int, store: Path, rewriter: _Rewriter) -> dict:
    from statekeeper.uri import normalize_uri

    targets = {src: store / kind / _replica_name(kind, replica, group, src) for kind, src in group.dirs}
    mapping = {normalize_uri(str(src)): normalize_uri(str(dst)) for src, dst in targets.items()}
    checkpoints = normalize_uri(str(store / "checkpoints")) + "/"
    counts = {"objects": 0, "metadata": 0, "cross_job_paths": 0, "savepoint_paths": 0, "metadata_cross_job": 0}
    for src, dst in targets.items():
        own = mapping[normalize_uri(str(src))]
        for path in sorted(src.rglob("*")):
            out = dst / path.relative_to(src)
            if path.is_dir():
                out.mkdir(parents=True, exist_ok=True)   # empty shared/ and taskowned/ too
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            counts["objects"] += 1
            if path.name != "_metadata":
                link_or_copy(path, out)
                continue
            data, foreign = rewriter.rewrite(path, mapping, own)
            out.write_bytes(data)
            counts["metadata"] += 1
            # Another job's directory (a restore chain) or a savepoint's (a restore from it).
            cross_job = sum(1 for p in foreign if p.startswith(checkpoints))
            counts["cross_job_paths"] += cross_job
            counts["savepoint_paths"] += len(foreign) - cross_job
            counts["metadata_cross_job"] += cross_job > 0
    counts["job_dirs_with_shared"] = [str(d) for (kind, _s), d in zip(group.dirs, targets.values())
                                      if kind == "checkpoints" and (d / "shared").is_dir()]
    return counts


def build(store: Path, objects: int, metadata: int, versions: list[str],
          progress: Callable[[str], None] = lambda _m: None) -> dict:
    """Write the store at `store` (emptied first); returns what it holds."""
    shutil.rmtree(store, ignore_errors=True)
    for kind in KINDS:
        (store / kind).mkdir(parents=True)
    groups = fixture_groups(versions)
    rewriter = _Rewriter()
    totals = {"objects": 0, "metadata": 0, "cross_job_paths": 0, "savepoint_paths": 0, "metadata_cross_job": 0}
    job_dirs: list[Path] = []
    replica = groups_written = 0
    t = time.perf_counter()
    last = t
    while totals["metadata"] < metadata or replica == 0:
        for group in groups:
            counts = _replicate(group, replica, store, rewriter)
            job_dirs += [Path(d) for d in counts.pop("job_dirs_with_shared")]
            for k, v in counts.items():
                totals[k] += v
            groups_written += 1
            if time.perf_counter() - last > 10:
                last = time.perf_counter()
                progress(f"  replicas: {totals['metadata']}/{metadata} _metadata, {totals['objects']} objects "
                         f"({last - t:.0f} s)")
            if totals["metadata"] >= metadata:
                break
        replica += 1
    progress(f"  replicas done: {totals['metadata']} _metadata, {totals['objects']} objects in "
             f"{groups_written} fixture copies ({time.perf_counter() - t:.0f} s); padding shared/ ...")
    padding = max(0, objects - totals["objects"])
    pad_job_dirs(job_dirs, padding, progress=lambda done: progress(
        f"  padding: {done}/{padding} objects ({time.perf_counter() - t:.0f} s)"))
    return {"objects": totals["objects"] + padding, "metadata": totals["metadata"], "versions": versions,
            "fixture_copies": groups_written, "replicas": replica, "job_dirs_with_shared": len(job_dirs),
            "padding_objects": padding, "cross_job_paths": totals["cross_job_paths"],
            "metadata_cross_job": totals["metadata_cross_job"], "savepoint_paths": totals["savepoint_paths"],
            "build_s": round(time.perf_counter() - t, 1)}


def cached_store(objects: int, metadata: int, versions: list[str],
                 progress: Callable[[str], None] = lambda _m: None) -> tuple[Path, dict]:
    """The store for these parameters under $STATEKEEPER_CACHE/bench/scale, built once (the info
    file is written last, so an interrupted build is redone)."""
    home = cache_dir("scale", f"v{BUILD_VERSION}-{'+'.join(versions)}-{objects}-{metadata}")
    info_file = home / "store.json"
    if info_file.exists():
        return home / "store", json.loads(info_file.read_text())
    progress(f"generating a store of {objects} objects and {metadata} _metadata at {home} ...")
    info = build(home / "store", objects, metadata, versions, progress)
    info_file.write_text(json.dumps(info))
    return home / "store", info

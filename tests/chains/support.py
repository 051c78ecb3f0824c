"""Helpers for the chains and validation tests.

* `synthetic_index`: index tables (snapshots, references, files) of a random but plausible store
  (restore chains, savepoints, segments, managed directories, files outside the roots, missing
  files), built row by row with the index's own layout rules, plus the expected direct
  dependencies computed independently in Python.
* `relocate_store`: copy a harness store to a new local directory or S3 prefix, rewriting every
  `_metadata` with the codec (absolute paths now point into the copy), so a disposable copy can
  be damaged and restored without touching the read-only cache.
* `oracle_references`: Flink's own reading of which files each `_metadata` references.
"""
from __future__ import annotations

import random
import shutil
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from statekeeper.format import extract_references, open_metadata
from statekeeper.layout.classify import classify
from statekeeper.layout.locate import parent_dir, relation_of, snapshot_dir, target_of
from statekeeper.storage import FileIO
from statekeeper.storage.roots import root_id_of
from statekeeper.tables.catalog import job_bucket
from statekeeper.uri import normalize_uri

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
RUN = "idx-synthetic"


# -- synthetic index tables -----------------------------------------------------------------------

@dataclass
class SyntheticIndex:
    roots: list[str]
    snapshots: list[dict] = field(default_factory=list)
    references: list[dict] = field(default_factory=list)
    files: list[dict] = field(default_factory=list)
    sizes: dict[str, int] = field(default_factory=dict)         # real size of every file that exists
    chains: dict[str, str | None] = field(default_factory=dict)  # job id -> job it was restored from


def _root_of(roots: list[str], uri: str) -> str | None:
    return next((r for r in roots if uri.startswith(r + "/")), None)


def _file_row(roots: list[str], uri: str, size: int) -> dict:
    root = _root_of(roots, uri)
    assert root is not None
    rel = uri[len(root) + 1:]
    loc = classify(rel)
    return {"uri": uri, "root": root, "root_id": root_id_of(root), "job_dir": loc.job_dir or ".",
            "bucket": job_bucket(loc.job_dir or "."), "relative_path": rel, "kind": loc.kind.value,
            "job_id": loc.job_id, "checkpoint_id": loc.checkpoint_id,
            "size": size, "mtime": T0, "etag": f"e-{abs(hash(uri)) % 10**8}", "index_run_id": RUN}


def synthetic_index(seed: int, base: str, jobs: int = 7, missing_rate: float = 0.05,
                    short_rate: float = 0.04) -> SyntheticIndex:
    rng = random.Random(seed)
    ckpt, sps = f"{base}/checkpoints", f"{base}/savepoints"
    idx = SyntheticIndex([ckpt, sps])
    job_ids = [f"{rng.getrandbits(128):032x}" for _ in range(jobs)]
    shared: dict[str, list[str]] = defaultdict(list)
    exists: dict[str, int] = {}

    def new_file(directory: str) -> str:
        uri = f"{directory}/{rng.getrandbits(64):016x}"
        exists[uri] = rng.randrange(100, 5000)
        return uri

    savepoints = []
    for i in range(2):
        d = f"{sps}/savepoint-{job_ids[0][:6]}-{rng.getrandbits(48):012x}"
        savepoints.append((d, [new_file(d) for _ in range(3)]))
    for i, job in enumerate(job_ids):
        parent = job_ids[rng.randrange(i)] if i and rng.random() < 0.8 else None
        idx.chains[job] = parent
        for _ in range(rng.randrange(2, 5)):
            shared[job].append(new_file(f"{ckpt}/{job}/shared"))
    for i, job in enumerate(job_ids):
        for n in range(1, rng.randrange(2, 4) + 1):
            cid = 10 * i + n
            chk = f"{ckpt}/{job}/chk-{cid}"
            uri = f"{chk}/_metadata"
            exists[uri] = 1000
            bad = i == 3 and n == 1
            idx.snapshots.append(_snapshot_row(ckpt, job, cid, uri, "parse_error" if bad else "ok"))
            if bad:
                continue
            refs: list[tuple[str, str, int | None, int | None, int | None, str]] = []

            def ref(file_uri: str, kind: str = "FILE_STREAM_STATE_HANDLE", stated: int | None = None,
                    start: int | None = None, length: int | None = None, fkind: str | None = None) -> None:
                refs.append((file_uri, kind, stated, start, length, fkind or ""))

            for f in rng.sample(shared[job], k=rng.randrange(1, len(shared[job]) + 1)):
                ref(f, stated=exists[f])
                if rng.random() < 0.3:          # the same file named twice (SharedList + PrivateList)
                    ref(f, stated=exists[f] - 1)
            for _ in range(rng.randrange(0, 3)):
                ref(new_file(chk), "RELATIVE_STREAM_STATE_HANDLE")
            parent = idx.chains[job]
            if parent and rng.random() < 0.85:
                for f in rng.sample(shared[parent], k=rng.randrange(1, len(shared[parent]) + 1)):
                    ref(f, stated=exists[f])
            if rng.random() < 0.25:
                d, sp_files = savepoints[rng.randrange(2)]
                ref(rng.choice(sp_files), stated=None)
            if rng.random() < 0.2:
                ref(f"s3://elsewhere/entropy/{rng.getrandbits(32):08x}/f{rng.randrange(9)}", stated=77)
            if rng.random() < 0.3:
                seg = rng.choice(shared[job])
                start = rng.randrange(0, exists[seg] // 2)
                ref(seg, "SEGMENT_FILE_HANDLE", stated=None, start=start, length=exists[seg] - start)
            if rng.random() < 0.2:
                ref(f"{ckpt}/{job}/shared/job_{job}_op_x_0_1", "SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE",
                    fkind="file_merging_managed_dir")
            for file_uri, kind, stated, start, length, fkind in refs:
                idx.references.append(_reference_row(idx.roots, uri, ckpt, job, cid, file_uri, kind,
                                                     stated if stated is not None or start is not None
                                                     else exists.get(file_uri, 50), start, length, fkind))
    for d, sp_files in savepoints:
        uri = f"{d}/_metadata"
        exists[uri] = 500
        row = _snapshot_row(sps, d.rsplit("/", 1)[1], None, uri, "ok")
        row.update(job_id=None, layout_kind="savepoint_metadata", snapshot_type="savepoint", dir_checkpoint_id=None,
                   checkpoint_id=99)
        idx.snapshots.append(row)
        for f in sp_files:
            idx.references.append(_reference_row(idx.roots, uri, sps, d.rsplit("/", 1)[1], 99, f,
                                                 "RELATIVE_STREAM_STATE_HANDLE", exists[f], None, None, "",
                                                 job_id=None))
    for uri, size in sorted(exists.items()):
        if "/_metadata" not in uri and rng.random() < missing_rate:
            continue
        if "/_metadata" not in uri and rng.random() < short_rate:
            size //= 2      # a torn upload: shorter than every handle states
        idx.sizes[uri] = size
        idx.files.append(_file_row(idx.roots, uri, size))
    return idx


def _snapshot_row(root: str, job_dir: str, cid: int | None, uri: str, status: str) -> dict:
    return {"uri": uri, "root": root, "root_id": root_id_of(root), "job_dir": job_dir, "bucket": job_bucket(job_dir),
            "job_id": job_dir,
            "layout_kind": "checkpoint_metadata", "dir_checkpoint_id": cid, "status": status,
            "error": None if status == "ok" else "CorruptMetadataError: synthetic", "metadata_version": 6,
            "checkpoint_id": cid if status == "ok" else None, "snapshot_type": "checkpoint", "snapshot_format": None,
            "sharing": "forward_backward", "metadata_size": 1000, "metadata_mtime": T0, "metadata_etag": "m",
            "inline_bytes": 0, "inline_handle_count": 0, "reference_count": 0, "referenced_file_count": 0,
            "referenced_bytes": 0, "operator_count": 1, "operators": [], "parser_version": "synthetic",
            "index_run_id": RUN}


def _reference_row(roots: list[str], snapshot_uri: str, root: str, job_dir: str, cid: int, file_uri: str,
                   kind: str, stated: int | None, start: int | None, length: int | None, fkind: str,
                   job_id: str | None | bool = True) -> dict:
    froot = _root_of(roots, file_uri)
    if froot is None:
        fjob, fjob_id, file_kind = None, None, "external"
    else:
        loc = classify(file_uri[len(froot) + 1:])
        fjob, fjob_id, file_kind = loc.job_dir or ".", loc.job_id, loc.kind.value
    stored = file_uri.rsplit("/", 1)[1] if kind == "RELATIVE_STREAM_STATE_HANDLE" else file_uri
    return {"snapshot_uri": snapshot_uri, "root": root, "root_id": root_id_of(root), "job_dir": job_dir,
            "bucket": job_bucket(job_dir), "snapshot_job_id": job_dir if job_id is True else job_id,
            "snapshot_checkpoint_id": cid,
            "file_uri": file_uri, "stored_path": stored, "handle_kind": kind,
            "scope": "shared" if "/shared/" in file_uri else "exclusive", "stated_size": stated if start is None else length,
            "segment_start": start, "segment_length": length, "operator_id": "0" * 32, "operator_name": "op",
            "operator_uid": None, "subtask": 0, "slot": "managed_keyed", "role": "shared", "local_name": None,
            "file_root": froot, "file_job_dir": fjob, "file_job_id": fjob_id, "file_kind": fkind or file_kind}


def expected_direct(idx: SyntheticIndex) -> dict[tuple[str, str], dict[str, Any]]:
    """(snapshot, target uri) -> relation, files, directories, bytes, computed row by row."""
    snapshot_dirs = {snapshot_dir(s["uri"]): s for s in idx.snapshots}
    per_file: dict[tuple[str, str], dict[str, Any]] = {}
    for r in idx.references:
        key = (r["snapshot_uri"], r["file_uri"])
        end = r["segment_start"] + r["segment_length"] if r["segment_start"] is not None else r["stated_size"]
        cur = per_file.setdefault(key, {"row": r, "end": end})
        if end is not None and (cur["end"] is None or end > cur["end"]):
            cur["end"] = end
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for (s, f), v in per_file.items():
        r = v["row"]
        parent = snapshot_dirs.get(parent_dir(f))
        t = target_of(f, r["file_root"], r["file_job_dir"], r["file_job_id"], parent and parent["uri"],
                      parent and parent["snapshot_type"])
        rel = relation_of(s, r["root"], r["job_dir"], t)
        e = out.setdefault((s, t.uri), {"relation": rel, "files": 0, "directories": 0, "bytes": 0, "kind": t.kind})
        if r["file_kind"] == "file_merging_managed_dir":
            e["directories"] += 1
        else:
            e["files"] += 1
            e["bytes"] += idx.sizes.get(f, v["end"] or 0)
    return out


def expected_findings(idx: SyntheticIndex, stat_roots: tuple[str, ...] = ()) -> dict[str, set[tuple[str, str]]]:
    """snapshot -> {(check, subject)} errors, applied row by row to the synthetic rows (no stat:
    files outside the roots are unverifiable unless under `stat_roots`, where they count as missing)."""
    ends: dict[tuple[str, str], tuple[int | None, bool, dict]] = {}
    for r in idx.references:
        if r["file_kind"] == "file_merging_managed_dir":
            continue
        end = r["segment_start"] + r["segment_length"] if r["segment_start"] is not None else r["stated_size"]
        key = (r["snapshot_uri"], r["file_uri"])
        prev = ends.get(key)
        rel = r["handle_kind"] == "RELATIVE_STREAM_STATE_HANDLE"
        if prev is None:
            ends[key] = (end, rel, r)
        else:
            best = prev[0] if end is None or (prev[0] is not None and prev[0] >= end) else end
            ends[key] = (best, prev[1] or rel, r)
    out: dict[str, set[tuple[str, str]]] = {}
    for (s, f), (end, rel, r) in ends.items():
        if r["file_root"] is None and not any(f.startswith(x + "/") for x in stat_roots):
            check = "file_unverifiable"
        elif f not in idx.sizes:
            check = "relative_resolves" if rel else "file_exists"
        elif end is not None and idx.sizes[f] < end:
            check = "file_size"
        else:
            continue
        out.setdefault(s, set()).add((check, f))
    for snap in idx.snapshots:
        if snap["status"] != "ok":
            out.setdefault(snap["uri"], set()).add(("metadata_parses", None))
    return out


def write_index(spark: Any, warehouse: Any, idx: SyntheticIndex) -> None:
    """Write the synthetic rows as the index tables (through the same engine the jobs use)."""
    import pyarrow as pa

    from statekeeper.tables.catalog import FILES, REFERENCES, SNAPSHOTS
    from statekeeper.tables.delta_spark import DeltaSparkEngine

    engine = DeltaSparkEngine()
    counts: dict[str, int] = {}
    for ref in idx.references:
        counts[ref["snapshot_uri"]] = counts.get(ref["snapshot_uri"], 0) + 1
    for row in idx.snapshots:   # what the index states for a parsed snapshot: one row per reference
        if row["status"] == "ok":
            row["reference_count"] = counts.get(row["uri"], 0)
    versions = {}
    for spec, rows in ((SNAPSHOTS, idx.snapshots), (REFERENCES, idx.references), (FILES, idx.files)):
        table = pa.Table.from_pylist(rows, schema=spec.schema)
        versions[spec.name] = engine.write(spark.createDataFrame(table), warehouse, spec, mode="overwrite").version
    audit_cut(warehouse, versions)


def audit_cut(warehouse: Any, versions: dict[str, int], run_id: str = RUN, status: str = "succeeded") -> None:
    """Append the `index_runs` row that makes `versions` the warehouse's cut, as an index run does
    after its table commits (readers read only audited cuts: statekeeper.tables.cut)."""
    import pyarrow as pa

    from statekeeper.tables.catalog import INDEX_RUNS
    from tests.tables.writes import append_rows

    counters = {c: 0 for c in ("units", "units_rewritten", "units_unchanged", "units_failed", "objects_listed",
                               "bytes_listed", "metadata_found", "metadata_parsed", "metadata_reused",
                               "metadata_failed")}
    row = {"run_id": run_id, "status": status, "started_at": T0, "finished_at": datetime.now(timezone.utc),
           "roots": [], "warehouse": warehouse.uri, "engine": "delta-spark", "statekeeper_version": "test",
           **counters, "errors": [], "table_versions": list(versions.items()), "data_interval_start": None,
           "data_interval_end": None, "airflow_run_id": None, "options": None}
    append_rows(warehouse, INDEX_RUNS, pa.Table.from_pylist([row], schema=INDEX_RUNS.schema))


# -- relocated copies of harness stores ----------------------------------------------------------

def relocate_store(src: Path, target: str, fileio: FileIO | None = None, *, threads: int = 8,
                   metadata_spelling: str | None = None) -> str:
    """Copy `src` (a harness store root) to `target` (a local path or an object-store URI: s3://, gs://,
    abfss:// ..., written through `fileio`) and rewrite every `_metadata` so its absolute paths point into
    the copy, spelled as `metadata_spelling` (another spelling of `target`, e.g. wasbs:// for an abfss://
    copy, as a Flink job configured with it would write them; default: the canonical target). Returns the
    normalized target URI."""
    from statekeeper.format import read_metadata, rewrite_prefixes, to_bytes

    src = Path(src)
    old, new = normalize_uri(str(src)), normalize_uri(target)
    if metadata_spelling is not None:
        assert normalize_uri(metadata_spelling) == new, (metadata_spelling, new)
    files = sorted(p for p in src.rglob("*") if p.is_file() and not p.is_symlink())

    def dest(p: Path) -> str:
        return new + "/" + p.relative_to(src).as_posix()

    def copy(p: Path) -> None:
        if p.name == "_metadata":
            model = read_metadata(p, normalize_uri(str(p)))
            result = rewrite_prefixes(model, {old: metadata_spelling or new})
            assert not result.unmapped, f"{p}: paths outside the store: {result.unmapped[:3]}"
            data = to_bytes(result.model, inline_source=p)
        else:
            data = None
        if new.startswith("file://"):
            out = Path(dest(p)[len("file://"):])
            out.parent.mkdir(parents=True, exist_ok=True)
            if data is None:
                shutil.copyfile(p, out)
            else:
                out.write_bytes(data)
        else:
            assert fileio is not None, "an object-store target needs a FileIO"
            fileio.write(dest(p), p.read_bytes() if data is None else data)

    if new.startswith("file://"):
        for d in (p for p in src.rglob("*") if p.is_dir()):   # empty directories too (roots, shared/)
            Path(dest(d)[len("file://"):]).mkdir(parents=True, exist_ok=True)
    # Data files before any `_metadata`, as Flink writes them: GC holds back a job's files written after its
    # newest `_metadata` unless the roots are complete (statekeeper.gc.plan, "Claimable tails"), so a copy in
    # another order would hand every test a tail that no Flink run leaves.
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(copy, [p for p in files if p.name != "_metadata"]))
        list(pool.map(copy, [p for p in files if p.name == "_metadata"]))
    return new


def store_roots(root: str) -> list[str]:
    return [f"{root}/checkpoints", f"{root}/savepoints"]


def oracle_references(version: str, metadata: list[Path]) -> dict[str, dict[str, int]]:
    """_metadata uri -> {referenced file uri: size Flink states}, from Flink's own reader."""
    from tests.harness import run_oracle

    out = {}
    for path, reading in zip(metadata, run_oracle(version, metadata), strict=True):
        assert "error" not in reading, reading
        out[normalize_uri(str(path))] = {normalize_uri(f["path"]): f["size"] for f in reading["referenced_files"]}
    return out


# -- FLINK-39964: checkpoints after a CLAIM restore of a native savepoint -------------------------

def _generate_one(version: str, lines: list[str], root: Path) -> dict:
    import json
    import tempfile

    from tests.harness.runner import HarnessRunError, run_java, tail

    with tempfile.TemporaryDirectory(prefix="statekeeper-gen-") as work:
        plan, result = Path(work) / "plan.properties", Path(work) / "result.jsonl"
        plan.write_text("\n".join([f"checkpoint_root={root / 'checkpoints'}", f"savepoint_root={root / 'savepoints'}",
                                   *lines]) + "\n")
        run = run_java(version, "Generate", [str(plan), str(result)], timeout=300)
        rows = [json.loads(x) for x in result.read_text().splitlines()] if result.exists() else []
        if run.returncode != 0 or len(rows) != 1:
            raise HarnessRunError(f"Flink {version} generator exited {run.returncode}:\n{tail(run.output)}")
    return rows[0]


def claim_native_savepoint_store(version: str, root: Path) -> dict:
    """Job A takes a NATIVE savepoint; job B restores it in CLAIM mode and takes two checkpoints.

    Built from the harness's generator and job plans (the harness has no such scenario). Returns
    {"savepoint": dir, "B": B's result row, "b_plan": B's JobPlan}. RocksDB compaction is off so
    B keeps referencing the savepoint's SSTs instead of compacting them away, and A inlines nothing:
    at Flink's default threshold (20 KiB) whether A's SSTs were files or bytes inside the savepoint's
    `_metadata` depended on how many records A had processed when the savepoint was taken, and a
    savepoint with only inlined SSTs gives B no relative handles at all (the case did not happen).
    """
    from tests.harness import scenarios

    (root / "checkpoints").mkdir(parents=True)
    (root / "savepoints").mkdir(parents=True)
    a = scenarios.JobPlan("A", {"checkpoints": 2, "savepoints": "NATIVE", "compaction_style": "NONE",
                                "inline_threshold": 0})
    ra = _generate_one(version, ["jobs=A", *scenarios.job_properties(a)], root)
    (sp,) = [s["path"] for s in ra["savepoints"] if s["format"] == "NATIVE"]
    sp_dir = Path(sp[len("file:"):].lstrip("/")) if sp.startswith("file:") else Path(sp)
    sp_dir = Path("/" + str(sp_dir).lstrip("/"))
    metadata = sp_dir / "_metadata"
    ssts = [r for r in extract_references(open_metadata(metadata), normalize_uri(str(metadata))).files
            if (r.local_name or "").endswith(".sst")]
    assert ssts, f"A's native savepoint {sp_dir} names no SST file for B to reference"
    b = scenarios.JobPlan("B", {"checkpoints": 2, "compaction_style": "NONE"})
    rb = _generate_one(version, ["jobs=B", *scenarios.job_properties(b), f"B.restore={sp_dir}",
                                 "B.claim_mode=CLAIM"], root)
    return {"savepoint": sp_dir, "A": ra, "B": rb, "b_plan": b}


def verify_job(version: str, snapshot_dir: Path, job: Any, timeout: float = 300) -> Any:
    """The harness verifier for a job plan that is not part of a harness scenario."""
    import tempfile

    from tests.harness import scenarios
    from tests.harness._fs import cache_root
    from tests.harness.runner import run_java
    from tests.harness.verify import VerifyResult

    parent = cache_root() / "tmp"
    parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="verify-", dir=parent))
    try:
        plan = work / "plan.properties"
        plan.write_text("\n".join(scenarios.job_properties(job)) + "\n")
        run = run_java(version, "Verify", [str(plan), job.name, str(snapshot_dir), str(work / "checkpoints")],
                       timeout=timeout)
        return VerifyResult(ok=run.returncode == 0, returncode=run.returncode, output=run.output)
    finally:
        shutil.rmtree(work, ignore_errors=True)

"""Benchmark: our `_metadata` parser vs Flink's own loader, on two large files built from real ones.

Inputs (built once with our writer from real harness fixtures, cached under
$STATEKEEPER_CACHE/bench/metadata_parse, never in the repository):
* inline_heavy  - a real inline-heavy checkpoint (1 MiB inline threshold) with its operators
                  replicated (new ids, same inline payloads) to ~--inline-gb GiB;
* handle_heavy  - a real incremental RocksDB checkpoint whose SharedLists are widened and whose
                  keyed operator is replicated until the file holds ~--handles file handles.

Measured in one run, each in its own process (wall time of the whole process, interpreter/JVM
start included; peak RSS from the kernel via RUSAGE_CHILDREN of a wrapper):
* ours        - `read_metadata` (lazy inline payloads), the codec's normal mode;
* ours+refs   - parse + `extract_references` (what the indexer does per file);
* flink-load  - Checkpoints.loadCheckpointMetadata only (bench/java/LoadOnly.java);
* flink-oracle- the harness oracle entry point (load + walk + JSON of every handle).
Ratios are ours / Flink's: < 1 means we are faster / smaller.

    python -m bench metadata_parse [--inline-gb 1.0] [--handles 1000000] [--flink-version V]
                                   [--only inline_heavy|handle_heavy] [--skip-oracle] [--repeat N]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from bench import cache_dir
from bench._measure import Measurement, measure

NAME = "metadata_parse"
DESCRIPTION = "parse wall time and peak RSS of our codec vs Flink's loader (1 GiB inline-heavy, ~1M handles)"
REPO = Path(__file__).resolve().parents[1]
BUILD_VERSION = 1  # bump when the builders change, so cached inputs are rebuilt


# ----------------------------------------------------------------------------- building inputs


def _new_id(op_id: str, k: int) -> str:
    return hashlib.md5(f"{op_id}/{k}".encode()).hexdigest()


def _latest(fixture, job: str | None = None) -> Path:
    paths = [p / "_metadata" for p in fixture.retained_checkpoints(job)]
    return max(paths, key=lambda p: int(p.parent.name.split("-")[-1]))


def build_inline_heavy(seed: Path, target_bytes: int, out: Path) -> dict:
    from statekeeper.format import read_metadata, write_metadata

    model = read_metadata(seed, str(seed), load_inline=True)  # payloads shared by every copy
    per_copy = max(model.total_size, 1)
    copies = max(1, math.ceil(target_bytes / per_copy))
    ops = []
    for k in range(copies):
        for op in model.operators:
            ops.append(replace(
                op, operator_id=op.operator_id if k == 0 else _new_id(op.operator_id, k),
                name=None if op.name is None else f"{op.name} #{k}",
                uid=None if op.uid is None else f"{op.uid}-{k}",
            ))
    big = replace(model, operators=tuple(ops))
    tmp = out.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        size = write_metadata(big, fh)
    tmp.replace(out)
    return {"seed": str(seed), "copies": copies, "operators": len(ops), "bytes": size}


def build_handle_heavy(seed: Path, target_handles: int, out: Path, per_subtask: int = 1000) -> dict:
    from statekeeper.format import (
        FileHandle,
        IncrementalKeyedHandle,
        NamedHandle,
        read_metadata,
        write_metadata,
    )

    model = read_metadata(seed, str(seed), load_inline=True)
    keyed_ops = [op for op in model.operators
                 if any(isinstance(s.managed_keyed, IncrementalKeyedHandle) for s in op.subtasks)]
    if not keyed_ops:
        raise SystemExit(f"{seed} has no incremental keyed state to widen")

    def widen(sub, k):
        h = sub.managed_keyed
        if not isinstance(h, IncrementalKeyedHandle):
            return sub
        files = [e for e in h.shared if isinstance(e.handle, FileHandle)] or [
            NamedHandle("000001.sst", FileHandle(f"file:/bench/shared/{sub.index}", 1024))]
        shared = tuple(
            NamedHandle(f"{i:06d}.sst", FileHandle(f"{files[i % len(files)].handle.path}-{k}-{i}",
                                                    files[i % len(files)].handle.size + i))
            for i in range(per_subtask)
        )
        return replace(sub, managed_keyed=replace(h, shared=shared))

    def handles_of(op):
        n = 0
        for s in op.subtasks:
            h = s.managed_keyed
            if isinstance(h, IncrementalKeyedHandle):
                n += len(h.shared) + len(h.private) + 1
        return n

    template = [replace(op, subtasks=tuple(widen(s, 0) for s in op.subtasks)) for op in keyed_ops]
    per_copy = sum(handles_of(op) for op in template)
    copies = max(1, math.ceil(target_handles / per_copy))
    others = [op for op in model.operators if op not in keyed_ops]
    ops = list(others)
    for k in range(copies):
        for op in keyed_ops:
            ops.append(replace(
                op, operator_id=op.operator_id if k == 0 else _new_id(op.operator_id, k),
                name=None if op.name is None else f"{op.name} #{k}",
                uid=None if op.uid is None else f"{op.uid}-{k}",
                subtasks=tuple(widen(s, k) for s in op.subtasks),
            ))
    big = replace(model, operators=tuple(ops))
    tmp = out.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        size = write_metadata(big, fh)
    tmp.replace(out)
    return {"seed": str(seed), "copies": copies, "operators": len(ops), "bytes": size,
            "file_handles": copies * per_copy}


# ----------------------------------------------------------------------------- measured programs


def _parse_child(path: str, refs: bool) -> int:
    """Runs in the measured child process."""
    import resource

    from statekeeper.format import extract_references, read_metadata

    t0 = time.perf_counter()
    model = read_metadata(path, path)
    t1 = time.perf_counter()
    n_refs = None
    if refs:
        n_refs = len(extract_references(model, Path(path).absolute().as_uri()).files)
    t2 = time.perf_counter()
    print(json.dumps({
        "parse_s": t1 - t0, "refs_s": t2 - t1 if refs else None, "references": n_refs,
        "operators": len(model.operators),
        "self_peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }))
    return 0


def _child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "include"), str(REPO)])
    return env


def _load_only_classes(version: str) -> Path:
    from tests.harness.flink import flink_lib

    src = REPO / "bench" / "java" / "LoadOnly.java"
    digest = hashlib.sha256(src.read_bytes()).hexdigest()[:12]
    classes = cache_dir("java", version, digest)
    if not (classes / "LoadOnly.class").exists():
        subprocess.run(["javac", "--release", "17", "-nowarn", "-cp", str(flink_lib(version) / "*"),
                        "-d", str(classes), str(src)], check=True)
    return classes


def _java(version: str, main: str, args: list[str], heap: str, extra_cp: Path | None = None) -> list[str]:
    from tests.harness.flink import java_command

    cmd = java_command(version, main, *args, jvm_opts=(f"-Xmx{heap}",))
    if extra_cp is not None:
        i = cmd.index("-cp")
        cmd[i + 1] = f"{extra_cp}{os.pathsep}{cmd[i + 1]}"
    return cmd


def run_ours(path: Path, refs: bool) -> Measurement:
    argv = [sys.executable, "-m", "bench.metadata_parse", "--child-parse", str(path)]
    if refs:
        argv.append("--child-refs")
    return measure(argv, env=_child_env())


def run_flink_load(version: str, path: Path, heap: str) -> Measurement:
    return measure(_java(version, "LoadOnly", [str(path)], heap, _load_only_classes(version)))


def run_flink_oracle(version: str, path: Path, heap: str, work: Path) -> Measurement:
    listing = work / "paths.txt"
    listing.write_text(f"{path}\n")
    output = work / "oracle.jsonl"
    try:
        return measure(_java(version, "statekeeper.harness.Oracle", [str(listing), str(output)], heap))
    finally:
        output.unlink(missing_ok=True)


# ----------------------------------------------------------------------------- reporting


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def _best(runs: list[Measurement]) -> Measurement:
    bad = [r for r in runs if r.returncode != 0]
    if bad:
        raise SystemExit(f"benchmarked process failed ({bad[0].returncode}):\n{bad[0].stdout[-3000:]}\n{bad[0].stderr}")
    return min(runs, key=lambda r: r.wall_s)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, prog="python -m bench metadata_parse", description=DESCRIPTION)
    ap.add_argument("--inline-gb", type=float, default=1.0)
    ap.add_argument("--handles", type=int, default=1_000_000)
    ap.add_argument("--flink-version", default=None, help="default: newest harness version")
    ap.add_argument("--only", choices=["inline_heavy", "handle_heavy"], action="append")
    ap.add_argument("--skip-oracle", action="store_true", help="skip the (slower) oracle baseline")
    ap.add_argument("--repeat", type=int, default=1, help="runs per measurement (best is kept)")
    ap.add_argument("--heap", default="6g", help="-Xmx for Flink's JVMs (generous on purpose)")
    ap.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    ap.add_argument("--child-parse", help=argparse.SUPPRESS)
    ap.add_argument("--child-refs", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child_parse:
        return _parse_child(args.child_parse, args.child_refs)

    sys.path[:0] = [str(REPO / "include"), str(REPO)]
    import tests.harness as harness

    version = args.flink_version or harness.FLINK_VERSIONS[-1]
    from tests.harness.flink import harness_classes

    harness_classes(version)
    _load_only_classes(version)
    work = cache_dir(NAME, version)
    cases = args.only or ["inline_heavy", "handle_heavy"]
    inputs = {}
    for case in cases:
        if case == "inline_heavy":
            seed = _latest(harness.get_fixture(version, "inline_heavy"), "A")
            target = int(args.inline_gb * 2**30)
            out = work / f"inline_heavy-{target}-v{BUILD_VERSION}-{seed.parent.parent.name}-{seed.parent.name}"
            builder = lambda: build_inline_heavy(seed, target, out)  # noqa: E731
        else:
            seed = _latest(harness.get_fixture(version, "incremental"))
            out = work / f"handle_heavy-{args.handles}-v{BUILD_VERSION}-{seed.parent.parent.name}-{seed.parent.name}"
            builder = lambda: build_handle_heavy(seed, args.handles, out)  # noqa: E731
        meta = out.with_suffix(".json")
        if not out.exists() or not meta.exists():
            t = time.perf_counter()
            info = builder()
            info["build_s"] = time.perf_counter() - t
            meta.write_text(json.dumps(info))
            print(f"built {case}: {_gib(info['bytes'])} in {info['build_s']:.1f} s -> {out}", flush=True)
        inputs[case] = (out, json.loads(meta.read_text()))

    results = {}
    tmp = cache_dir(NAME, "tmp")
    for case, (path, info) in inputs.items():
        r = {"file": str(path), "bytes": path.stat().st_size, **{k: v for k, v in info.items() if k != "seed"}}
        # Warm the page cache once so no contestant pays the first read from disk.
        with open(path, "rb") as fh:
            while fh.read(1 << 24):
                pass
        ours = _best([run_ours(path, refs=False) for _ in range(args.repeat)])
        ours_refs = _best([run_ours(path, refs=True) for _ in range(args.repeat)])
        load = _best([run_flink_load(version, path, args.heap) for _ in range(args.repeat)])
        r["ours"] = {"wall_s": ours.wall_s, "peak_rss": ours.peak_rss, **ours.json_line()}
        r["ours_refs"] = {"wall_s": ours_refs.wall_s, "peak_rss": ours_refs.peak_rss, **ours_refs.json_line()}
        r["flink_load"] = {"wall_s": load.wall_s, "peak_rss": load.peak_rss, **load.json_line()}
        if not args.skip_oracle:
            oracle = _best([run_flink_oracle(version, path, args.heap, tmp) for _ in range(args.repeat)])
            r["flink_oracle"] = {"wall_s": oracle.wall_s, "peak_rss": oracle.peak_rss}
        results[case] = r

    print(f"\nmetadata_parse (Flink {version}; wall = whole process incl. start-up; RSS = kernel peak)")
    header = f"{'input':13} {'contestant':13} {'wall s':>8} {'peak RSS':>10} {'time ratio':>11} {'RSS ratio':>10}"
    print(header)
    print("-" * len(header))
    for case, r in results.items():
        base = r["flink_load"]
        label = f"{case}"
        for key in ("flink_load", "flink_oracle", "ours", "ours_refs"):
            if key not in r:
                continue
            m = r[key]
            tr = m["wall_s"] / base["wall_s"]
            rr = m["peak_rss"] / base["peak_rss"]
            print(f"{label:13} {key:13} {m['wall_s']:8.2f} {_gib(m['peak_rss']):>10} {tr:11.2f} {rr:10.2f}")
            label = ""
        extra = f"{_gib(r['bytes'])}, {r['operators']} operators"
        if "file_handles" in r:
            extra += f", ~{r['file_handles']:,} file handles"
        print(f"{'':13} ({extra}; ours parse-only inside the process {r['ours'].get('parse_s', 0):.2f} s, "
              f"Flink load inside the JVM {r['flink_load'].get('load_s', 0):.2f} s)")
        if "flink_oracle" in r:
            o = r["flink_oracle"]
            print(f"{'':13} vs oracle: time {r['ours']['wall_s'] / o['wall_s']:.2f}, RSS {r['ours']['peak_rss'] / o['peak_rss']:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"flink_version": version, "results": results}, indent=2))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Compaction of a ~1 GiB inline-heavy `_metadata`: wall time against a plain copy of the same file, and
peak RSS.

The input is the codec benchmark's (`bench.metadata_parse.build_inline_heavy`): the newest checkpoint of
the harness `inline_heavy` scenario (1 MiB inline threshold) with its operators replicated (new ids, the
same inline payloads) to ~--inline-gb GiB, cached under the benchmark work directory.

* baseline  - `cp` of the file to a new directory, then `sync` (what "copy it somewhere" costs on this disk);
* ours      - `statekeeper.compact.apply.compact_snapshot` into `compacted/chk-N/` (new directory, the
              default): parse, write every moved payload as a file, write and re-read the candidate,
              verify it handle by handle and every new file byte for byte, install `_metadata` last.

Each run is a fresh child process (peak RSS is the child's, kernel-accounted); the result directory is
removed between runs. Prints medians and the ratio ours / baseline, measured in the same run.

    python -m bench compact [--inline-gb 1.0] [--repeat 3] [--min-bytes 1024] [--flink-version V]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from bench._measure import Measurement, measure

REPO = Path(__file__).resolve().parents[1]
NAME = "compact"
DESCRIPTION = "compact a ~1 GiB inline-heavy _metadata: wall time vs a plain copy, peak RSS (goal <= 300 MiB)"


def _child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "include"), str(REPO)])
    return env


def _compact_child(path: str, min_bytes: int) -> int:
    """Runs in the measured child process."""
    import resource

    from statekeeper.compact.apply import SnapshotRequest, compact_snapshot
    from statekeeper.compact.plan import Placement
    from statekeeper.storage import file_io
    from statekeeper.uri import normalize_uri

    io = file_io()
    uri = normalize_uri(path)
    info = io.stat(uri)
    t = time.perf_counter()
    out = compact_snapshot(io, SnapshotRequest(uri, info.size, info.etag, Placement.NEW_DIRECTORY, min_bytes))
    print(json.dumps({"outcome": out.outcome.value, "problem": out.problem, "seconds": time.perf_counter() - t,
                      "before": out.metadata_bytes_before, "after": out.metadata_bytes_after,
                      "files": out.files_written, "moved": out.bytes_written,
                      "self_peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
    return 0 if out.problem is None else 1


def _input(args: argparse.Namespace) -> Path:
    import tests.harness as harness
    from bench.metadata_parse import BUILD_VERSION, _latest, build_inline_heavy
    from bench import cache_dir

    version = args.flink_version or harness.FLINK_VERSIONS[-1]
    seed = _latest(harness.get_fixture(version, "inline_heavy"), "A")
    target = int(args.inline_gb * 2**30)
    # A job directory of its own: the result goes to <dir>/compacted/chk-N/ beside it.
    chk = cache_dir(NAME, f"inline-{target}-v{BUILD_VERSION}-{version}") / "job" / "chk-1"
    out = chk / "_metadata"
    if not out.exists():
        chk.mkdir(parents=True, exist_ok=True)
        print(f"building {out} (~{args.inline_gb} GiB) ...", flush=True)
        print(json.dumps(build_inline_heavy(seed, target, out)), flush=True)
    return out


def _median(runs: list[Measurement]) -> float:
    bad = [r for r in runs if r.returncode != 0]
    if bad:
        raise SystemExit(f"benchmarked process failed ({bad[0].returncode}):\n{bad[0].stdout[-3000:]}\n{bad[0].stderr}")
    return statistics.median(r.wall_s for r in runs)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, prog="python -m bench compact", description=DESCRIPTION)
    ap.add_argument("--inline-gb", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (medians are reported)")
    ap.add_argument("--min-bytes", type=int, default=1024)
    ap.add_argument("--flink-version", default=None, help="default: newest harness version")
    ap.add_argument("--child", nargs=2, metavar=("PATH", "MIN_BYTES"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return _compact_child(args.child[0], int(args.child[1]))

    source = _input(args)
    job_dir = source.parent.parent
    result_dir = job_dir / "compacted"
    copy_dir = job_dir / "plain-copy"
    size = source.stat().st_size
    print(f"input: {source} ({size / 2**30:.2f} GiB)", flush=True)
    base_runs, ours_runs = [], []
    for i in range(args.repeat):
        shutil.rmtree(copy_dir, ignore_errors=True)
        copy_dir.mkdir()
        os.sync()       # neither measurement pays for dirty pages left by anything before it
        base_runs.append(measure(["sh", "-c", f"cp '{source}' '{copy_dir}/_metadata' && sync"]))
        shutil.rmtree(copy_dir, ignore_errors=True)
        shutil.rmtree(result_dir, ignore_errors=True)
        os.sync()
        ours_runs.append(measure([sys.executable, "-m", "bench.compact", "--child", str(source),
                                  str(args.min_bytes)], env=_child_env()))
        print(f"  run {i + 1}: cp+sync {base_runs[-1].wall_s:.2f} s, compaction {ours_runs[-1].wall_s:.2f} s",
              flush=True)
    shutil.rmtree(result_dir, ignore_errors=True)
    base, ours = _median(base_runs), _median(ours_runs)
    detail = ours_runs[-1].json_line()
    rss = max(r.peak_rss for r in ours_runs)
    print()
    print(f"| | wall (median of {args.repeat}) | peak RSS | ratio to the copy |")
    print("|---|---|---|---|")
    print(f"| baseline: `cp` of the {size / 2**30:.2f} GiB `_metadata` + `sync` | {base:.2f} s | "
          f"{max(r.peak_rss for r in base_runs) / 2**20:.0f} MiB | 1.00 |")
    print(f"| **compaction** (new directory, verified, `_metadata` last) | {ours:.2f} s | {rss / 2**20:.0f} MiB | "
          f"**{ours / base:.2f}** |")
    print()
    print(f"_metadata {detail['before']} -> {detail['after']} bytes ({1 - detail['after'] / detail['before']:.1%} "
          f"smaller); {detail['files']} files written ({detail['moved'] / 2**20:.0f} MiB moved); peak RSS goal "
          f"<= 300 MiB: {'met' if rss <= 300 * 2**20 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""DR follow mode behind a live Flink job, run as the `checkpoint_dr_follow` DAG runs it: a `spark-submit` of
`copy_to_dr --mode follow` every `--cadence` seconds.

A live harness job (incremental RocksDB, a checkpoint every `--interval-ms`, `--retained` kept, FIFO compaction)
is CLAIM-restored from another live job, so its closure spans two job directories, as in
tests/replicate/test_dr_follow_live.py. While it runs:

* lag: for every checkpoint the job completed during the measured window, the time until a verified copy of it
  or of a newer checkpoint had its `_metadata` at the target (`dr_copies.published_at`): what a failover at
  that moment would have lost, at most. p50, p95 and max (goal: p95 <= 10 minutes at a five-minute cadence).
* cost: each round's wall time, against an empty PySpark `spark-submit` and against the nightly DR job (index,
  chains, validate, copy, each a `spark-submit`) over the same root after the job stopped, all measured in this
  run. The cost of a round with nothing new is `python -m bench pipeline_floor --steps dr_follow_idle`.

    python -m bench dr_follow                         # five-minute cadence, 3 rounds (about 17 minutes)
    python -m bench dr_follow --cadence 60 --rounds 5 # a quicker look
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

NAME = "dr_follow"
DESCRIPTION = ("follow mode behind a live Flink job at the DAG's cadence: lag to a verified copy, cost per round "
               "vs the nightly DR job and an empty spark-submit")
REPO = Path(__file__).resolve().parents[1]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


class Completions:
    """The job's completed checkpoints (id -> `_metadata` mtime), polled from its directory every 0.5 s: with
    30 retained at one a second, none is subsumed before it is seen."""

    def __init__(self, job_dir: Path) -> None:
        self.job_dir = job_dir
        self.seen: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True, name="completions")
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            for meta in self.job_dir.glob("chk-*/_metadata"):
                cid = int(meta.parent.name[4:])
                if cid not in self.seen:
                    try:
                        self.seen[cid] = meta.stat().st_mtime
                    except FileNotFoundError:
                        pass
            self._stop.wait(0.5)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _published(warehouse: Path, job_dir: str) -> list[tuple[float, float]]:
    """(source_completed_at, published_at) of the job's verified copies, as epoch seconds."""
    from deltalake import DeltaTable

    rows = DeltaTable(str(warehouse / "dr_copies")).to_pyarrow_table().to_pylist()
    return sorted((r["source_completed_at"].timestamp(), r["published_at"].timestamp()) for r in rows
                  if r["job_dir"] == job_dir and r["status"] == "verified" and r["published_at"] is not None)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m bench dr_follow", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cadence", type=float, default=300.0, help="seconds between round starts (the DAG's: 300)")
    p.add_argument("--rounds", type=int, default=3, help="follow rounds to measure")
    p.add_argument("--interval-ms", type=int, default=1000, help="the live job's checkpoint interval")
    p.add_argument("--retained", type=int, default=30, help="the live job's num-retained")
    p.add_argument("--checkout", type=Path, default=REPO, help="run the jobs of this checkout")
    args = p.parse_args(argv)
    checkout = args.checkout.resolve()
    work = Path(tempfile.mkdtemp(prefix="statekeeper-bench-follow-"))
    try:
        return _run(args, checkout, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(args: argparse.Namespace, checkout: Path, work: Path) -> int:
    import tests.harness as harness
    from bench.pipeline_floor import Figures, Submitter, _step_args

    version = harness.FLINK_VERSIONS[-1]
    live = {"interval_ms": args.interval_ms, "retained": args.retained, "compaction_style": "FIFO"}
    root = work / "checkpoints"
    warehouse = work / "warehouse"
    sub = Submitter(checkout, work)
    empty, rounds, nightly = Figures(), Figures(), {}
    print(f"jobs of {checkout}; Flink {version}; a round every {args.cadence:.0f}s, {args.rounds} round(s); "
          f"work dir {work}", flush=True)
    sub.run(sub.empty, [], Figures(), "warm-up", dag_settings=False)
    for _ in range(3):
        sub.run(sub.empty, [], empty, "empty", dag_settings=False)
    with harness.start_job(version, root, params=live) as parent:
        time.sleep(3)
        parent_stats = parent.stop()
    entry, job_args = _step_args("index_first", [root.as_uri()], warehouse)
    sub.run(checkout / "spark_jobs" / f"{entry}.py", job_args, Figures(), "index")   # where rounds find the roots
    follow = ["--warehouse", str(warehouse), "--mode", "follow", "--target", str(work / "dr"),
              "--allowed-targets", str(work / "dr")]
    with harness.start_job(version, root, restore_from=parent_stats.newest_checkpoint, params=live,
                           seconds_max=args.cadence * (args.rounds + 1) + 600) as job:
        seen = Completions(job.job_dir)
        began = time.time()
        for n in range(args.rounds):
            time.sleep(max(0.0, began + n * args.cadence - time.time()))
            sub.run(checkout / "spark_jobs" / "copy_to_dr.py", [*follow, "--run-id", f"follow-{n}"], rounds,
                    "follow")
            print(f"  round {n + 1}/{args.rounds}: {rounds.walls[-1]:.1f}s", flush=True)
        ended = time.time()
        seen.stop()
        stats = job.stop()
    published = _published(warehouse, job.job_dir.name)
    window = {cid: t for cid, t in seen.seen.items() if began <= t <= ended}
    lags, missed = [], 0
    for t in window.values():
        after = [pub for completed, pub in published if completed >= t - 1e-3]
        if after:
            lags.append(min(after) - t)
        else:
            missed += 1     # completed after the last round's look: the next round would copy it

    # the nightly DR job over the same root, as the maintenance DAG runs it
    night = work / "nightly-warehouse"
    for step in ("index_first", "chains", "validate_no_suite", "dr_copy"):
        entry, job_args = _step_args(step, [root.as_uri()], night)
        figures = nightly.setdefault(step, Figures())
        sub.run(checkout / "spark_jobs" / f"{entry}.py", job_args, figures, step)

    base = statistics.median(empty.walls)
    round_s = statistics.median(rounds.walls)
    nightly_s = sum(f.median() for f in nightly.values())
    print(f"\nthe live job: {stats.completed} checkpoints, {stats.failed} failed; {len(published)} verified "
          f"cop(ies) published by {len(rounds.walls)} round(s)")
    if lags:
        print(f"lag from completion to a verified copy of it or a newer checkpoint, over {len(lags)} checkpoints "
              f"completed in the window: p50 {_percentile(lags, 0.5):.0f}s, p95 {_percentile(lags, 0.95):.0f}s, "
              f"max {max(lags):.0f}s (goal: p95 <= 600s at a 300s cadence); {missed} completed after the last "
              "round's look")
    print(f"empty PySpark spark-submit: median {base:.1f}s")
    print(f"a follow round (copying): median {round_s:.1f}s = {round_s / base:.2f}x the empty job, "
          f"{round_s / nightly_s:.2f}x the nightly DR job ({nightly_s:.1f}s: "
          + ", ".join(f"{k} {f.median():.1f}s" for k, f in nightly.items()) + ")")
    print("the rounds ran beside the live job on the same machine, the nightly job after it stopped; "
          f"measured at {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC")
    return 0

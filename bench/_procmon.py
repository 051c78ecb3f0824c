"""Wall time and peak memory of a spark-submit process tree, split by role, sampled from /proc.

A kernel peak (RUSAGE_CHILDREN, bench/_measure.py) reports only the largest single process; a
Spark run is several: the JVM (driver, and in local mode the executor too), the Python driver
(the application script, a child of the JVM) and the Python workers the executor forks from
pyspark.daemon for tasks and for Python data sources. The tree is sampled every `interval`
seconds, so a peak shorter than that can be missed (fine for the minutes-long runs measured here).

Worker memory is the peak of the SUM over concurrently alive workers, counted as PSS: forked
workers share the daemon's pages copy-on-write, and summing their RSS would count those pages
once per worker.
"""
from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil


@dataclass
class TreeRun:
    returncode: int
    wall_s: float
    jvm_peak: int = 0            # bytes, RSS of the JVM(s)
    driver_peak: int = 0         # bytes, RSS of the Python driver (the application script)
    workers_peak: int = 0        # bytes, peak of the summed PSS of all Python workers
    worker_max: int = 0          # bytes, largest RSS of any one Python worker
    workers_max_alive: int = 0
    samples: int = 0


def _role(proc: psutil.Process, script: str) -> str | None:
    try:
        cmd = proc.cmdline()
        name = proc.name()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    if name == "java" or (cmd and cmd[0].endswith("/java")):
        return "jvm"
    if "python" in name or (cmd and "python" in Path(cmd[0]).name):
        return "driver" if any(script in c for c in cmd) else "worker"
    return None   # the spark-submit shell wrappers


def run_tree(argv: list[str], *, script: str, env: dict, log: Path, interval: float = 0.2,
             timeout: float = 7200) -> TreeRun:
    """Run `argv` (stdout and stderr to `log`) and sample its process tree until it exits."""
    with open(log, "wb") as out:
        t = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        root = psutil.Process(proc.pid)
        run = TreeRun(returncode=0, wall_s=0.0)
        roles: dict[int, str | None] = {}
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                try:
                    tree = [root, *root.children(recursive=True)]
                except psutil.NoSuchProcess:
                    return
                jvm = driver = workers = alive = 0
                for p in tree:
                    # spark-submit execs its way from shell scripts to the JVM under one pid, so
                    # a pid is classified again until it shows a role.
                    role = roles.get(p.pid)
                    if role is None:
                        role = roles[p.pid] = _role(p, script)
                    try:
                        if role == "worker":
                            info = p.memory_full_info()
                            workers += info.pss
                            run.worker_max = max(run.worker_max, info.rss)
                            alive += 1
                        elif role == "jvm":
                            jvm += p.memory_info().rss
                        elif role == "driver":
                            driver += p.memory_info().rss
                    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                        continue
                run.jvm_peak = max(run.jvm_peak, jvm)
                run.driver_peak = max(run.driver_peak, driver)
                run.workers_peak = max(run.workers_peak, workers)
                run.workers_max_alive = max(run.workers_max_alive, alive)
                run.samples += 1
                stop.wait(interval)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            run.returncode = proc.wait(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()   # the process we started, by its id
                proc.wait()
            run.wall_s = time.perf_counter() - t
            stop.set()
            sampler.join()
    return run

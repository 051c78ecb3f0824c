"""Wall time, CPU time and peak RSS of one child process, measured exactly.

The command runs under a fresh Python wrapper whose only child it is, so the wrapper's
RUSAGE_CHILDREN.ru_maxrss is that command's peak resident set (kernel-accounted, no polling), and its
user + system time the CPU of the command and every descendant that was waited for (a spark-submit's
JVM, its Python driver and the Python workers).
"""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

_WRAPPER = (
    "import json, resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "wall = time.perf_counter() - t\n"
    "ru = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "rss, cpu = ru.ru_maxrss * 1024, ru.ru_utime + ru.ru_stime\n"
    "print(json.dumps({'returncode': p.returncode, 'wall_s': wall, 'peak_rss': rss, 'cpu_s': cpu,\n"
    "                  'stdout': p.stdout[-20000:], 'stderr': p.stderr[-4000:]}))\n"
)


@dataclass(frozen=True)
class Measurement:
    returncode: int
    wall_s: float
    peak_rss: int  # bytes
    stdout: str
    stderr: str
    cpu_s: float   # user + system of the command and its waited-for descendants

    def json_line(self) -> dict:
        """The last stdout line of the command, parsed as JSON (benchmarked programs report so)."""
        lines = [ln for ln in self.stdout.splitlines() if ln.strip().startswith("{")]
        return json.loads(lines[-1]) if lines else {}


def measure(argv: list[str], *, env: dict | None = None, timeout: float = 3600) -> Measurement:
    out = subprocess.run([sys.executable, "-c", _WRAPPER, *argv], capture_output=True, text=True,
                         env=env, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"measurement wrapper failed: {out.stderr[-2000:]}")
    d = json.loads(out.stdout.strip().splitlines()[-1])
    return Measurement(d["returncode"], d["wall_s"], d["peak_rss"], d["stdout"], d["stderr"], d["cpu_s"])

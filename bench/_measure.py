"""Wall time and peak RSS of one child process, measured exactly.

The command runs under a fresh Python wrapper whose only child it is, so the wrapper's
RUSAGE_CHILDREN.ru_maxrss is that command's peak resident set (kernel-accounted, no polling).
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
    "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024\n"
    "print(json.dumps({'returncode': p.returncode, 'wall_s': wall, 'peak_rss': rss,\n"
    "                  'stdout': p.stdout[-20000:], 'stderr': p.stderr[-4000:]}))\n"
)


@dataclass(frozen=True)
class Measurement:
    returncode: int
    wall_s: float
    peak_rss: int  # bytes
    stdout: str
    stderr: str

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
    return Measurement(d["returncode"], d["wall_s"], d["peak_rss"], d["stdout"], d["stderr"])

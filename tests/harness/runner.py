"""Running the harness's Java entry points as subprocesses (one JVM per call)."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.harness.flink import java_command


class HarnessRunError(RuntimeError):
    """A harness JVM failed (generation) or could not run at all."""


@dataclass(frozen=True)
class JavaRun:
    returncode: int
    output: str   # stdout + stderr, interleaved


def run_java(version: str, main_class: str, args: list[str], timeout: float, log: Path | None = None,
             jvm_opts: tuple[str, ...] = ()) -> JavaRun:
    cmd = java_command(version, f"statekeeper.harness.{main_class}", *args, jvm_opts=jvm_opts)
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        if log is not None:
            log.write_text(output)
        return JavaRun(returncode=-9, output=output + f"\n[harness] killed after {timeout:.0f} s timeout\n")
    if log is not None:
        log.write_text(proc.stdout)
    return JavaRun(returncode=proc.returncode, output=proc.stdout)


def tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])

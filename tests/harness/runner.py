"""Running the harness's Java entry points as subprocesses (one JVM per call)."""
from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.harness._fs import cache_root
from tests.harness.flink import class_sharing, java_command


class HarnessRunError(RuntimeError):
    """A harness JVM failed (generation) or could not run at all."""


@dataclass(frozen=True)
class JavaRun:
    returncode: int
    output: str   # stdout + stderr, interleaved


def jvm_tmpdir_opt(directory: Path) -> str:
    """The JVM option giving a harness JVM its own temporary directory.

    Flink's MiniCluster unpacks its RPC system (`flink-rpc-akka*.jar`, 24 MB) and keeps `minicluster_*`
    under `java.io.tmpdir` and never removes them: with /tmp as the default, a full test run left
    ~1,000 of them (22 GB) behind and filled the disk mid-run.
    """
    return f"-Djava.io.tmpdir={directory}"


def run_java(version: str, main_class: str, args: list[str], timeout: float, log: Path | None = None,
             jvm_opts: tuple[str, ...] = (), env: dict[str, str] | None = None) -> JavaRun:
    """Run `main_class`; `env`: variables added to this process's environment (the S3 connection: never argv)."""
    parent = cache_root() / "tmp"
    parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="jvm-", dir=parent, ignore_cleanup_errors=True) as jvm_tmp:
        # The oracle only reads _metadata: an archive of its classes would leave out most of a restore's.
        sharing = class_sharing(version, write=main_class != "Oracle")
        cmd = java_command(version, f"statekeeper.harness.{main_class}", *args,
                           jvm_opts=(jvm_tmpdir_opt(Path(jvm_tmp)), *jvm_opts), sharing=sharing)
        try:
            run = _run(cmd, timeout, log, {**os.environ, **env} if env else None)
            if run.returncode == 0:
                sharing.publish()
            return run
        finally:   # a no-op after a publish; otherwise (a failed, killed or interrupted JVM) its partial archive goes
            sharing.discard()


def _run(cmd: list[str], timeout: float, log: Path | None, env: dict[str, str] | None = None) -> JavaRun:
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout, env=env)
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

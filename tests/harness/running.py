"""A real Flink job checkpointing in the background while the test works on its checkpoint root.

`start_job` launches `RunJob` (one JVM with its own MiniCluster) running the `incremental`
scenario's job A (the job `verify_restore` understands), changed only in what a live run needs:
a checkpoint every 200 ms, one retained checkpoint (so Flink subsumes, and deletes, continuously),
failed checkpoints tolerated and counted instead of failing the job. It returns once the first
checkpoint is complete on disk; `RunningJob.stop()` reads Flink's checkpoint statistics, cancels
the job (its newest checkpoint is retained) and returns them as `RunStats`.

`checkpoint_root` is a local directory, or an `s3://bucket/prefix` URI with `s3=` the server's endpoint and keys:
Flink then writes there itself through its S3 filesystem plugin (s3_plugin.py), and `job_dir` and
`newest_checkpoint` are `s3://` URIs (str) instead of Paths.

Nothing but Flink writes under `checkpoint_root`: the plan, the stop file, the result and the JVM
log live in a private work directory under `$STATEKEEPER_CACHE/tmp/run-*`, removed on stop.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.harness import scenarios
from tests.harness._fs import cache_root
from tests.harness.flink import class_sharing, java_command
from tests.harness.runner import HarnessRunError, jvm_tmpdir_opt, tail
from tests.harness.s3_plugin import S3Endpoint

# What the live job changes in the scenario's job spec (JobSpec keys). The payload size, key count
# and parallelism stay those of `incremental`, so verify_restore(version, chk) checks its state.
LIVE_JOB_PARAMS = {"interval_ms": 200, "retained": 1}
# Extra Flink options (on top of JobSpec's): none needed, see README ("Live jobs") for the numbers.
LIVE_FLINK_OPTIONS: dict[str, str] = {}


@dataclass(frozen=True)
class RunStats:
    """Flink's checkpoint statistics of a stopped live job (read just before it was cancelled)."""
    job_id: str
    job_dir: Path | str             # str: an s3:// URI (a job on S3)
    completed: int                  # CheckpointStatsCounts.getNumberOfCompletedCheckpoints()
    failed: int                     # ... getNumberOfFailedCheckpoints() since start_job returned:
                                    # declined, expired, I/O errors, failed triggers alike
    failure_reasons: list[str]      # "chk-<id>: <Flink's failure message>" per failed checkpoint
    failed_before_start: int        # failures before the first checkpoint (a trigger that found the
                                    # tasks still deploying); not in `failed`
    newest_checkpoint: Path | str | None  # highest chk-N with _metadata after the cancellation (str on S3)
    stopped_by: str                 # "stop_file" (stop()), "time_limit" (seconds_max) or "job_ended"
    job_failure: str | None         # why the job ended by itself (stopped_by == "job_ended")
    raw: dict = field(repr=False)   # the whole result.json (latest_completed_id, notified_checkpoints, ...)
    output: str = field(repr=False, default="")   # the JVM's log

    @property
    def ok(self) -> bool:
        """Ran until stopped, no checkpoint failed, a checkpoint is retained."""
        return (self.stopped_by == "stop_file" and self.job_failure is None and self.failed == 0
                and self.newest_checkpoint is not None)


class RunningJob:
    """A live job started by `start_job`. Use `stop()` (or the `with` form, which always ends the JVM)."""

    def __init__(self, version: str, checkpoint_root: Path | str, work: Path, proc: subprocess.Popen,
                 log: Path, job_id: str, job_dir: Path | str, started_after_s: float):
        self.version = version
        self.checkpoint_root = checkpoint_root
        self.job_id = job_id
        self.job_dir = job_dir
        self.started_after_s = started_after_s   # seconds start_job took (JVM start to first checkpoint)
        self._work = work
        self._proc = proc
        self._log = log
        self._stats: RunStats | None = None
        self._killed = False

    @property
    def pid(self) -> int:
        return self._proc.pid

    def running(self) -> bool:
        return self._proc.poll() is None

    def output(self) -> str:
        """The JVM's log so far."""
        try:
            return self._log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 120) -> RunStats:
        """Record the checkpoint statistics, cancel the job (keeping its newest checkpoint), wait for
        the JVM. Idempotent. Raises HarnessRunError if the JVM does not finish within `timeout` (it
        is killed) or fails without a result."""
        if self._stats is not None:
            return self._stats
        if self._killed:
            raise HarnessRunError("RunJob was killed: no statistics")
        try:
            (self._work / "STOP").write_text("stop\n")
            try:
                self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                output = self.output()
                self.kill()
                raise HarnessRunError(f"RunJob did not stop within {timeout:.0f} s (killed):\n{tail(output)}")
            output = self.output()
            result_file = self._work / "result.json"
            result = json.loads(result_file.read_text()) if result_file.is_file() else None
            if self._proc.returncode != 0 or result is None or result.get("harness_error"):
                raise HarnessRunError(f"RunJob exited {self._proc.returncode} without a result:\n{tail(output)}")
            newest = result.get("newest_checkpoint")
            self._stats = RunStats(
                job_id=result["job_id"], job_dir=_path(result["job_dir"]), completed=int(result["completed"]),
                failed=int(result["failed"]), failure_reasons=list(result["failure_reasons"]),
                failed_before_start=int(result["failed_before_start"]),
                newest_checkpoint=_path(newest) if newest else None, stopped_by=result["stopped_by"],
                job_failure=result.get("job_failure"), raw=result, output=output)
            return self._stats
        finally:
            if self._proc.poll() is not None:
                shutil.rmtree(self._work, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL the JVM's process group (no statistics; the checkpoint directory stays as it is)."""
        if self._stats is None:
            self._killed = True
        if self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait()
        shutil.rmtree(self._work, ignore_errors=True)

    def __enter__(self) -> "RunningJob":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.stop()           # errors of a clean stop propagate
        else:
            self.kill()           # the body's exception is what matters


def _path(text: str) -> Path | str:
    """A path the JVM reported: a local one as a Path, a URI (s3://) as it is."""
    return text if is_remote(text) else Path(text)


def is_remote(path: Path | str) -> bool:
    return "://" in str(path) and not str(path).startswith("file:")


def start_job(version: str, checkpoint_root: Path | str, *, seconds_max: float = 300, startup_timeout: float = 180,
              scenario: str = "incremental", job: str = "A", jvm_opts: tuple[str, ...] = (),
              restore_from: Path | str | None = None, claim_mode: str = "CLAIM",
              params: dict[str, object] | None = None, s3: S3Endpoint | None = None) -> RunningJob:
    """Start `scenario`'s job (default `incremental` A) with Flink `version`, checkpointing into
    `checkpoint_root/<job-id>/` every 200 ms with one retained checkpoint; return once its first
    checkpoint is complete (`chk-N/_metadata` exists). The JVM stops by itself after `seconds_max`
    (stop() then reports stopped_by == "time_limit"). Raises HarnessRunError if the job does not
    get there within `startup_timeout` (the JVM is killed).

    `restore_from`: a retained checkpoint directory (e.g. an earlier live job's newest, kept on stop) the job
    starts from in `claim_mode`; in CLAIM mode its incremental checkpoints then use that job's `shared/`
    files (FLINK-24149). `params`: JobSpec keys over LIVE_JOB_PARAMS (e.g. interval_ms, retained). `s3`: the S3
    server an `s3://` checkpoint root (or `restore_from`) lives on."""
    if is_remote(checkpoint_root) or (restore_from is not None and is_remote(restore_from)):
        if s3 is None:
            raise ValueError(f"{checkpoint_root}: an s3:// checkpoint root needs s3= (the server's endpoint and keys)")
        checkpoint_root = str(checkpoint_root).rstrip("/")
    else:
        checkpoint_root = Path(checkpoint_root).absolute()
        checkpoint_root.mkdir(parents=True, exist_ok=True)
    plan = scenarios.PLANS[scenario]
    job_plan = plan.job(job)
    job_plan = scenarios.JobPlan(job_plan.name, {**job_plan.params, **LIVE_JOB_PARAMS, **(params or {})})
    tmp_parent = cache_root() / "tmp"
    tmp_parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="run-", dir=tmp_parent))
    plan_file = work / "plan.properties"
    lines = scenarios.job_properties(job_plan)
    lines += [f"flink.{key}={value}" for key, value in LIVE_FLINK_OPTIONS.items()]
    if restore_from is not None:
        restore = str(restore_from) if is_remote(restore_from) else str(Path(restore_from).absolute())
        lines += [f"{job_plan.name}.restore={scenarios.escape(restore)}",
                  f"{job_plan.name}.claim_mode={claim_mode}"]
    plan_file.write_text("\n".join(lines) + "\n")
    (work / "jvm-tmp").mkdir()
    cmd = java_command(version, "statekeeper.harness.RunJob", str(plan_file), job_plan.name,
                       str(checkpoint_root), str(work), str(seconds_max),
                       jvm_opts=(jvm_tmpdir_opt(work / "jvm-tmp"), *jvm_opts),
                       # Killed mid-run by design: it maps an archive a restore wrote, never writes one.
                       sharing=class_sharing(version, write=False))
    log = work / "runjob.log"
    # The S3 connection in the environment, never on the argv (S3Plugins.java reads it).
    env = {**os.environ, **s3.environment(version)} if s3 is not None else None
    t0 = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env)
    marker = work / "started.json"
    try:
        while not marker.is_file():
            if proc.poll() is not None:
                raise HarnessRunError(f"RunJob exited {proc.returncode} before its first checkpoint:\n"
                                      f"{tail(log.read_text(errors='replace'))}")
            if time.monotonic() - t0 > startup_timeout:
                raise HarnessRunError(f"RunJob: no checkpoint within {startup_timeout:.0f} s:\n"
                                      f"{tail(log.read_text(errors='replace'))}")
            time.sleep(0.1)
        started = json.loads(marker.read_text())
    except BaseException:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)
        raise
    return RunningJob(version, checkpoint_root, work, proc, log, started["job_id"], _path(started["job_dir"]),
                      time.monotonic() - t0)

"""Restore verifier: does Flink restore this snapshot directory with exactly the right state?"""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.harness import scenarios
from tests.harness._fs import cache_root
from tests.harness.runner import run_java


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    returncode: int
    output: str


def verify_restore(version: str, snapshot_dir: Path, scenario: str = "incremental", timeout: float = 300,
                   job: str | None = None) -> VerifyResult:
    """Restore the deterministic job of `scenario` (its `verify_job`, or `job`) from `snapshot_dir`.

    Always NO_CLAIM, into a fresh temporary checkpoint directory that is deleted afterwards, so
    the snapshot is never modified. `ok` only if the job restored, every invariant held and one
    new checkpoint completed.
    """
    plan = scenarios.PLANS[scenario]
    job_plan = plan.job(job or plan.verify_job)
    snapshot = Path(snapshot_dir).absolute()
    tmp_parent = cache_root() / "tmp"
    tmp_parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="verify-", dir=tmp_parent))
    try:
        plan_file = work / "plan.properties"
        plan_file.write_text("\n".join(scenarios.job_properties(job_plan)) + "\n")
        run = run_java(version, "Verify", [str(plan_file), job_plan.name, str(snapshot), str(work / "checkpoints")],
                       timeout=timeout)
        return VerifyResult(ok=run.returncode == 0, returncode=run.returncode, output=run.output)
    finally:
        shutil.rmtree(work, ignore_errors=True)

"""Restore verifier: does Flink restore this snapshot directory with exactly the right state?"""
from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.harness import scenarios
from tests.harness._fs import cache_root
from tests.harness.runner import run_java, tail
from tests.harness.running import is_remote
from tests.harness.s3_plugin import S3Endpoint


# Plan params that are Flink options (ExtraOptions.java): `flink.` for the job and its restores,
# `verify.flink.` for the verifier's restores only.
_OPTION_PREFIXES = ("flink.", "verify.flink.")


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    returncode: int
    output: str


@dataclass(frozen=True)
class VerifyCase:
    """One snapshot for `verify_restore_many`: restore `scenario`'s `job` (None: its verify_job)."""
    snapshot_dir: Path | str          # str: an s3:// URI (verify_restore_many with s3=)
    scenario: str = "incremental"
    job: str | None = None


def verify_restore(version: str, snapshot_dir: Path, scenario: str = "incremental", timeout: float = 300,
                   job: str | None = None) -> VerifyResult:
    """Restore the deterministic job of `scenario` (its `verify_job`, or `job`) from `snapshot_dir`.

    Always NO_CLAIM, into a fresh temporary checkpoint directory that is deleted afterwards, so
    the snapshot is never modified. `ok` only if the job restored, every invariant held and one
    new checkpoint completed.
    """
    plan = scenarios.PLANS[scenario]
    job_plan = plan.job(job or plan.verify_job)
    if any(key.startswith(_OPTION_PREFIXES) for key in job_plan.spec()):
        # Flink options beyond JobSpec's (ForSt, changelog): only VerifyMany applies them.
        return verify_restore_many(version, [VerifyCase(Path(snapshot_dir), scenario, job)], timeout=timeout)[0]
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


def verify_restore_many(version: str, cases: Sequence[VerifyCase | tuple[Path | str, str, str | None]],
                        timeout: float | None = None, s3: S3Endpoint | None = None) -> list[VerifyResult]:
    """`verify_restore` for many snapshots in ONE JVM (`VerifyMany`); results in input order.

    A case is a `VerifyCase` or a tuple `(snapshot_dir, scenario, job)` (job None: the scenario's
    `verify_job`). Each case runs exactly as `verify_restore` runs it (NO_CLAIM, its own fresh
    temporary checkpoint directory, one new checkpoint, the same verdict rules), one after another;
    a failing case does not stop the others. `output` is the case's `[verify] OK: ...` /
    `[verify] FAIL: ...` line, followed on failure by the tail of the JVM log of that case (or of
    the whole run if the JVM died before the case's verdict). `returncode` is 0 (OK), 1 (FAIL) or
    the JVM's exit code for a case without verdict (-9: killed at `timeout`, default 120 s + 180 s
    per case). Snapshots are never modified; all temporary directories are deleted afterwards.
    With `s3` (the server's endpoint and keys), a snapshot may be an `s3://` URI: Flink reads it through its S3
    filesystem plugin (s3_plugin.py), as a job restoring from that bucket would.
    """
    normalized = [c if isinstance(c, VerifyCase) else VerifyCase(_snapshot(c[0]), c[1], c[2]) for c in cases]
    if not normalized:
        return []
    for case in normalized:   # unknown scenario/job: fail here, before any JVM starts
        scenarios.PLANS[case.scenario].job(case.job or scenarios.PLANS[case.scenario].verify_job)
    tmp_parent = cache_root() / "tmp"
    tmp_parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="verify-", dir=tmp_parent))
    try:
        plan_files: dict[tuple[str, str], Path] = {}
        rows = []
        for i, case in enumerate(normalized):
            plan = scenarios.PLANS[case.scenario]
            job_plan = plan.job(case.job or plan.verify_job)
            key = (case.scenario, job_plan.name)
            if key not in plan_files:
                plan_files[key] = work / f"plan-{len(plan_files)}.properties"
                plan_files[key].write_text("\n".join(scenarios.job_properties(job_plan)) + "\n")
            snapshot = str(case.snapshot_dir) if is_remote(case.snapshot_dir) \
                else str(Path(case.snapshot_dir).absolute())
            if is_remote(snapshot) and s3 is None:
                raise ValueError(f"verify_restore_many: {snapshot} needs s3= (the server's endpoint and keys)")
            fields = [str(i), str(plan_files[key]), job_plan.name, snapshot,
                      str(work / f"case-{i}" / "checkpoints")]
            if any("\t" in f or "\n" in f for f in fields):
                raise ValueError(f"verify_restore_many: tab or newline in a path of case {i}: {fields}")
            rows.append("\t".join(fields))
        cases_file = work / "cases.tsv"
        results_file = work / "results.jsonl"
        cases_file.write_text("\n".join(rows) + "\n")
        run = run_java(version, "VerifyMany", [str(cases_file), str(results_file)],
                       timeout=timeout if timeout is not None else 120 + 180 * len(normalized),
                       env=s3.environment(version) if s3 is not None else None)
        verdicts = {}
        if results_file.exists():
            for line in results_file.read_text().splitlines():
                if line.strip():
                    r = json.loads(line)
                    verdicts[r["id"]] = r
        logs = _case_logs(run.output)
        results = []
        for i in range(len(normalized)):
            r = verdicts.get(str(i))
            if r is None:
                results.append(VerifyResult(
                    ok=False, returncode=run.returncode if run.returncode != 0 else 1,
                    output=f"[verify] FAIL: no verdict: VerifyMany exited {run.returncode} before case {i} "
                           f"finished\n{tail(run.output)}"))
            elif r["ok"]:
                results.append(VerifyResult(ok=True, returncode=0, output=f"[verify] {r['verdict']}"))
            else:
                results.append(VerifyResult(ok=False, returncode=1,
                                            output=f"[verify] {r['verdict']}\n{tail(logs.get(str(i), ''))}"))
        return results
    finally:
        shutil.rmtree(work, ignore_errors=True)


_CASE_MARK = "[verify-many] case "


def _snapshot(path: Path | str) -> Path | str:
    return str(path) if is_remote(path) else Path(path)


def _case_logs(output: str) -> dict[str, str]:
    """JVM output split per case: everything after the previous case's verdict line up to and
    including this case's (`[verify-many] case <id> ...`)."""
    logs: dict[str, str] = {}
    chunk: list[str] = []
    for line in output.splitlines():
        chunk.append(line)
        if line.startswith(_CASE_MARK):
            case_id = line[len(_CASE_MARK):].split(" ", 1)[0]
            logs[case_id] = "\n".join(chunk)
            chunk = []
    return logs

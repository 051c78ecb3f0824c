"""Scenario plans: which jobs run, with which state backend and checkpointing options.

Pure data. Each job's `params` are the keys of the Java `JobSpec` (see JobSpec.java); a plan is
written as `<job>.<key>=<value>` properties for the generator. Changing anything here changes the
fixture hash, so cached stores are regenerated.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

# Defaults shared by every job: incremental RocksDB at parallelism 4, 2000 elements/s over 256
# keys, a checkpoint every 800 ms (a job runs ~5-8 s and writes a few MB).
BASE_PARAMS: Mapping[str, object] = MappingProxyType({
    "backend": "rocksdb",
    "incremental": True,
    "parallelism": 4,
    "checkpoints": 4,
    "retained": 3,
    "interval_ms": 800,
    "rate": 2000,
    "keys": 256,
    "payload_bytes": 48,
})


@dataclass(frozen=True)
class JobPlan:
    name: str                       # logical name in the manifest: A, B, C, ...
    params: Mapping[str, object] = field(default_factory=dict)
    restore_from: str | None = None  # logical name of an earlier job: restore its newest checkpoint
    claim_mode: str | None = None   # CLAIM | NO_CLAIM | LEGACY (with restore_from)

    def spec(self) -> dict[str, object]:
        merged = dict(BASE_PARAMS)
        merged.update(self.params)
        return merged


@dataclass(frozen=True)
class ScenarioPlan:
    name: str
    jobs: tuple[JobPlan, ...]
    min_flink: tuple[int, int] = (1, 0)
    leftovers: bool = False         # plant a failed checkpoint dir and orphan files afterwards
    verify_job: str = "A"           # whose configuration verify_restore() uses by default
    store_dir: str | None = None    # store root = this subdirectory of the fixture dir (placed.py)
    dedicated: bool = False         # only its own tests use it: not in harness.scenarios_for()

    def job(self, name: str) -> JobPlan:
        for job in self.jobs:
            if job.name == name:
                return job
        raise KeyError(f"scenario {self.name} has no job {name!r}")

    def fingerprint(self) -> dict:
        fp = {
            "name": self.name,
            "min_flink": list(self.min_flink),
            "leftovers": self.leftovers,
            "verify_job": self.verify_job,
            "jobs": [{"name": j.name, "spec": j.spec(), "restore_from": j.restore_from,
                      "claim_mode": j.claim_mode} for j in self.jobs],
        }
        if self.store_dir is not None:
            # Only when set: the fingerprints (so the fixture hashes) of the other plans stay as before.
            from tests.harness import placed
            fp["store_dir"] = self.store_dir
            fp["placement"] = placed.fingerprint()
        return fp


def _chain(claim: str) -> tuple[JobPlan, ...]:
    # Restored jobs take 2 checkpoints with 3 retained: in CLAIM mode the restored checkpoint then
    # stays in the retained set, so every file any _metadata names still exists (a consistent
    # store). RocksDB compaction is off in chains: with it, a restored DB that already holds 4+
    # L0 files compacts them at open and the new job stops referencing its parent's SSTs; without
    # it, B and C really reference files in A's shared/ (and C in B's).
    restored = {"checkpoints": 2, "compaction_style": "NONE"}
    jobs = [JobPlan("A", {"checkpoints": 4, "compaction_style": "NONE"}),
            JobPlan("B", restored, restore_from="A", claim_mode=claim)]
    if claim == "CLAIM":
        jobs.append(JobPlan("B_legacy", restored, restore_from="A", claim_mode="LEGACY"))
    jobs.append(JobPlan("C", restored, restore_from="B", claim_mode=claim))
    return tuple(jobs)


_PLANS: tuple[ScenarioPlan, ...] = (
    # Subsumption happens (5 completed, 3 retained): chk-1/2 and their unshared files are gone.
    ScenarioPlan("incremental", (JobPlan("A", {"checkpoints": 5}),)),
    ScenarioPlan("chain_claim", _chain("CLAIM")),
    ScenarioPlan("chain_noclaim", _chain("NO_CLAIM")),
    ScenarioPlan("inline_heavy", (
        JobPlan("A", {"parallelism": 16, "inline_threshold": 1 << 20, "checkpoints": 3}),
        JobPlan("B", {"parallelism": 16, "inline_threshold": 0, "checkpoints": 3}),
    )),
    ScenarioPlan("hashmap_full", (JobPlan("A", {"backend": "hashmap", "incremental": False}),)),
    ScenarioPlan("savepoints", (JobPlan("A", {"checkpoints": 3, "savepoints": "CANONICAL,NATIVE"}),)),
    ScenarioPlan("file_merging", (JobPlan("A", {"file_merging": True}),), min_flink=(1, 20)),
    # Back-pressure (slow tally behind a rebalance) so unaligned barriers overtake buffered data;
    # full (non-incremental) RocksDB snapshots for variety: everything exclusive, relative.
    ScenarioPlan("unaligned", (JobPlan("A", {
        "incremental": False, "unaligned": True, "rebalance_tally": True, "tally_parallelism": 2,
        "tally_sleep_micros": 1000, "rate": 5000, "buffer_timeout_ms": 5}),)),
    ScenarioPlan("failed_and_orphans", (JobPlan("A"),), leftovers=True),
    # chain_claim's A -> B (CLAIM) with the whole store inside a directory whose name has a space,
    # a percent sign before two hex digits and a plus: Flink writes and records such paths verbatim
    # (`odd dir%41+x`, never `odd dirA+x`). B references A's shared/ files under that directory.
    # Dedicated (tests/index/test_odd_paths_flink.py), newest Flink only: the per-scenario tests that index
    # every scenario of a version in one run would all fail while file: paths are percent-decoded.
    ScenarioPlan("odd_path", _chain("CLAIM")[:2], min_flink=(2, 3), store_dir="odd dir%41+x", dedicated=True),
    # `incremental` at the largest inline threshold (1 MiB): small SSTs, RocksDB meta and operator state
    # all land inside `_metadata`, beside shared SSTs by absolute path. Dedicated (tests/compact/).
    ScenarioPlan("incremental_inline", (JobPlan("A", {"checkpoints": 5, "inline_threshold": 1 << 20}),),
                 dedicated=True),
)

PLANS: Mapping[str, ScenarioPlan] = MappingProxyType({p.name: p for p in _PLANS})
SCENARIOS: list[str] = [p.name for p in _PLANS if not p.dedicated]       # what the generic tests iterate
DEDICATED_SCENARIOS: list[str] = [p.name for p in _PLANS if p.dedicated]


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:3])


def scenarios_for(version: str, *, dedicated: bool = True) -> list[str]:
    """Scenarios Flink `version` supports (what the store can generate); `dedicated=False` leaves
    out those that only their own tests use (harness.scenarios_for)."""
    v = version_tuple(version)
    return [p.name for p in _PLANS if v[:2] >= p.min_flink and (dedicated or not p.dedicated)]


def metadata_version_for(version: str) -> int:
    """`_metadata` version Flink `version` writes (1.15: 3, 1.16-1.20: 4, 2.0: 5, 2.1+: 6)."""
    v = version_tuple(version)[:2]
    if v >= (2, 1):
        return 6
    if v >= (2, 0):
        return 5
    if v >= (1, 16):
        return 4
    if v >= (1, 11):
        return 3
    raise ValueError(f"Flink {version} is older than the harness supports")


def properties(plan: ScenarioPlan, checkpoint_root: str, savepoint_root: str) -> str:
    """The generator's plan file (java.util.Properties syntax)."""
    lines = [f"jobs={','.join(j.name for j in plan.jobs)}",
             f"checkpoint_root={_escape(checkpoint_root)}",
             f"savepoint_root={_escape(savepoint_root)}"]
    for job in plan.jobs:
        lines.extend(job_properties(job))
        if job.restore_from:
            lines.append(f"{job.name}.restore=@{job.restore_from}")
            lines.append(f"{job.name}.claim_mode={job.claim_mode or 'NO_CLAIM'}")
    return "\n".join(lines) + "\n"


def job_properties(job: JobPlan) -> list[str]:
    out = []
    for key, value in job.spec().items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        out.append(f"{job.name}.{key}={_escape(text)}")
    return out


def _escape(value: str) -> str:
    # java.util.Properties treats backslash as an escape and ':'/'=' as separators in keys only.
    return value.replace("\\", "\\\\")

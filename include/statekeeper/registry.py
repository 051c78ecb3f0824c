"""Every Statekeeper job by name: its entry point, its audit table and what each exit code means.

The one place the Spark entry points (`spark_jobs/`), the Airflow operator and DAGs, the tables
layer (which audit tables pin table versions, who writes a missing table) and the docs read a job's
identity and contract from. It imports nothing but the standard library and sits on the ground
floor, so an Airflow worker that parses DAGs, and every layer of the library, can import it.

Exit codes are shared by every job; what a code *means* differs per job, and so does whether a
retry can change the answer:

    0  done, nothing needs attention
    1  done, but something needs attention (which thing: `JobSpec.exit_codes`)
    2  usage or configuration error: nothing was attempted; never retried
    3  internal failure: nothing trustworthy was committed by this run; retried
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from types import MappingProxyType
from typing import Mapping


class ExitCode(IntEnum):
    OK = 0
    ATTENTION = 1
    USAGE = 2
    INTERNAL = 3


_USAGE = ("usage or configuration error (bad, overlapping or missing roots, an empty S3 root without "
          "--allow-empty-root, a warehouse overlapping a root or one that cannot be written: read-only, no "
          "permission, a full disk; storage settings, missing or foreign tables, no succeeded index run to read): "
          "fix the parameters or connections")


@dataclass(frozen=True)
class JobSpec:
    """One job's identity and contract."""

    name: str                 # short name: the Airflow task id, the logger suffix
    label: str                # how logs name a run: "<label> run <run id>"
    entry_point: str          # spark_jobs/<entry_point>.py
    builder: str              # "module:Class" of the job's builder
    audit_table: str          # the table every run appends one row to
    run_id_prefix: str        # generated run ids: <prefix>-<UTC time>-<random>
    summary: str              # one line for --help and the docs
    exit_codes: Mapping[ExitCode, str]   # what each code this job can exit with means
    retried: frozenset[ExitCode]         # codes a retry can change (the DAG retries these)
    # Whether readers come back to the versions its newest audit row names (`source_versions`, the
    # index cut it read, and `table_versions`, what it wrote): then warehouse maintenance keeps those
    # versions readable (statekeeper.tables.maintenance.retention_pins).
    pins_versions: bool = False
    # Whether a run killed mid-way (its newest audit row `running`) is resumed by the next run on the
    # versions it read: then maintenance keeps those too.
    resumes_interrupted: bool = False

    def __deepcopy__(self, memo: dict[int, object]) -> JobSpec:
        # Immutable, and its mappingproxy cannot be deep-copied: Airflow deep-copies operators
        # (clearing a task, partial DAG subsets), and an operator holds its job's spec.
        return self

    @property
    def entry_module(self) -> str:
        """The module declaring the job's command line: `entry` beside its builder (each job package
        has one, as `ENTRY`; statekeeper.launch.entrypoint drives them all)."""
        return self.builder.partition(":")[0].rpartition(".")[0] + ".entry"

    @property
    def logger(self) -> str:
        return f"statekeeper.{self.name}"

    @property
    def app_name(self) -> str:
        return f"statekeeper-{self.name}"

    @property
    def final_exit_codes(self) -> tuple[ExitCode, ...]:
        """Failing codes that end the task for good: a retry cannot change the answer."""
        return tuple(c for c in self.exit_codes if c != ExitCode.OK and c not in self.retried)

    def meaning(self, code: int) -> str:
        try:
            return self.exit_codes[ExitCode(code)]
        except (ValueError, KeyError):
            return f"exit code {code} is not part of {self.entry_point}'s contract"

    def exit_status_help(self) -> str:
        """The exit-status paragraph of the entry point's --help."""
        return "Exit status: " + "; ".join(f"{int(c)} {text}" for c, text in self.exit_codes.items()) + "."


def _codes(**meanings: str) -> Mapping[ExitCode, str]:
    return MappingProxyType({ExitCode[k.upper()]: v for k, v in meanings.items()})


INDEX = JobSpec(
    name="index",
    label="index",
    entry_point="index_checkpoints",
    builder="statekeeper.index.job:IndexCheckpoints",
    audit_table="index_runs",
    run_id_prefix="idx",
    summary="index every object and _metadata under the roots into the index tables",
    exit_codes=_codes(
        ok="succeeded (or partial with --allow-partial)",
        attention="partial: some job directories could not be listed; their previous rows were kept "
                  "(--allow-partial exits 0). Often transient (throttling, a directory removed while listed)",
        usage=_USAGE,
        internal="internal failure; nothing committed (e.g. a concurrent run won)",
    ),
    retried=frozenset({ExitCode.ATTENTION, ExitCode.INTERNAL}),
    # its runs are the cut itself: maintenance keeps the cut readers read (statekeeper.tables.cut)
)

CHAINS = JobSpec(
    name="chains",
    label="chains",
    entry_point="compute_chains",
    builder="statekeeper.chains.job:ComputeChains",
    audit_table="chains_runs",
    run_id_prefix="chn",
    summary="compute every snapshot's dependencies and lineage across jobs",
    exit_codes=_codes(
        ok="tables written (also incomplete: some _metadata did not parse; the summary names them)",
        usage=_USAGE,
        internal="internal failure (recorded as failed in chains_runs)",
    ),
    retried=frozenset({ExitCode.INTERNAL}),
    # explain and later jobs compare the chains tables with the index versions they were computed from
    pins_versions=True,
)

VALIDATE = JobSpec(
    name="validate",
    label="validation",
    entry_point="validate_checkpoints",
    builder="statekeeper.validate.job:ValidateCheckpoints",
    audit_table="validation_runs",
    run_id_prefix="val",
    summary="check that every job's newest retained checkpoint restores",
    exit_codes=_codes(
        ok="every job's newest retained checkpoint is restorable (warnings never fail the run)",
        attention="a job's newest retained checkpoint is not restorable (the summary names the job, the snapshot, "
                  "the failing checks and the latest restorable checkpoint)",
        usage=_USAGE,
        internal="internal failure, or the index failed its quality suite (its answers cannot be trusted)",
    ),
    retried=frozenset({ExitCode.INTERNAL}),
    # the action jobs read the validation tables and check them against the cut they came from
    pins_versions=True,
)

GC = JobSpec(
    name="gc",
    label="gc",
    entry_point="collect_garbage",
    builder="statekeeper.gc.job:CollectGarbage",
    audit_table="gc_runs",
    run_id_prefix="gc",
    summary="expire retained snapshots by policy and delete files no remaining snapshot references",
    exit_codes=_codes(
        ok="plan written (dry run), or every planned file deleted or already gone",
        attention="blocked by a fail-closed rule (nothing was deleted; the summary names what blocked it and "
                  "what to do), or some deletes failed (the others went ahead; gc_actions names them, the next "
                  "run retries them)",
        usage=_USAGE,
        internal="internal failure; the plan and every outcome recorded so far stay in gc_actions, and the next "
                 "run resumes an interrupted deletion",
    ),
    retried=frozenset({ExitCode.INTERNAL}),
    # a resumed or executed plan is read at the versions it was planned from
    pins_versions=True,
    resumes_interrupted=True,
)

DR = JobSpec(
    name="dr_copy",
    label="dr copy",
    entry_point="copy_to_dr",
    builder="statekeeper.replicate.job:CopyToDr",
    audit_table="dr_runs",
    run_id_prefix="dr",
    summary="copy each job's latest restorable checkpoint (and savepoints) to disaster-recovery roots, "
            "_metadata rewritten, verified there",
    exit_codes=_codes(
        ok="every selected snapshot copied and verified (or, with --mode verify, every copy re-verified)",
        attention="some snapshot could not be copied or failed verification (no _metadata written for it; "
                  "dr_copies names the snapshot and the object), or a job had no restorable checkpoint left; the "
                  "next run copies only what is missing",
        usage=_USAGE + "; a target outside the allowlist or inside a source root; a --snapshot that is not "
                       "indexed, does not parse or does not restore",
        internal="internal failure; files copied so far stay (the next run skips them) and no _metadata is "
                 "written before its files are verified",
    ),
    retried=frozenset({ExitCode.INTERNAL}),
    # the DR tables and the cut a copy was selected from are what its copies are verified against
    pins_versions=True,
)

COMPACT = JobSpec(
    name="compact",
    label="compaction",
    entry_point="compact_checkpoints",
    builder="statekeeper.compact.job:CompactCheckpoints",
    audit_table="compaction_runs",
    run_id_prefix="cmp",
    summary="move inline state out of bloated _metadata into files (a new snapshot directory, or in place for "
            "stopped jobs), verified",
    exit_codes=_codes(
        ok="every selected snapshot compacted and verified (or planned, in a dry run), or nothing needed it",
        attention="some snapshot could not be compacted or was refused (compactions names it and why; its "
                  "_metadata is untouched)",
        usage=_USAGE + "; a --snapshot that is not indexed, does not parse or that validation calls broken",
        internal="internal failure; nothing is installed unverified, and a re-run finds what was installed",
    ),
    retried=frozenset({ExitCode.INTERNAL}),
    # each run selects from the newest cut and reads `compactions` at its latest version
)

MAINTAIN = JobSpec(
    name="maintain_warehouse",
    label="maintenance",
    entry_point="maintain_warehouse",
    builder="statekeeper.maintain.job:MaintainWarehouse",
    audit_table="maintenance_runs",
    run_id_prefix="mnt",
    summary="compact the small files of the warehouse's own Delta tables and vacuum what no pinned version needs",
    exit_codes=_codes(
        ok="every table maintained (or planned, with --dry-run); absent tables are skipped",
        attention="a table could not be maintained: a concurrent run committed to it (maintenance_runs names it; "
                  "the other tables went on); re-run when no job writes",
        usage=_USAGE + "; a warehouse retention shorter than what the pinned readers need",
        internal="internal failure; every table stays at a committed version, and a re-run finds what is left",
    ),
    retried=frozenset({ExitCode.INTERNAL}),
    # it reads no index cut: it keeps the versions the other jobs pin
)

REPORT = JobSpec(
    name="report",
    label="report",
    entry_point="build_report",
    builder="statekeeper.report.job:BuildReport",
    audit_table="report_runs",
    run_id_prefix="rpt",
    summary="write the HTML report of the warehouse (storage per job, lineage, restorability, _metadata, GC, DR, "
            "compaction) under <warehouse>/_reports/",
    exit_codes=_codes(
        ok="report written (whatever it shows: a store with unrestorable jobs still gets its report)",
        usage=_USAGE,
        internal="internal failure; the previous report stays the latest",
    ),
    retried=frozenset({ExitCode.INTERNAL}),
    # a report is read as published; nothing reads its runs' versions again
)
JOBS: tuple[JobSpec, ...] = (INDEX, CHAINS, VALIDATE, GC, DR, COMPACT, MAINTAIN, REPORT)


def job(name: str) -> JobSpec:
    """The job named `name` (its short name or its entry point)."""
    for spec in JOBS:
        if name in (spec.name, spec.entry_point):
            return spec
    raise KeyError(f"no Statekeeper job named {name!r}; known: {', '.join(s.name for s in JOBS)}")


def exit_code_table() -> str:
    """The Markdown table of every job's exit codes and whether the DAG retries them (README.md
    holds this table verbatim; a test keeps the two equal)."""
    lines = ["| exit | " + " | ".join(f"`{j.entry_point}`" for j in JOBS) + " |",
             "|---|" + "---|" * len(JOBS)]
    for code in ExitCode:
        cells = []
        for j in JOBS:
            if code not in j.exit_codes:
                cells.append("—")
            elif code == ExitCode.OK:
                cells.append(j.exit_codes[code])
            else:
                cells.append(f"{j.exit_codes[code]}. *{'retried' if code in j.retried else 'not retried'}*")
        lines.append(f"| {int(code)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(exit_code_table())

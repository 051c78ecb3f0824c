"""The closed sets of values that columns of Statekeeper's tables hold, one `StrEnum` per vocabulary.

Members are `str`s equal to their value, so they compare, hash, format and serialize (pyarrow,
Spark `F.lit`, json) exactly as the bare strings; modules name values through these enums instead
of repeating the strings. docs/tables.md and docs/chains-and-validation.md describe each column.

The codec (`statekeeper.format`) writes `references.scope`, `handle_kind`, `slot` and `role` and
`snapshots.snapshot_type` with its own spelling of these values and does not import this module:
its sources are digested into `snapshots.parser_version`, so editing them re-parses every
`_metadata` once. Scope, HandleKind, Slot, Role and SnapshotType must stay equal to what it writes.
"""
from __future__ import annotations

from enum import StrEnum


class FileKind(StrEnum):
    """files.kind and references.file_kind: where a file sits in Flink's layout (statekeeper.layout.classify)."""

    # files.kind of a local object that is not a regular file is its statekeeper.storage.model.ObjectType
    # value (symlink, fifo, ...) instead; the last two members occur only in references.file_kind.
    CHECKPOINT_METADATA = "checkpoint_metadata"   # <job>/chk-N/_metadata
    SAVEPOINT_METADATA = "savepoint_metadata"     # savepoint-*/_metadata, or any _metadata outside chk-N
    INPROGRESS_METADATA = "inprogress_metadata"   # ._metadata.inprogress.<uuid> left by a crash
    EXCLUSIVE = "exclusive"                       # chk-N/<uuid>: one checkpoint's private files
    SHARED = "shared"                             # shared/<uuid>: incremental SSTs etc.
    TASK_OWNED = "task_owned"                     # taskowned/<...>: never deleted by the JM per file
    FILE_MERGING_MANAGED = "file_merging_managed" # shared/job_*_op_*/, taskowned/job_*_tm_*/ (FLIP-306)
    FORST_WORKING = "forst_working"               # shared/op_*_attempt_*/: a ForSt database's files (layout.forst)
    CHANGELOG = "changelog"                       # <job>/dstl/<uuid>: changelog (DSTL) files of that job
    SAVEPOINT_DATA = "savepoint_data"             # files of a savepoint-* directory
    UNKNOWN = "unknown"
    FILE_MERGING_MANAGED_DIR = "file_merging_managed_dir"  # references only: a tag-17 managed directory
    EXTERNAL = "external"                         # references only: outside every indexed root

    @property
    def is_metadata(self) -> bool:
        return self in (FileKind.CHECKPOINT_METADATA, FileKind.SAVEPOINT_METADATA)


class LayoutKind(StrEnum):
    """snapshots.layout_kind: the FileKind of the `_metadata` object (only metadata kinds occur)."""

    CHECKPOINT_METADATA = FileKind.CHECKPOINT_METADATA.value
    SAVEPOINT_METADATA = FileKind.SAVEPOINT_METADATA.value


class SnapshotStatus(StrEnum):
    """snapshots.status: whether a `_metadata` object was parsed."""

    OK = "ok"
    PARSE_ERROR = "parse_error"
    UNSUPPORTED = "unsupported"
    UNREADABLE = "unreadable"


class SnapshotType(StrEnum):
    """snapshots.snapshot_type (also dependencies/pins/validation_results.snapshot_type); may be null."""

    CHECKPOINT = "checkpoint"
    SAVEPOINT = "savepoint"


class SnapshotFormat(StrEnum):
    """snapshots.snapshot_format: a savepoint's format (Flink's SavepointFormatType, lower case); null otherwise."""

    CANONICAL = "canonical"
    NATIVE = "native"


class Sharing(StrEnum):
    """snapshots.sharing: Flink's SharingFilesStrategy, lower case; may be null."""

    FORWARD_BACKWARD = "forward_backward"
    FORWARD = "forward"
    NO_SHARING = "no_sharing"


class Scope(StrEnum):
    """references.scope: who owns a referenced file (statekeeper.format.references)."""

    EXCLUSIVE = "exclusive"                                # this snapshot's own directory, or private state
    SHARED = "shared"                                      # shared/, or incremental shared/private/DSTL handles
    TASK_OWNED = "task_owned"                              # taskowned/
    FILE_MERGING_MANAGED_DIR = "file_merging_managed_dir"  # a directory named by a tag-17 handle


class HandleKind(StrEnum):
    """references.handle_kind and inline_state.handle_kind: the Flink handle type naming a file or inline bytes."""

    FILE_STREAM_STATE_HANDLE = "FILE_STREAM_STATE_HANDLE"                    # references, tag 2
    RELATIVE_STREAM_STATE_HANDLE = "RELATIVE_STREAM_STATE_HANDLE"            # references, tag 6
    SEGMENT_FILE_HANDLE = "SEGMENT_FILE_HANDLE"                              # references, tag 15
    SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE = "SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE"  # references, tag 17
    BYTE_STREAM_STATE_HANDLE = "BYTE_STREAM_STATE_HANDLE"                    # inline_state, tag 1
    MASTER_STATE = "MASTER_STATE"                                            # inline_state
    CHANGELOG_BYTE_INCREMENT_HANDLE = "CHANGELOG_BYTE_INCREMENT_HANDLE"      # inline_state, tag 9


class Slot(StrEnum):
    """references.slot and inline_state.slot: the top-level position of a handle (statekeeper.format.walk)."""

    MASTER = "master"
    COORDINATOR = "coordinator"
    MANAGED_OPERATOR = "managed_operator"
    RAW_OPERATOR = "raw_operator"
    MANAGED_KEYED = "managed_keyed"
    RAW_KEYED = "raw_keyed"
    INPUT_CHANNEL = "input_channel"
    OUTPUT_CHANNEL = "output_channel"


class Role(StrEnum):
    """references.role: a handle's position inside its slot (statekeeper.format.walk, .references)."""

    DELEGATE = "delegate"
    META = "meta"
    SHARED = "shared"
    PRIVATE = "private"
    DELTA = "delta"
    CHANGES = "changes"
    STATE = "state"
    MANAGED_DIRS = "managed_dirs"
    CHANNEL_OFFSETS = "channel_offsets"
    TASK_OWNED_DIR = "task_owned_dir"      # tag 17: the managed task-owned directory
    SHARED_DIR = "shared_dir"              # tag 17: the managed shared directory


class TargetKind(StrEnum):
    """dependencies.target_kind and pins.target_kind: what the directory owning a referenced file is."""

    CHECKPOINT = "checkpoint"    # a chk-N directory holding an indexed `_metadata`
    SAVEPOINT = "savepoint"      # a savepoint directory
    JOB = "job"                  # a job directory (the root itself for create-subdir=false)
    DIRECTORY = "directory"      # another top-level directory of a root
    EXTERNAL = "external"        # outside every indexed root: the file's parent directory


class Relation(StrEnum):
    """dependencies.relation and pins.relation: how a target relates to the snapshot that uses it."""

    SELF = "self"                # the snapshot's own directory
    OWN_JOB = "own_job"          # its job's shared/, taskowned/, other chk-N
    OTHER_JOB = "other_job"      # another job's files
    SAVEPOINT = "savepoint"      # a savepoint's files
    EXTERNAL = "external"        # outside every indexed root


# Cross-directory relations: deleting or moving such a target breaks the snapshot although its own
# directory is intact (FLINK-24149).
FOREIGN_RELATIONS = frozenset({Relation.OTHER_JOB, Relation.SAVEPOINT, Relation.EXTERNAL})


class Dependency(StrEnum):
    """dependencies.dependency and pins.dependency: a direct use of files, or lineage."""

    DIRECT = "direct"
    TRANSITIVE = "transitive"


class Severity(StrEnum):
    """validation_results.severity: of a finding, or the worst finding of a snapshot (summary rows)."""

    OK = "ok"
    WARNING = "warning"
    ERROR = "error"


class Check(StrEnum):
    """validation_results.check: the integrity check a finding belongs to (SNAPSHOT: the summary row)."""

    METADATA_PARSES = "metadata_parses"
    FILE_EXISTS = "file_exists"
    RELATIVE_RESOLVES = "relative_resolves"
    FILE_SIZE = "file_size"
    FILE_UNVERIFIABLE = "file_unverifiable"
    CROSS_DIRECTORY = "cross_directory"
    SNAPSHOT = "snapshot"


class UnitKind(StrEnum):
    """validation_jobs.kind: what a job location is."""

    JOB = TargetKind.JOB.value
    SAVEPOINT = TargetKind.SAVEPOINT.value
    DIRECTORY = TargetKind.DIRECTORY.value


class JobHealth(StrEnum):
    """validation_jobs.status: whether the job location's newest snapshot is restorable."""

    RESTORABLE = "restorable"
    UNRESTORABLE = "unrestorable"


class IndexRunStatus(StrEnum):
    """index_runs.status."""

    SUCCEEDED = "succeeded"      # its table_versions are the cut readers read
    PARTIAL = "partial"          # some job directories could not be listed; their previous rows were kept
    FAILED = "failed"            # the run did not reach its commit point


class ChainsRunStatus(StrEnum):
    """chains_runs.status."""

    SUCCEEDED = "succeeded"
    INCOMPLETE = "incomplete"    # some `_metadata` could not be parsed: their references are unknown
    FAILED = "failed"


class ValidationRunStatus(StrEnum):
    """validation_runs.status."""

    OK = "ok"                            # every job's newest retained checkpoint is restorable
    UNRESTORABLE = "unrestorable"        # some job's newest retained checkpoint is not
    QUALITY_FAILED = "quality_failed"    # the index tables failed their quality suite
    FAILED = "failed"                    # the run itself failed


class GcMode(StrEnum):
    """gc_runs.mode: what a garbage-collection run was asked to do."""

    PLAN = "plan"          # dry run: write the plan, touch nothing
    DELETE = "delete"      # plan, re-check, delete
    EXECUTE = "execute"    # execute (or resume) an earlier run's persisted plan after the same re-checks


class GcRunStatus(StrEnum):
    """gc_runs.status. Every transition appends a row; a run's state is its newest row."""

    REQUESTED = "requested"    # the plan is being computed; nothing touched yet
    PLANNED = "planned"        # the plan is in gc_actions (a dry run ends here)
    RUNNING = "running"        # deleting; a run left here was killed and is resumed by the next one
    COMPLETED = "completed"    # every planned file has its outcome
    BLOCKED = "blocked"        # a fail-closed rule refused any deletion; its `blocked` column says why
    FAILED = "failed"          # the run itself failed (or some deletes failed: see `failed`)

    @property
    def final(self) -> bool:
        return self in (GcRunStatus.PLANNED, GcRunStatus.COMPLETED, GcRunStatus.BLOCKED, GcRunStatus.FAILED)


class GcReason(StrEnum):
    """gc_actions.reason: why a file is garbage."""

    EXPIRED_SNAPSHOT = "expired_snapshot"      # the `_metadata` of a snapshot the policy expires, or a file only
                                               # expired snapshots referenced
    FAILED_CHECKPOINT = "failed_checkpoint"    # a file in a chk-N directory that has no `_metadata`
    INPROGRESS = "inprogress"                  # a `._metadata.inprogress.*` left by a crashed JobManager
    ORPHAN = "orphan"                          # anything else no remaining snapshot references
    DEAD_DATABASE = "dead_database"            # a file of a ForSt database that can no longer be written
                                               # (statekeeper.gc.forst) that no remaining snapshot references


class DatabaseVerdict(StrEnum):
    """Whether a ForSt database in checkpoint storage can still be written (statekeeper.gc.forst); the GC
    judges the unreferenced files of the two dead kinds only."""

    SUPERSEDED = "superseded"          # its job wrote nothing for the grace period; a newer attempt of its
                                       # subtask has a database beside it
    JOB_INACTIVE = "job_inactive"      # its job wrote nothing for the grace period and is inactive by
                                       # --inactive-after; the run declared its roots complete
    HELD_BACK = "held_back"            # as job_inactive, but the roots are not declared complete: a job in a
                                       # root the run was not given may read it (CLAIM); not judged
    LIVE = "live"                      # anything else: maybe written still; its unreferenced files are left


class OwnerlessVerdict(StrEnum):
    """gc_runs.ownerless.verdict: what a run did with an ownerless job directory (statekeeper.gc.plan)."""

    HELD_BACK = "held_back"              # nothing in it planned: a job in a root not given may use it
    ROOTS_COMPLETE = "roots_complete"    # planned: the run was told its roots are every root (--roots-complete)
    OLDER_THAN = "older_than"            # planned: its newest object is older than --ownerless-older-than


class GcOutcome(StrEnum):
    """gc_actions.outcome: what happened to one planned file."""

    PLANNED = "planned"                  # not attempted (yet): a dry run, or a run that was killed
    DELETED = "deleted"
    ALREADY_GONE = "already_gone"        # absent when re-checked or deleted (e.g. by a killed run): done
    CHANGED_SKIPPED = "changed_skipped"  # size, etag or mtime differ from the plan, or it became referenced
    FAILED = "failed"                    # the delete failed after retries (the run exits 1)

    @property
    def done(self) -> bool:
        return self in (GcOutcome.DELETED, GcOutcome.ALREADY_GONE)


class Protection(StrEnum):
    """gc_runs.protection / dr_runs.protection: what held a store's objects to the version a mover relied on
    (statekeeper.storage.enforcement proves per store whether the store itself does)."""

    PRECONDITION = "precondition"          # the store refuses a changed object itself (its self-test: enforced)
    LISTING = "listing"                    # GC: each directory listed again just before its keys are deleted
    SOURCE_RECHECK = "source_recheck"      # DR: the source's version read before and after each server-side copy
    EXISTENCE_CHECK = "existence_check"    # DR: the target looked up just before each create-only write or copy


class DrRunStatus(StrEnum):
    """dr_runs.status."""

    SUCCEEDED = "succeeded"    # every selected snapshot verified at the target
    ATTENTION = "attention"    # some snapshot failed (its row in dr_copies says why); the others are verified
    FAILED = "failed"          # the run itself failed


class DrCopyStatus(StrEnum):
    """dr_copies.status."""

    VERIFIED = "verified"      # every object present at the target as copied; the rewritten `_metadata` written last
    FAILED = "failed"          # no target `_metadata` written (or, re-verifying, an object is missing or wrong)


class DrSelectedBy(StrEnum):
    """dr_copies.selected_by: why a run copied this snapshot."""

    LATEST_RESTORABLE = "latest_restorable"   # the job's latest restorable checkpoint (validation_jobs)
    FALLBACK = "fallback"                     # an older restorable checkpoint, after the newer one failed to copy
    SAVEPOINT = "savepoint"                   # by --savepoints
    EXPLICIT = "explicit"                     # --snapshot
    REVERIFY = "reverify"                     # --mode verify: an earlier copy checked again
    FOLLOW = "follow"                         # --mode follow: the job's newest completed checkpoint, not validated


class CompactionRunStatus(StrEnum):
    """compaction_runs.status."""

    SUCCEEDED = "succeeded"    # every selected snapshot compacted (or planned, in a dry run), or nothing to do
    ATTENTION = "attention"    # some snapshot failed or was refused (its compactions row says why)
    FAILED = "failed"          # the run itself failed


class CompactionStatus(StrEnum):
    """compactions.status, also the outcome of compacting one snapshot (statekeeper.compact.apply)."""

    COMPACTED = "compacted"                  # verified, then installed by this run
    ALREADY_COMPACTED = "already_compacted"  # the verified result was already installed
    RECOVERED = "recovered"                  # installed by a run that died before recording it; verified now
    NOTHING_TO_MOVE = "nothing_to_move"      # no inline payload of at least --min-bytes may leave the file
    PLANNED = "planned"                      # dry run
    FAILED = "failed"                        # nothing installed; `problem` names the object and what to do
    REFUSED = "refused"                      # not attempted (--in-place on a job that looks running)


class MaintenanceMode(StrEnum):
    """maintenance_runs.mode."""

    MAINTAIN = "maintain"      # compact, vacuum and checkpoint the tables
    DRY_RUN = "dry_run"        # report what would be compacted and vacuumed; nothing changed


class MaintenanceRunStatus(StrEnum):
    """maintenance_runs.status."""

    SUCCEEDED = "succeeded"    # every table present maintained (or planned, in a dry run)
    ATTENTION = "attention"    # a concurrent writer kept some table from being maintained (`problems` says which)
    FAILED = "failed"          # the run itself failed, or was refused (a retention below the floor)

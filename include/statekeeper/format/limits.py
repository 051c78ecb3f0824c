"""Absolute caps on the counts a `_metadata` file declares: the one table of them.

Why caps at all: every count the reader takes from a file is already checked against the bytes
left (a count can never exceed what the rest of the file could encode), but that bounds memory
only relative to the file size, and a sparse file is cheap: a 29 MB file of 1M empty operators
(29 bytes each) builds ~190 bytes of model per operator, a finished subtask is 4 bytes on disk
and ~140 in memory. The caps below bound the model absolutely, whatever the file size.

Each default is either Flink's own hard limit or far above anything a real job produces, so a
file beyond a cap is corrupt or crafted; the reader refuses it with MetadataLimitError (naming
the object, byte offset, declared count and cap). A real checkpoint beyond a cap can still be
read with `read_metadata(..., limits=MetadataLimits(<field>=...))`.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

# Flink's KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM (1 << 15): the JobManager refuses a
# larger max parallelism, so no operator can have more subtasks and no key group index reaches it.
FLINK_UPPER_BOUND_MAX_PARALLELISM = 1 << 15

# One MasterState per registered MasterTriggerRestoreHook (e.g. external reader groups); real jobs
# have none or a few.
DEFAULT_MAX_MASTER_STATES = 1 << 10
# One OperatorState per operator (chained ones included); large SQL jobs have hundreds to a few
# thousand, and 65536 empty operators still cost only ~13 MiB.
DEFAULT_MAX_OPERATORS = 1 << 16
# Flink's own limit: bounds parallelism, subtask states per operator and key-group ranges.
DEFAULT_MAX_PARALLELISM = FLINK_UPPER_BOUND_MAX_PARALLELISM
# Subtask states in the whole file (operators x parallelism): 4M is e.g. 1000 operators at
# parallelism 4096. Finished subtasks are 4 bytes on disk and ~140 in memory, so this alone keeps a
# crafted file of them under ~600 MiB.
DEFAULT_MAX_SUBTASK_STATES = 1 << 22
# Entries of one list: shared/private files of one RocksDB instance (thousands), channel states of
# one subtask (gates x upstream parallelism), operator states of one handle, changelog entries.
DEFAULT_MAX_HANDLES_PER_LIST = 1 << 20
# Everything the file declares as a model object (operators, subtasks, list entries) in total:
# 16M entries of real handles take a `_metadata` file of ~2 GB, beyond what a JobManager builds.
# Partition and key-group offsets are not entries: they stay raw bytes, as large as on disk.
DEFAULT_MAX_ENTRIES = 1 << 24

# Short reasons quoted in MetadataLimitError, by field of MetadataLimits.
WHY = {
    "max_master_states": "one per master hook; real jobs have a few at most",
    "max_operators": "real jobs have at most a few thousand operators",
    "max_parallelism": "Flink's own upper bound (KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM)",
    "max_subtask_states": "operators x parallelism of real jobs stays far below it",
    "max_handles_per_list": "real lists (files of one RocksDB instance, channels of one subtask) "
                            "stay far below it",
    "max_entries": "bounds the memory of the parsed model; real files stay far below it",
}


@dataclass(frozen=True, slots=True)
class MetadataLimits:
    """Caps the reader enforces; raise one to read a real checkpoint that exceeds it."""

    max_master_states: int = DEFAULT_MAX_MASTER_STATES
    max_operators: int = DEFAULT_MAX_OPERATORS
    max_parallelism: int = DEFAULT_MAX_PARALLELISM
    max_subtask_states: int = DEFAULT_MAX_SUBTASK_STATES
    max_handles_per_list: int = DEFAULT_MAX_HANDLES_PER_LIST
    max_entries: int = DEFAULT_MAX_ENTRIES

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if type(value) is not int or value < 0:
                raise ValueError(f"MetadataLimits.{f.name} must be a non-negative int, got {value!r}")


DEFAULT_LIMITS = MetadataLimits()

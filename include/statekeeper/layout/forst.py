"""ForSt (Flink 2.x) databases in checkpoint storage: which database, and which attempt, a file belongs to.

With `state.backend.forst.primary-dir: checkpoint-dir` (the default of 2.0.2 and 2.3.0; jobs on the
synchronous state API also need `state.backend.forst.sync.enforce-local: false`) every keyed subtask
runs its live database under the job's shared directory (`ForStStateBackend.createForStPathContainer`):

    <job>/shared/op_<operator identifier>_attempt_<attempt number>/db/<uuid>

The operator identifier names the operator and the subtask (`KeyedProcessOperator_<operator id>__<i>_<p>_`:
subtask i of p, 1-based), so one subtask's databases differ only in the attempt number, which grows on
every restart of the task (a failover) and starts again at 0 when the job is submitted anew under the
same job id. What a file is for, whether it is live, is never read from here: only `_metadata` files
say what a checkpoint uses (docs/flink2.md, "ForSt databases"). Pure functions.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# Below a root: `<job>/shared/op_<id>_attempt_<n>/...`, or `shared/op_...` directly in a root written
# without a job-id level. Group 1: the database directory; 2: the operator identifier; 3: the attempt.
DATABASE_PATTERN = r"^((?:[^/]+/)?shared/op_(.+)_attempt_([0-9]+))/"
_DATABASE = re.compile(DATABASE_PATTERN)


@dataclass(frozen=True, slots=True)
class ForstDatabase:
    directory: str      # below the root: `<job>/shared/op_<operator>_attempt_<n>`
    operator: str       # the operator identifier: operator and subtask (one database per attempt of it)
    attempt: int


def database_of(relative_path: str) -> ForstDatabase | None:
    """The ForSt database a path below a root lies in, or None."""
    m = _DATABASE.match(relative_path)
    if m is None:
        return None
    return ForstDatabase(m.group(1), m.group(2), int(m.group(3)))

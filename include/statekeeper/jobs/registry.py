"""The job registry's older address: it lives on the ground floor now, as `statekeeper.registry`.

Kept so that DAGs and scripts written against `statekeeper.jobs.registry` go on working, and so that
`python -m statekeeper.jobs.registry` still prints the exit-code table.
"""
from statekeeper.registry import (CHAINS, COMPACT, DR, GC, INDEX, JOBS, MAINTAIN, REPORT, VALIDATE, ExitCode, JobSpec,
                                  exit_code_table, job)

__all__ = ["CHAINS", "COMPACT", "DR", "GC", "INDEX", "JOBS", "MAINTAIN", "REPORT", "VALIDATE", "ExitCode", "JobSpec",
           "exit_code_table", "job"]

if __name__ == "__main__":
    print(exit_code_table())

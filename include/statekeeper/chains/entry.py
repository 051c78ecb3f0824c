"""The chains job's command line: `spark_jobs/compute_chains.py`."""
from __future__ import annotations

import argparse

from statekeeper.launch import entrypoint as ep
from statekeeper.chains.options import ChainsOptions
from statekeeper.registry import CHAINS

DESCRIPTION = (
    "From the index tables (snapshots, references, files), compute for every snapshot the directories whose "
    "files it uses (own directory, own job, other jobs, savepoints, outside the roots) with file counts and "
    "bytes, and its transitive lineage; write the tables dependencies (by snapshot) and pins (by the "
    "directory kept alive) and a chains_runs row.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-depth", type=int, default=64,
                   help="fail if restore lineage is deeper than this many levels (default 64)")


def options(args: argparse.Namespace) -> ChainsOptions:
    if args.max_depth < 1:
        raise ep.UsageError("--max-depth must be >= 1")
    return ChainsOptions(max_depth=args.max_depth)


ENTRY = ep.JobEntry(CHAINS, DESCRIPTION, add_arguments, options)

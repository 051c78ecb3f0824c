"""The re-list looks for `_metadata` exactly where the index's classifier calls one a snapshot.

`holds_snapshot_metadata` asks `classify` itself; `may_hold_snapshot_below` prunes the walk and is the
one hand-written rule, so it is checked against `classify` over every path of up to five directory
levels built from a segment alphabet that holds every name the classifier distinguishes (job ids,
`chk-N`, `shared`, `taskowned`, `compacted`, savepoint names, file-merging and ForSt directories,
in-progress names, anything else). A placement added to `classify` without teaching the walk fails here.
"""
from __future__ import annotations

import itertools

import pytest

from statekeeper.layout.classify import (
    METADATA_NAME,
    SNAPSHOT_METADATA_KINDS,
    classify,
    holds_snapshot_metadata,
    may_hold_snapshot_below,
)

pytestmark = pytest.mark.unit

ALPHABET = (
    "0123456789abcdef0123456789abcdef",      # a job id
    "chk-7",
    "shared",
    "taskowned",
    "compacted",
    "savepoint-012345-0123456789ab",
    "job_x_op_y",                            # file-merging managed (shared)
    "job_x_tm_y",                            # file-merging managed (task-owned)
    "op_a__1_2__attempt_1",                  # ForSt working DB
    "dstl",                                  # changelog (DSTL) files of a job
    "db",
    "custom",
)


def _walk_reaches(relative_metadata: str) -> bool:
    """Whether the re-list's walk (from the root, pruned by the two rules) looks at this `_metadata`."""
    dirs = relative_metadata.split("/")[:-1]
    for depth in range(len(dirs)):
        if not may_hold_snapshot_below("/".join(dirs[:depth])):
            return False
    return holds_snapshot_metadata("/".join(dirs))


def test_every_snapshot_placement_the_classifier_knows_is_walked():
    checked = 0
    for depth in range(0, 6):
        for dirs in itertools.product(ALPHABET, repeat=depth):
            path = "/".join((*dirs, METADATA_NAME))
            if classify(path).kind in SNAPSHOT_METADATA_KINDS:
                checked += 1
                assert _walk_reaches(path), f"the re-list would miss a snapshot at <root>/{path}"
    assert checked > 10_000      # the alphabet really exercises the classifier, not a handful of paths


@pytest.mark.parametrize("relative_dir", ["", "0123456789abcdef0123456789abcdef",
                                          "0123456789abcdef0123456789abcdef/chk-3",
                                          "0123456789abcdef0123456789abcdef/compacted/chk-3",
                                          "0123456789abcdef0123456789abcdef/compacted/chk-3/deeper",
                                          "savepoint-012345-0123456789ab", "chk-3", "compacted/savepoint-x",
                                          "custom/nested/dir"])
def test_known_snapshot_directories_are_looked_at(relative_dir):
    assert holds_snapshot_metadata(relative_dir)


@pytest.mark.parametrize("relative_dir", ["0123456789abcdef0123456789abcdef/shared",
                                          "0123456789abcdef0123456789abcdef/taskowned",
                                          "0123456789abcdef0123456789abcdef/chk-3",
                                          "savepoint-012345-0123456789ab", "shared", "taskowned", "chk-9"])
def test_bulk_subtrees_are_not_descended(relative_dir):
    # shared/ and taskowned/ hold almost every object of a store: listing below them would cost as
    # much as the index itself.
    assert not may_hold_snapshot_below(relative_dir)

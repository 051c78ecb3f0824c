"""Where a compacted `_metadata` goes and what it holds: pure functions of the parsed source.

Two placements (spec §9, §11):

* NEW_DIRECTORY (default): `<parent>/compacted/<snapshot dir name>/_metadata`. The source stays as
  it is; a running job's JobManager owns its `chk-N/`, so nothing is ever written there. The source's
  own relative files are named by absolute handles (they stay where they are), so the new snapshot
  references exactly the source's files plus the new ones.
* IN_PLACE: the new files beside the source's `_metadata`, which is replaced atomically, last, with a
  backup of the original kept beside it (`apply.py`). Only for snapshots no running job owns.

Moved payloads get names derived from the source (URI, etag and position), so a re-run after a
crash rewrites the same objects instead of leaving a second set behind.
"""
from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from enum import StrEnum

from statekeeper.format import CheckpointMetadata, ExternalFile, absolutize_relative, externalize_inline
from statekeeper.uri import join_uri, normalize_uri, parent_uri

METADATA = "_metadata"
COMPACTED_DIR = "compacted"
CANDIDATE_NAME = "_metadata.statekeeper-compacting"   # the new `_metadata` until it is verified
BACKUP_NAME = "_metadata.statekeeper-original"        # in place: the replaced original
# Namespace of the moved payloads' names (uuid5): fixed, so names are reproducible across runs and versions.
_NAMES = uuid.UUID("6a1e3d4c-57a7-4e6b-9b1f-5c001ac7ed00")


class Placement(StrEnum):
    NEW_DIRECTORY = "new_directory"
    IN_PLACE = "in_place"


def result_metadata_uri(source_metadata_uri: str, placement: Placement) -> str:
    """Where the compacted `_metadata` of `source_metadata_uri` is written."""
    source = normalize_uri(source_metadata_uri)
    if placement is Placement.IN_PLACE:
        return source
    snapshot_dir = parent_uri(source)
    container, _, name = snapshot_dir.rpartition("/")
    return join_uri(container, f"{COMPACTED_DIR}/{name}/{METADATA}")


def sibling(metadata_uri: str, name: str) -> str:
    return join_uri(parent_uri(metadata_uri), name)


@dataclass(frozen=True)
class CompactionPlan:
    source_uri: str
    result_uri: str
    placement: Placement
    model: CheckpointMetadata | None   # the new `_metadata` (moved payloads unloaded); None once written
    files: tuple[ExternalFile, ...]    # to write before the new `_metadata`, payloads from the source
    kept_inline: int                   # inline handles that stay (too small, or must stay inline)
    absolutized: int                   # the source's relative handles now named absolutely

    def written(self) -> CompactionPlan:
        """This plan without its model: once serialized, the new model is not needed again, and for a
        GB-sized source it is ~10^5 handles."""
        return dataclasses.replace(self, model=None)

    def verifying(self) -> CompactionPlan:
        """This plan without its model and files, once both are written: a GB-sized source moves ~10^5
        payloads, and verification needs only their URIs (`file_uris`, taken before)."""
        return dataclasses.replace(self, model=None, files=())

    @property
    def moved_bytes(self) -> int:
        return sum(f.payload.length for f in self.files)

    @property
    def file_uris(self) -> frozenset[str]:
        return frozenset(f.uri for f in self.files)

    @property
    def candidate_uri(self) -> str:
        return sibling(self.result_uri, CANDIDATE_NAME)


def plan_compaction(model: CheckpointMetadata, source_uri: str, placement: Placement, *, min_bytes: int,
                    fingerprint: str) -> CompactionPlan:
    """The new model of `model` (parsed from `source_uri`, whose version is `fingerprint`, e.g. its
    etag): every movable inline payload of at least `min_bytes` becomes a file (the codec's
    `externalize_inline`: exclusive state relative, shared-list entries absolute; coordinator state,
    master state and in-memory changelog stay inline)."""
    source = normalize_uri(source_uri)
    result = result_metadata_uri(source, placement)
    absolutized = 0
    if placement is Placement.NEW_DIRECTORY:
        moved = absolutize_relative(model, source)
        absolutized = sum(c.occurrences for c in moved.changes)
        model = moved.model
    counter = iter(range(1 << 62))

    def name(site, role, handle) -> str:
        return str(uuid.uuid5(_NAMES, f"{source}#{fingerprint}#{next(counter)}"))

    ext = externalize_inline(model, result, min_bytes=min_bytes, name_fn=name)
    return CompactionPlan(source, result, placement, ext.model, tuple(ext.files), ext.kept_inline, absolutized)

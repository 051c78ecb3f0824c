"""A source `_metadata` rewritten for its DR target: pure, storage-free except for the streams given.

Every absolute location (tags 2 and 15, both tag-17 directories, DSTL and channel delegates) is
mapped by longest prefix from its source root to the target root (spec §8.3); relative handles stay
as they are, because their files are copied beside the new `_metadata`. A location no prefix maps is
refused: a copy that still pointed into the source would restore only while the source exists, which
is exactly the failure a DR copy exists to prevent.
"""
from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from typing import BinaryIO

from statekeeper.errors import StatekeeperError
from statekeeper.format import extract_references, read_metadata, rewrite_prefixes, write_metadata

_SPOOL = 64 * 1024 * 1024    # rewritten `_metadata` up to this stay in memory, larger ones spill to disk


class RelocateError(StatekeeperError):
    """A `_metadata` cannot be rewritten for the target (unmapped location, unexpected reference)."""


EXTERNAL_DIR = "_external"


def external_target(uri: str, target_root: str) -> str:
    """Where a referenced file outside every source root goes: below the snapshot's target root, in
    `_external/<scheme>/<bucket or path>` (so two external stores never collide)."""
    scheme, _, rest = uri.partition("://")
    return f"{target_root.rstrip('/')}/{EXTERNAL_DIR}/{scheme}/{rest.lstrip('/')}"


def target_of(uri: str, mapping: dict[str, str]) -> str | None:
    """The target URI of a canonical source URI: longest source-root prefix on whole segments."""
    best = None
    for src, dst in mapping.items():
        src = src.rstrip("/")
        if (uri == src or uri.startswith(src + "/")) and (best is None or len(src) > len(best[0])):
            best = (src, dst.rstrip("/"))
    return None if best is None else best[1] + uri[len(best[0]):]


@dataclass
class Relocated:
    """The rewritten `_metadata` (a spooled temporary file, positioned at 0) and what it names."""

    body: BinaryIO
    size: int
    sha256: str
    files: dict[str, int]          # target URI -> stated size (segments: end of the last segment)
    managed_dirs: set[str]         # tag-17 directories at the target
    changed: int                   # distinct stored locations rewritten

    def close(self) -> None:
        self.body.close()


def relocate(source: BinaryIO, source_uri: str, target_uri: str, mapping: dict[str, str]) -> Relocated:
    """Parse `source` (the `_metadata` at `source_uri`), rewrite it with `mapping` and return the new
    bytes, re-parsed as `target_uri` to list what they name. Refuses (RelocateError) a location no
    mapping covers and a result that still names anything outside the mapping's targets."""
    model = read_metadata(source, source_uri)
    result = rewrite_prefixes(model, mapping)
    if result.unmapped:
        shown = ", ".join(result.unmapped[:5])
        raise RelocateError(f"{source_uri} names {len(result.unmapped)} location(s) outside every mapped root "
                            f"(e.g. {shown}): index them as a root and give it a target, or pass --include-external")
    body = tempfile.SpooledTemporaryFile(max_size=_SPOOL)
    try:
        write_metadata(result.model, body, inline_source=source)
        size = body.tell()
        body.seek(0)
        digest = hashlib.sha256()
        while chunk := body.read(1 << 20):
            digest.update(chunk)
        body.seek(0)
        # Re-read what will be written: the references come from the bytes, not from the model we meant.
        refs = extract_references(read_metadata(body, target_uri), target_uri)
        body.seek(0)
        targets = [t.rstrip("/") for t in mapping.values()]
        stray = [f.uri for f in refs.files
                 if not any(f.uri == t or f.uri.startswith(t + "/") for t in targets)]
        if stray:
            raise RelocateError(f"the rewritten {target_uri} still names {len(stray)} location(s) outside the "
                                f"targets, e.g. {stray[:3]}; nothing was written")
        return Relocated(body, size, digest.hexdigest(), refs.physical_files(), refs.managed_dirs(),
                         len(result.changes))
    except BaseException:
        body.close()
        raise

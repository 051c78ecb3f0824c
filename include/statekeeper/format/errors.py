"""Exceptions of the `_metadata` codec.

Every parse failure names the object, the byte offset and what was expected, and says what to do,
because the reader of the message is an operator deciding whether a checkpoint can be trusted.
Callers that must fail closed catch MetadataFormatError (or StatekeeperError), never Exception.
"""
from __future__ import annotations

from statekeeper.errors import StatekeeperError

_DEFAULT_ADVICE = (
    "Treat this snapshot as unreadable: do not restore from it and do not delete anything it "
    "might reference until the file is repaired or replaced (re-copy it from its source, or "
    "re-run `statekeeper inspect` on a fresh copy)."
)


class MetadataFormatError(StatekeeperError):
    """A `_metadata` file could not be decoded. Carries the object URI and the byte offset."""

    advice = _DEFAULT_ADVICE

    def __init__(self, uri: str, offset: int | None, problem: str, *, advice: str | None = None):
        self.uri = uri
        self.offset = offset
        self.problem = problem
        where = f" at byte offset {offset}" if offset is not None else ""
        super().__init__(f"{uri}{where}: {problem}. {advice or self.advice}")


class NotFlinkMetadataError(MetadataFormatError):
    """The file does not start with Flink's metadata magic number."""

    advice = (
        "This is not a Flink checkpoint/savepoint `_metadata` file (or its first bytes are "
        "corrupt). Check that the path points at a `_metadata` file or a snapshot directory."
    )


class UnsupportedMetadataVersionError(MetadataFormatError):
    """Metadata version 1 (obsolete) or newer than 6 (not yet understood)."""

    advice = (
        "Statekeeper reads metadata versions 2 to 6 (Flink 1.3 to 2.3). Nothing was changed; "
        "upgrade Statekeeper before maintaining snapshots written by this Flink release."
    )


class TruncatedMetadataError(MetadataFormatError):
    """The file ends before a record is complete (partial upload, crashed copy)."""

    advice = (
        "The file is incomplete, typically an interrupted upload or copy. Do not restore from it; "
        "re-copy it from its source or fall back to an older snapshot."
    )


class CorruptMetadataError(MetadataFormatError):
    """A value is impossible for the format: bad tag, negative or oversized count, bad string."""


class UnknownHandleTagError(CorruptMetadataError):
    """A state-handle type tag this codec does not know (tags 0-17 are understood)."""

    advice = (
        "The file holds a handle type this Statekeeper version does not understand (newer Flink "
        "or corruption). Nothing was changed; do not rewrite or garbage-collect based on it."
    )


class InvalidStringError(CorruptMetadataError):
    """A length-prefixed string is not valid (Java) modified UTF-8."""


class TrailingBytesError(CorruptMetadataError):
    """Bytes follow the last record of a V2/V3 file (which has no trailer)."""


class MetadataLimitError(MetadataFormatError):
    """A declared count exceeds a cap of MetadataLimits (see format/limits.py).

    Not necessarily corrupt: the bytes may encode it, but no real Flink job comes close, so the
    file is refused before the model is built rather than let it take unbounded memory.
    """

    def __init__(self, uri: str, offset: int | None, *, what: str, where: str, declared: int,
                 limit: int, field: str, why: str):
        self.what = what
        self.declared = declared
        self.limit = limit
        self.field = field
        advice = (
            "Real Flink snapshots stay within this limit, so the file is most likely corrupt or "
            "crafted: do not restore from it and do not delete anything it might reference. If it "
            "is a real checkpoint, report it (with the Flink version and job size) and read it with "
            f"read_metadata(..., limits=MetadataLimits({field}=<larger value>))."
        )
        super().__init__(
            uri, offset, f"{what} {declared} in {where} exceeds the limit of {limit} "
            f"(MetadataLimits.{field}: {why})", advice=advice,
        )


class MetadataWriteError(StatekeeperError):
    """A model cannot be serialized as asked (invalid for its version, payload unavailable)."""

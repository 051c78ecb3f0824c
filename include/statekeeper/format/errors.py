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
    """A metadata version this codec does not read: 1 (obsolete), or one it does not know
    (`UnknownMetadataVersionError`). `version` is the number in the header."""

    advice = (
        "Statekeeper reads metadata versions 2 to 6 (Flink 1.3 to 2.3). Nothing was changed; "
        "upgrade Statekeeper before maintaining snapshots written by this Flink release."
    )

    def __init__(self, uri: str, offset: int | None, problem: str, *, version: int, advice: str | None = None):
        self.version = version
        super().__init__(uri, offset, problem, advice=advice)


# FLIP-600 (regional checkpoints, proposed upstream in 2026) writes version 7: a checkpoint may then use
# private files inside an older `chk-M/`, so a directory's files are no longer garbage when its own
# `_metadata` is gone. Reading such a file with the V6 rules would be a half-read; it is refused by name.
_V7_PROBLEM = ("metadata version 7 (FLIP-600 regional checkpoints: a V7 checkpoint may use private files "
               "inside an older chk-M/ directory, which the rules for versions 2 to 6 would call garbage)")
_UNKNOWN_ADVICE = (
    "Statekeeper reads metadata versions 2 to 6 and refuses any other by name, without reading past the "
    "header: nothing was changed, and nothing it might reference is deleted (GC stays blocked while this "
    "file is under its roots; DR copy and compaction refuse it). Do not delete any chk-*/ directory of this "
    "job by hand. Upgrade Statekeeper to a release that reads this version, or, if the snapshot is not "
    "needed, move it out of the roots and re-index."
)


class UnknownMetadataVersionError(UnsupportedMetadataVersionError):
    """A metadata version no Flink release this codec knows writes: 7 (FLIP-600, not supported yet) and
    anything above, or a value no Flink ever wrote (0, negative)."""

    advice = _UNKNOWN_ADVICE

    def __init__(self, uri: str, offset: int | None, version: int):
        if version == 7:
            problem = f"unsupported metadata version 7: {_V7_PROBLEM}"
        elif version > 7:
            problem = (f"unsupported metadata version {version}: newer than any Flink release Statekeeper knows "
                       "(versions 2 to 6 are read; 7 is FLIP-600's, refused until supported)")
        else:
            problem = f"unsupported metadata version {version}: no Flink release writes it (corrupt header?)"
        super().__init__(uri, offset, problem, version=version)


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

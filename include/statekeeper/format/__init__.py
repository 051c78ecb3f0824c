"""The Flink `_metadata` codec: read, model, write, reference extraction and edits.

Pure: imports nothing from Spark, Airflow or boto3 and parses from any seekable binary source
(`read(n)`, `seek(pos)`, `tell()`, optional `size`), e.g. `FileIO.open_input(uri)`.

    model = read_metadata(source, uri)                 # CheckpointMetadata; payloads not loaded
    model = open_metadata("/path/chk-42")              # local file or snapshot directory
    refs = extract_references(model, uri)              # .files: [FileReference], .inline: [InlineState]
    refs.physical_files()                              # {uri: size}, segments -> end of last segment
    account(model)                                     # where the bytes of the file go
    res = rewrite_prefixes(model, {"s3://a/ckpt": "s3://b/ckpt"})   # .model .changes .unmapped
    res = externalize_inline(model, uri)               # .model .files (ExternalFile: uri, payload)
    res = absolutize_relative(model, uri)              # tag 6 -> tag 2 (a _metadata written elsewhere)
    write_metadata(res.model, out, inline_source=original_source)    # streams unloaded payloads

Errors: MetadataFormatError (subclasses: NotFlinkMetadataError, UnsupportedMetadataVersionError >
UnknownMetadataVersionError (7 = FLIP-600 and any other version no Flink release writes, refused by name),
TruncatedMetadataError, CorruptMetadataError > UnknownHandleTagError / InvalidStringError /
TrailingBytesError / UnresolvableReferenceError, MetadataLimitError), each naming the object,
byte offset and cause (MetadataLimitError: a count beyond a cap of MetadataLimits, limits.py;
`read_metadata(..., limits=...)` lifts them);
MetadataWriteError for models a version cannot hold; RewriteError for unsafe edits.
Model, reader, writer, walk (one traversal for every handle), references, rewrite: one module each.
"""
from .accounting import Accounting, account
from .errors import (
    CorruptMetadataError,
    InvalidStringError,
    MetadataFormatError,
    MetadataLimitError,
    MetadataWriteError,
    NotFlinkMetadataError,
    TrailingBytesError,
    TruncatedMetadataError,
    UnknownHandleTagError,
    UnknownMetadataVersionError,
    UnsupportedMetadataVersionError,
)
from .limits import MetadataLimits
from .model import (
    EMPTY_SEGMENT,
    ByteStreamHandle,
    ChangelogEntry,
    ChangelogFileHandle,
    ChangelogHandle,
    ChannelStateHandle,
    CheckpointMetadata,
    CheckpointProperties,
    EmptySegmentFileHandle,
    FileHandle,
    FileMergingOperatorHandle,
    IncrementalKeyedHandle,
    InlineBytes,
    InMemoryChangelogHandle,
    KeyGroupsHandle,
    MasterState,
    MergedChannelEntry,
    MergedChannelStateHandle,
    NamedHandle,
    OperatorState,
    OperatorStateMeta,
    OperatorStreamHandle,
    RelativeFileHandle,
    SegmentFileHandle,
    StateChange,
    SubtaskState,
    pack_offsets,
)
from .reader import open_metadata, read_metadata
from .references import (
    EXCLUSIVE,
    MANAGED_DIR,
    SHARED,
    TASK_OWNED,
    FileReference,
    InlineState,
    InlineSummary,
    MetadataReferences,
    UnresolvableReferenceError,
    extract_references,
)
from .rewrite import (
    ExternalFile,
    ExternalizeResult,
    PathChange,
    RewriteError,
    RewriteResult,
    absolutize_relative,
    externalize_inline,
    rewrite_prefixes,
)
from .source import ByteSource
from .walk import Site, transform
from .writer import to_bytes, write_metadata

__all__ = [name for name in dir() if not name.startswith("_")]

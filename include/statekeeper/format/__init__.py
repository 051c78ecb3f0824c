"""The Flink `_metadata` codec: read, model, write, reference extraction and edits.

Pure: imports nothing from Spark, Airflow or boto3 and parses from any seekable binary source
(`read`, `seek`, `tell`, optional `size`). See docs in each module; the public surface is below.
"""
from .accounting import Accounting, account
from .errors import (
    CorruptMetadataError,
    InvalidStringError,
    MetadataFormatError,
    MetadataWriteError,
    NotFlinkMetadataError,
    TrailingBytesError,
    TruncatedMetadataError,
    UnknownHandleTagError,
    UnsupportedMetadataVersionError,
)
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
    externalize_inline,
    rewrite_prefixes,
)
from .source import ByteSource
from .walk import Site, transform
from .writer import to_bytes, write_metadata

__all__ = [name for name in dir() if not name.startswith("_")]

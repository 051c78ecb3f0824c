"""Handle type tags and their names, as defined by Flink's MetadataV2V3SerializerBase (spec §4.1).

The names are the constants of the Flink source; they are what the index stores as `handle_kind`.
"""
from __future__ import annotations

NULL_HANDLE = 0
BYTE_STREAM_STATE_HANDLE = 1
FILE_STREAM_STATE_HANDLE = 2
KEY_GROUPS_HANDLE = 3
PARTITIONABLE_OPERATOR_STATE_HANDLE = 4
INCREMENTAL_KEY_GROUPS_HANDLE = 5
RELATIVE_STREAM_STATE_HANDLE = 6
SAVEPOINT_KEY_GROUPS_HANDLE = 7
CHANGELOG_HANDLE = 8
CHANGELOG_BYTE_INCREMENT_HANDLE = 9
CHANGELOG_FILE_INCREMENT_HANDLE = 10
INCREMENTAL_KEY_GROUPS_HANDLE_V2 = 11
KEY_GROUPS_HANDLE_V2 = 12
CHANGELOG_FILE_INCREMENT_HANDLE_V2 = 13
CHANGELOG_HANDLE_V2 = 14
SEGMENT_FILE_HANDLE = 15
EMPTY_SEGMENT_FILE_HANDLE = 16
SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE = 17

TAG_NAMES: dict[int, str] = {
    v: k for k, v in dict(globals()).items() if k.isupper() and isinstance(v, int)
}

# Which tags may appear in which position (spec §4.2-§4.4).
STREAM_TAGS = frozenset({0, 1, 2, 3, 6, 15, 16})
KEYED_TAGS = frozenset({0, 3, 5, 7, 8, 9, 10, 11, 12, 13, 14})
OPERATOR_TAGS = frozenset({4, 17})

# V6 channel-state type bytes (ChannelStateHandleSerializerV2).
CHANNEL_INPUT = 1
CHANNEL_OUTPUT = 2
CHANNEL_MERGED_INPUT = 3
CHANNEL_MERGED_OUTPUT = 4
CHANNEL_TYPE_NAMES = {
    CHANNEL_INPUT: "INPUT_CHANNEL_STATE_HANDLE",
    CHANNEL_OUTPUT: "RESULT_SUBPARTITION_STATE_HANDLE",
    CHANNEL_MERGED_INPUT: "MERGED_INPUT_CHANNEL_STATE_HANDLE",
    CHANNEL_MERGED_OUTPUT: "MERGED_RESULT_SUBPARTITION_STATE_HANDLE",
}

# Pseudo kinds for inline payloads that are not behind a handle tag.
MASTER_STATE = "MASTER_STATE"

# Oldest Flink release that can read each tag (spec §4.1), used to refuse edits that would make a
# file unreadable by the release that wrote it.
TAG_MIN_RELEASE: dict[int, tuple[int, int]] = {
    0: (1, 3), 1: (1, 3), 2: (1, 3), 3: (1, 3), 4: (1, 3), 5: (1, 3), 6: (1, 11), 7: (1, 13),
    8: (1, 14), 9: (1, 14), 10: (1, 14), 11: (1, 15), 12: (1, 15), 13: (1, 16), 14: (1, 16),
    15: (1, 20), 16: (1, 20), 17: (1, 20),
}

# Oldest release writing each metadata version (spec §1.1).
VERSION_MIN_RELEASE: dict[int, tuple[int, int]] = {
    2: (1, 3), 3: (1, 11), 4: (1, 16), 5: (2, 0), 6: (2, 1),
}

SUPPORTED_VERSIONS = (2, 3, 4, 5, 6)

# Highest tag any release writing a version knows (V2: <=1.10, V3: 1.11-1.15, V4: 1.16-1.20).
# A higher tag in such a file cannot come from Flink: it is corruption, and a writer must not
# produce it either (spec §1.2: tags grow inside the serializer, independently of the version).
MAX_TAG_FOR_VERSION: dict[int, int] = {2: 5, 3: 12, 4: 17, 5: 17, 6: 17}
MAGIC = 0x4960672D
MASTER_STATE_MAGIC = 0xC96B1696 - (1 << 32)  # as a signed i32


def tag_name(tag: int) -> str:
    return TAG_NAMES.get(tag, f"UNKNOWN_TAG_{tag}")

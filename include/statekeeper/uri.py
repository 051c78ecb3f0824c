"""URI spelling rules shared by the codec, storage and graph layers.

Flink writes the same location in several spellings (`file:/x`, `file:///x`, a bare `/x`; `s3://`,
`s3a://`, `s3p://`, `s3n://`). Comparing references with listings must use one canonical form or a
live file looks unreferenced, which is how orphan cleaners delete live data (apache/iceberg#4194).
"""
from __future__ import annotations

import posixpath
from urllib.parse import unquote

# Flink's S3 plugins register these schemes for the same object store.
S3_SCHEME_ALIASES = frozenset({"s3", "s3a", "s3n", "s3p"})


def normalize_uri(uri: str) -> str:
    """Canonical form used as a join key: `file:///abs/path` or `s3://bucket/key`.

    Collapses duplicate slashes and `.`/`..` segments, drops a trailing slash, maps S3 scheme
    aliases to `s3`. Percent-encoding is decoded because Flink stores paths unencoded.
    """
    if not uri:
        raise ValueError("empty URI")
    if uri.startswith("/"):
        return "file://" + _clean_path(uri)
    scheme, sep, rest = uri.partition(":")
    if not sep or "/" in scheme:
        raise ValueError(f"not an absolute URI or path: {uri!r}")
    scheme = scheme.lower()
    if scheme == "file":
        path = rest
        if path.startswith("//"):
            # file://host/path: only an empty host or localhost is meaningful for local files.
            authority, _, tail = path[2:].partition("/")
            if authority not in ("", "localhost"):
                raise ValueError(f"file URI with a remote host is not supported: {uri!r}")
            path = "/" + tail
        return "file://" + _clean_path(unquote(path))
    if scheme in S3_SCHEME_ALIASES:
        if not rest.startswith("//"):
            raise ValueError(f"S3 URI without a bucket: {uri!r}")
        bucket, _, key = rest[2:].partition("/")
        if not bucket:
            raise ValueError(f"S3 URI without a bucket: {uri!r}")
        key = _clean_path("/" + unquote(key)).lstrip("/")
        return f"s3://{bucket}/{key}" if key else f"s3://{bucket}"
    # Other schemes (hdfs, abfs, gs, ...) keep their authority; only the path is cleaned.
    if rest.startswith("//"):
        authority, _, tail = rest[2:].partition("/")
        return f"{scheme}://{authority}{_clean_path('/' + unquote(tail))}"
    return f"{scheme}:{_clean_path(unquote(rest))}"


def _clean_path(path: str) -> str:
    cleaned = posixpath.normpath(path)
    # normpath keeps a leading '//' (POSIX allows it to be special); Flink does not.
    if cleaned.startswith("//"):
        cleaned = "/" + cleaned.lstrip("/")
    return cleaned


def join_uri(directory: str, name: str) -> str:
    """Resolve a file name relative to a directory URI (how Flink resolves tag-6 handles)."""
    return normalize_uri(directory.rstrip("/") + "/" + name)


def parent_uri(uri: str) -> str:
    """Directory that holds `uri` (normalized)."""
    norm = normalize_uri(uri)
    head, _, _ = norm.rpartition("/")
    if head.endswith(":/") or head.endswith(":"):
        raise ValueError(f"{uri!r} has no parent directory")
    return head


def is_under(uri: str, prefix: str) -> bool:
    """True when `uri` equals `prefix` or lies below it, by whole path segments."""
    u, p = normalize_uri(uri), normalize_uri(prefix)
    return u == p or u.startswith(p.rstrip("/") + "/")

"""URI spelling rules shared by the codec, storage and graph layers.

Two functions, two jobs, because an object's *address* and what Flink *opens* for a stored path
are different questions (docs/tables.md, "Canonical paths"):

* `normalize_uri` — the canonical spelling of an address: the join key between listings and
  references, and exactly what every FileIO call addresses. It unifies only spellings that reach
  the same object (`file:/x`, `file:///x`, `file://localhost/x`, a bare `/x`; the S3 scheme
  aliases `s3a`/`s3n`/`s3p`; redundant separators in a local path) and never changes the
  characters of a name: no percent-decoding (Flink stores paths unencoded, so `%41` is three
  literal characters), and an object-store key is kept verbatim (`k//x`, `k/./x` and `k/x` are
  three different S3 objects). It is idempotent.
* `flink_path_uri` — what Flink's `org.apache.flink.core.fs.Path` makes of a path string stored in
  `_metadata` (backslashes become slashes, runs of slashes collapse, a trailing slash is dropped,
  `.`/`..` segments are resolved by `URI.normalize()`, nothing is decoded), in canonical spelling.
  References are resolved with it, so a reference equals a listed object exactly when Flink would
  open that object.

Comparing references with listings through one lossy spelling is how orphan cleaners delete live
data (apache/iceberg#4194); a lossy address is how a delete hits the wrong object.
"""
from __future__ import annotations

import re

# Flink's S3 plugins register these schemes for the same object store.
S3_SCHEME_ALIASES = frozenset({"s3", "s3a", "s3n", "s3p"})
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*$")
_SLASHES = re.compile(r"/{2,}")


def normalize_uri(uri: str) -> str:
    """Canonical address: `file:///abs/path`, `s3://bucket/key` (key verbatim), `scheme://auth/path`.

    Raises ValueError for what names no object: an empty string, a relative path (`file:etc/x`,
    `x/y`), a `file:` URI with a remote host, an S3 URI without a bucket, `..` above the root.
    """
    if not uri:
        raise ValueError("empty URI")
    if uri.startswith("/"):
        return "file://" + _clean_local(uri, uri)
    scheme, rest = _split_scheme(uri)
    if scheme == "file":
        return "file://" + _clean_local(_file_path(uri, rest), uri)
    if scheme in S3_SCHEME_ALIASES:
        bucket, key = _bucket_and_key(uri, rest)
        # Only the separator between directory-like URIs and what follows goes; a key's own
        # characters are the object's identity.
        key = key.rstrip("/")
        return f"s3://{bucket}/{key}" if key else f"s3://{bucket}"
    # Other schemes (hdfs, gs, abfs, ...): authority kept, path verbatim but for a trailing slash.
    if rest.startswith("//"):
        authority, slash, tail = rest[2:].partition("/")
        path = (slash + tail).rstrip("/")
        return f"{scheme}://{authority}{path}"
    if not rest.startswith("/"):
        raise ValueError(f"not an absolute URI or path: {uri!r}")
    return f"{scheme}:{rest.rstrip('/') or '/'}"


def flink_path_uri(stored: str) -> str:
    """Canonical address of what Flink opens for `stored`, a path string from `_metadata`.

    Mirrors `new org.apache.flink.core.fs.Path(stored)`: scheme up to the first ':' before any
    '/', authority after '//', then `normalizePath` and `URI.normalize()`. A path without a scheme
    is on Flink's default file system (`file`). Raises ValueError for a relative path: Flink would
    resolve it against its own working directory, which nobody outside that process knows.
    """
    if not stored:
        raise ValueError("empty path")
    colon, slash = stored.find(":"), stored.find("/")
    scheme = None
    start = 0
    if colon != -1 and (slash == -1 or colon < slash):
        scheme = stored[:colon]
        start = colon + 1
    authority = None
    if stored.startswith("//", start) and len(stored) - start > 2:
        end = stored.find("/", start + 2)
        end = end if end > 0 else len(stored)
        authority = stored[start + 2:end]
        start = end
    raw = stored[start:].replace("\\", "/")
    if not raw and authority is not None:
        raw = "/"  # `s3://bucket`: the top of the bucket
    path = _flink_normalize(raw, stored)
    if scheme is None or scheme.lower() == "file":
        if authority not in (None, "", "localhost"):
            raise ValueError(f"file URI with a remote host is not supported: {stored!r}")
        return "file://" + path
    return normalize_uri(f"{scheme}://{authority}{path}" if authority is not None else f"{scheme}:{path}")


def _flink_normalize(path: str, original: str) -> str:
    if not path.startswith("/"):
        raise ValueError(f"not an absolute URI or path: {original!r}")
    return _resolve_dots(_SLASHES.sub("/", path), original)


def _split_scheme(uri: str) -> tuple[str, str]:
    scheme, sep, rest = uri.partition(":")
    if not sep or not _SCHEME.match(scheme):
        raise ValueError(f"not an absolute URI or path: {uri!r}")
    scheme = scheme.lower()
    return scheme, rest


def _file_path(uri: str, rest: str) -> str:
    if rest.startswith("//"):
        # file://host/path: only an empty host or localhost is meaningful for local files.
        authority, slash, tail = rest[2:].partition("/")
        if authority not in ("", "localhost"):
            raise ValueError(f"file URI with a remote host is not supported: {uri!r}")
        return slash + tail or "/"
    if not rest.startswith("/"):
        raise ValueError(f"not an absolute URI or path: {uri!r}")
    return rest


def _bucket_and_key(uri: str, rest: str) -> tuple[str, str]:
    if not rest.startswith("//"):
        raise ValueError(f"S3 URI without a bucket: {uri!r}")
    bucket, _, key = rest[2:].partition("/")
    if not bucket:
        raise ValueError(f"S3 URI without a bucket: {uri!r}")
    return bucket, key


def _clean_local(path: str, original: str) -> str:
    # On a file system `a//b`, `a/./b` and `a/b/` name one file; `..` is resolved lexically, as
    # Flink's URI.normalize() does (listings never produce it).
    return _resolve_dots(_SLASHES.sub("/", path), original)


def _resolve_dots(path: str, original: str) -> str:
    if path == "/" or ("/." not in path and not path.endswith("/")):
        return path
    out: list[str] = []
    for seg in path.split("/")[1:]:
        if seg in ("", "."):
            continue
        if seg == "..":
            if not out:
                raise ValueError(f"path climbs above the root: {original!r}")
            out.pop()
        else:
            out.append(seg)
    return "/" + "/".join(out)


def join_uri(directory: str, name: str) -> str:
    """`name` (a relative path made by Statekeeper itself: table files, job directories) below
    `directory`, in canonical spelling; the name's characters are kept."""
    return normalize_uri(directory.rstrip("/") + "/" + name.lstrip("/"))


def resolve_relative(directory: str, relative: str) -> str:
    """Where Flink finds a relative handle (tag 6): `new Path(exclusiveDir, relativePath)`, i.e.
    the directory's path, a slash, the relative path, then Flink's normalization."""
    if not relative:
        raise ValueError("empty relative path")
    prefix, path = _split_canonical(normalize_uri(directory))
    child = relative.replace("\\", "/").lstrip("/")
    return prefix + _flink_normalize(path.rstrip("/") + "/" + child, relative)


def _split_canonical(uri: str) -> tuple[str, str]:
    """(`scheme://authority` or `scheme:`, path) of a canonical URI."""
    if uri.startswith("file://"):
        return "file://", uri[len("file://"):]
    scheme, _, rest = uri.partition(":")
    if rest.startswith("//"):
        authority, slash, tail = rest[2:].partition("/")
        return f"{scheme}://{authority}", slash + tail
    return f"{scheme}:", rest


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

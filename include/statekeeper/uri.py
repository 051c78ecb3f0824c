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

Schemes and their canonical spelling (docs/storage-schemes.md has the reasoning):

* `file:///abs/path`; `s3://bucket/key` for `s3`, `s3a`, `s3n`, `s3p` (one store: AWS or the configured
  S3 endpoint).
* `gs://bucket/key`: Google Cloud Storage, key verbatim.
* `oss://bucket/key`: Alibaba OSS, key verbatim. Its own scheme, never an alias of `s3` although it is
  reached through the S3 API: a bucket `b` on OSS and a bucket `b` on AWS are different objects.
* `abfss://container@account.dfs.<suffix>/path`: Azure storage. `wasb://`, `wasbs://`, `abfs://` and
  `abfss://` with the account's `blob` or `dfs` host all name the same blob of the same account (TLS and
  endpoint are how it is reached, not what it is), so all of them map onto this one spelling; the host
  is lower-cased (DNS names are case-insensitive), container and path are kept verbatim.
* `hdfs://authority/path`: the authority lower-cased; a path without an authority (`hdfs:/p`, Flink's
  `Path.toString()` of a default-namenode path, or `hdfs:///p`) resolves against `fs.defaultFS` as Hadoop
  does, set as STATEKEEPER_HDFS_DEFAULT_FS (e.g. `hdfs://namenode:8020`). Ports are kept as written:
  `hdfs://nn/p` and `hdfs://nn:8020/p` may differ (an HA nameservice has no port).
"""
from __future__ import annotations

import os
import re

# Flink's S3 plugins register these schemes for the same object store.
S3_SCHEME_ALIASES = frozenset({"s3", "s3a", "s3n", "s3p"})
# Object stores whose URIs are `scheme://bucket/key` with the key kept verbatim.
BUCKET_SCHEMES = frozenset({"gs", "oss"})
# Hadoop's Azure connectors: Blob (wasb) and Data Lake Gen2 (abfs), each with a TLS variant.
AZURE_SCHEMES = frozenset({"abfs", "abfss", "wasb", "wasbs"})
AZURE_CANONICAL_SCHEME = "abfss"
HDFS_DEFAULT_FS_ENV = "STATEKEEPER_HDFS_DEFAULT_FS"
_AZURE_HOST = re.compile(r"^(?P<account>[a-z0-9]+)\.(?:blob|dfs)\.(?P<suffix>[a-z0-9.\-]+)$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*$")
_SLASHES = re.compile(r"/{2,}")
# What the path of a `file:///` URI may not hold to be its own normal form: `//`, a `.` or `..` segment, a trailing
# `/`. Listings and plans spell millions of URIs canonically; those are answered without taking them apart.
_LOCAL_NOT_NORMAL = re.compile(r"//|/\.\.?(?:/|$)|/$")
_VERBATIM_PREFIXES = ("s3://", "gs://", "oss://")


def normalize_uri(uri: str) -> str:
    """Canonical address: `file:///abs/path`, `s3://bucket/key` (key verbatim), `scheme://auth/path`.

    Raises ValueError for what names no object: an empty string, a relative path (`file:etc/x`,
    `x/y`), a `file:` URI with a remote host, an S3 URI without a bucket, `..` above the root.
    """
    if not uri:
        raise ValueError("empty URI")
    if _is_normal(uri):
        return uri
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
    if scheme in BUCKET_SCHEMES:
        bucket, key = _bucket_and_key(uri, rest, scheme)
        key = key.rstrip("/")
        return f"{scheme}://{bucket}/{key}" if key else f"{scheme}://{bucket}"
    if scheme in AZURE_SCHEMES:
        container, account_host, path = split_azure(uri, rest)
        path = path.rstrip("/")
        return f"{AZURE_CANONICAL_SCHEME}://{container}@{account_host}{'/' + path if path else ''}"
    if scheme == "hdfs":
        return _hdfs(uri, rest)
    # Other schemes: authority kept, path verbatim but for a trailing slash.
    if rest.startswith("//"):
        authority, slash, tail = rest[2:].partition("/")
        path = (slash + tail).rstrip("/")
        return f"{scheme}://{authority}{path}"
    if not rest.startswith("/"):
        raise ValueError(f"not an absolute URI or path: {uri!r}")
    return f"{scheme}:{rest.rstrip('/') or '/'}"


def _is_normal(uri: str) -> bool:
    """Whether `uri` is already the canonical spelling normalize_uri would return for it: `file:///path` without a
    host, a dot segment, `//` or a trailing `/`, or `s3://`/`gs://`/`oss://` with a bucket and no trailing `/`
    (their keys are verbatim). Everything else, including every spelling normalize_uri refuses, is taken apart."""
    if uri.startswith("file:///"):
        return len(uri) > 8 and _LOCAL_NOT_NORMAL.search(uri, 7) is None
    if uri.startswith(_VERBATIM_PREFIXES):
        bucket_at = uri.index("://") + 3
        return len(uri) > bucket_at and uri[bucket_at] != "/" and not uri.endswith("/")
    return False


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


def _bucket_and_key(uri: str, rest: str, scheme: str = "s3") -> tuple[str, str]:
    store = {"gs": "GCS", "oss": "OSS"}.get(scheme, "S3")
    if not rest.startswith("//"):
        raise ValueError(f"{store} URI without a bucket: {uri!r} (expected {scheme}://bucket/key)")
    bucket, _, key = rest[2:].partition("/")
    if not bucket:
        raise ValueError(f"{store} URI without a bucket: {uri!r} (expected {scheme}://bucket/key)")
    return bucket, key


def split_azure(uri: str, rest: str | None = None) -> tuple[str, str, str]:
    """(container, canonical account host `account.dfs.<suffix>`, path without its leading slash) of an
    Azure URI in any of its spellings (`abfs[s]://c@a.dfs.core.windows.net/p`, `wasb[s]://c@a.blob...`).

    Raises ValueError, naming what is missing, for a URI without a container or an account host."""
    if rest is None:
        scheme, rest = _split_scheme(uri)
        if scheme not in AZURE_SCHEMES:
            raise ValueError(f"not an Azure URI (abfs[s]:// or wasb[s]://): {uri!r}")
    expected = "expected abfss://container@account.dfs.core.windows.net/path"
    if not rest.startswith("//"):
        raise ValueError(f"Azure URI without a container and account: {uri!r} ({expected})")
    authority, _, path = rest[2:].partition("/")
    container, at, host = authority.rpartition("@")
    if not at or not container:
        raise ValueError(f"Azure URI without a container (container@account...): {uri!r} ({expected})")
    match = _AZURE_HOST.match(host.lower())
    if not match:
        raise ValueError(
            f"Azure URI without a storage account host (account.dfs.<suffix> or account.blob.<suffix>): {uri!r} "
            f"({expected}; an emulator's address goes in STATEKEEPER_AZURE_BLOB_ENDPOINT, not in the URI)"
        )
    return container, f"{match['account']}.dfs.{match['suffix']}", path


def _hdfs(uri: str, rest: str) -> str:
    authority = None
    if rest.startswith("//"):
        authority, slash, tail = rest[2:].partition("/")
        path = slash + tail
    else:
        path = rest
    if not path:
        path = "/"
    if not path.startswith("/"):
        raise ValueError(f"not an absolute URI or path: {uri!r}")
    if not authority:
        authority = hdfs_default_authority(uri)
    return f"hdfs://{authority.lower()}{path.rstrip('/')}"


def hdfs_default_authority(uri: str = "") -> str:
    """The namenode authority of `fs.defaultFS` (STATEKEEPER_HDFS_DEFAULT_FS), which Hadoop uses for an
    `hdfs:` path without one; ValueError when it is not set or is not an `hdfs://authority` URI."""
    default = os.environ.get(HDFS_DEFAULT_FS_ENV, "").strip()
    what = f"{uri!r} names no namenode" if uri else "an hdfs: path without a namenode"
    if not default:
        raise ValueError(f"{what}: set {HDFS_DEFAULT_FS_ENV} to the cluster's fs.defaultFS "
                         "(e.g. hdfs://namenode:8020), or spell the namenode in the URI")
    scheme, sep, tail = default.partition("://")
    authority = tail.split("/", 1)[0]
    if sep != "://" or scheme.lower() != "hdfs" or not authority or tail[len(authority):].strip("/"):
        raise ValueError(f"{HDFS_DEFAULT_FS_ENV}={default!r} is not an hdfs://authority URI such as "
                         "hdfs://namenode:8020 (Hadoop's fs.defaultFS)")
    return authority


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


def is_scheme_only(path: str) -> bool:
    """True for what is left of a URI with no path above its last segment (`s3:/`, `file:`)."""
    return path.endswith((":/", ":"))


def parent_uri(uri: str) -> str:
    """Directory that holds `uri` (normalized)."""
    norm = normalize_uri(uri)
    head, _, _ = norm.rpartition("/")
    if is_scheme_only(head):
        raise ValueError(f"{uri!r} has no parent directory")
    return head


def is_under(uri: str, prefix: str) -> bool:
    """True when `uri` equals `prefix` or lies below it, by whole path segments."""
    u, p = normalize_uri(uri), normalize_uri(prefix)
    return u == p or u.startswith(p.rstrip("/") + "/")

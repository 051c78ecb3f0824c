"""FileIO for `gs://bucket/key` URIs: Google Cloud Storage, or an emulator at `gcs_endpoint`.

Why Google's client library (google-cloud-storage) and not `pyarrow.fs.GcsFileSystem`: pyarrow 26
lacks what this interface promises (measured against gcp-storage-emulator, and in Arrow's gcsfs.cc):

* its FileInfo has no generation (or any version id), so a listing cannot pin later reads, deletes or
  copies to the version it saw; the generation is reachable only by opening each object;
* `get_file_info(FileSelector)` returns the whole listing as one vector, not pages;
* writes take no precondition (`ifGenerationMatch=0` for create-only), copies none on the source;
* no batch delete (one request per object).

Only reads would be left for it, and pyarrow takes no key file (only Application Default Credentials
or a raw access token), so it would need a second credential path for one operation the library does
as well. gcsfs is not an option either: every gcsfs release pins fsspec to its own version, and none
matches the fsspec this project's lock resolves to.

Versions: the object's generation is its `etag` (a decimal string). Reads pinned to a listed version
send `ifGenerationMatch` on every ranged GET, so a replaced object fails the read (ObjectChangedError)
instead of splicing two versions; copies send `ifSourceGenerationMatch`.
"""
from __future__ import annotations

import json
import re
import shutil
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timezone
from typing import Any, BinaryIO

from statekeeper.storage.base import FileIO
from statekeeper.storage.config import StorageConfig
from statekeeper.storage.errors import (
    EmptyRootError,
    ObjectChangedError,
    ObjectExistsError,
    ObjectNotFoundError,
    RootNotFoundError,
    StorageConfigError,
    StorageError,
    UnreadableObjectError,
)
from statekeeper.storage.model import (
    RETRIABLE_HTTP_STATUS,
    ConditionalDelete,
    ConditionalOutcome,
    DeleteFailure,
    DeleteRefused,
    DeleteReport,
    FileInfo,
    ListPage,
    delete_in_batches,
)
from statekeeper.storage.ranged import RangedInput
from statekeeper.uri import normalize_uri

# GCS accepts at most 100 calls in one batch request.
_GCS_BATCH_MAX = 100
# Streams larger than _SINGLE_UPLOAD_MAX go up as a resumable upload of these chunks (a multiple of
# 256 KiB); the object appears only when the last chunk is committed.
_UPLOAD_CHUNK = 16 * 1024 * 1024
_SINGLE_UPLOAD_MAX = 16 * 1024 * 1024
_REASON = re.compile(r'"reason"\s*:\s*"([^"]+)"')


def split_gs_uri(uri: str) -> tuple[str, str]:
    """(bucket, key) of a `gs://bucket/key` URI; key may be empty for the bucket."""
    norm = normalize_uri(uri)
    if not norm.startswith("gs://"):
        raise StorageError(f"not a GCS URI: {uri!r}")
    bucket, _, key = norm[len("gs://"):].partition("/")
    return bucket, key


def _api_errors() -> Any:
    from google.api_core import exceptions

    return exceptions


def _describe(exc: BaseException) -> str:
    message = getattr(exc, "message", None) or str(exc)
    return message.splitlines()[0] if message else type(exc).__name__


def _mtime(value: datetime | None) -> datetime:
    if value is None:
        return datetime.now(timezone.utc)
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def _info(bucket: str, blob: Any) -> FileInfo:
    # CRC32C is computed and checked by GCS for every object (MD5 is missing for composite objects).
    return FileInfo(f"gs://{bucket}/{blob.name}", int(blob.size or 0), _mtime(blob.updated),
                    str(blob.generation) if blob.generation is not None else None,
                    checksum=f"crc32c:{blob.crc32c}" if blob.crc32c else None)


_SCOPES = ["https://www.googleapis.com/auth/devstorage.read_write"]


def _key_credentials(info: Any) -> Any:
    """Credentials of a service-account key or an authorized-user file. Other credential configurations
    (external accounts run programs or fetch URLs named inside the file) are refused: a key handed over
    through a connection or variable must not be able to do that."""
    kind = info.get("type") if isinstance(info, dict) else None
    if kind == "service_account":
        from google.oauth2 import service_account

        return service_account.Credentials.from_service_account_info(info, scopes=_SCOPES)
    if kind == "authorized_user":
        from google.oauth2 import credentials

        return credentials.Credentials.from_authorized_user_info(info, scopes=_SCOPES)
    raise ValueError(f"credentials of type {kind!r} are not supported (a service_account key or an "
                     "authorized_user file is)")


def make_gcs_client(config: StorageConfig) -> Any:
    """A google-cloud-storage Client for `config`: anonymous for an emulator (an endpoint without
    credentials) or when gcs_anonymous, else the key's JSON, the key file, or Application Default
    Credentials (the metadata server or gcloud's login), in that order."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    options: dict[str, Any] = {}
    if config.gcs_endpoint:
        options["api_endpoint"] = config.gcs_endpoint.rstrip("/")
    has_key = bool(config.gcs_credentials_json or config.gcs_credentials_file)
    anonymous = config.gcs_anonymous if config.gcs_anonymous is not None else (
        bool(config.gcs_endpoint) and not has_key)
    project = config.gcs_project
    try:
        if anonymous:
            credentials: Any = AnonymousCredentials()
            project = project or "statekeeper"  # the client wants one; anonymous calls send none
        elif config.gcs_credentials_json or config.gcs_credentials_file:
            if config.gcs_credentials_json:
                info = json.loads(config.gcs_credentials_json)
            else:
                with open(config.gcs_credentials_file or "", encoding="utf-8") as key_file:
                    info = json.load(key_file)
            credentials = _key_credentials(info)
            project = project or info.get("project_id") or info.get("quota_project_id")
        else:
            import google.auth

            credentials, found = google.auth.default(scopes=_SCOPES)
            project = project or found
    except ValueError as exc:  # malformed JSON or key, or an unsupported kind
        raise StorageConfigError(
            f"GCS credentials are not a usable key ({exc}): GOOGLE_APPLICATION_CREDENTIALS (or "
            "STATEKEEPER_GCS_CREDENTIALS_FILE / _JSON) must hold a service-account key") from None
    except Exception as exc:  # google.auth.exceptions.DefaultCredentialsError and file errors
        raise StorageConfigError(
            f"no usable GCS credentials ({_describe(exc)}): set GOOGLE_APPLICATION_CREDENTIALS (or "
            "STATEKEEPER_GCS_CREDENTIALS_FILE) to a service-account key file, STATEKEEPER_GCS_CREDENTIALS_JSON "
            "to its JSON, or STATEKEEPER_GCS_ANONYMOUS=true for an emulator or public bucket"
        ) from None
    return storage.Client(project=project, credentials=credentials, client_options=options or None)


class GcsFileIO(FileIO):
    scheme = "gs"

    def __init__(self, config: StorageConfig | None = None) -> None:
        self.config = config or StorageConfig()
        self._client: Any = None
        self._lock = threading.Lock()

    # Clients do not pickle; Spark tasks rebuild theirs from the config.
    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["config"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"GcsFileIO({self.config!r})"

    @property
    def client(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = make_gcs_client(self.config)
        return self._client

    def _blob(self, bucket: str, key: str) -> Any:
        return self.client.bucket(bucket).blob(key)

    # -- listing ------------------------------------------------------------------------------

    def _pages(self, bucket: str, prefix: str, delimiter: str | None, page_size: int | None = None,
               max_results: int | None = None) -> Iterator[Any]:
        ex = _api_errors()
        where = f"gs://{bucket}/{prefix}"
        try:
            iterator = self.client.list_blobs(bucket, prefix=prefix or None, delimiter=delimiter,
                                              page_size=page_size or self.config.list_page_size,
                                              max_results=max_results)
            yield from iterator.pages
        except ex.NotFound as exc:
            raise RootNotFoundError(f"bucket {bucket!r} does not exist (listing {where})") from exc
        except ex.Forbidden as exc:
            raise UnreadableObjectError(f"access denied listing {where}: {_describe(exc)}") from exc
        except ex.GoogleAPICallError as exc:
            raise StorageError(f"cannot list {where}: {_describe(exc)}") from exc

    @staticmethod
    def _dir_prefix(key: str) -> str:
        return key + "/" if key else ""

    def list(self, directory: str, *, recursive: bool = True) -> Iterator[FileInfo]:
        bucket, key = split_gs_uri(directory)
        for page in self._pages(bucket, self._dir_prefix(key), None if recursive else "/"):
            for blob in page:
                if blob.name.endswith("/"):
                    continue  # zero-byte "folder" placeholders written by consoles and tools
                yield _info(bucket, blob)

    def list_dirs(self, directory: str) -> Iterator[str]:
        bucket, key = split_gs_uri(directory)
        for page in self._pages(bucket, self._dir_prefix(key), "/"):
            for prefix in sorted(page.prefixes):
                name = prefix.rstrip("/")
                if name:
                    yield f"gs://{bucket}/{name}"

    def list_page(self, directory: str, start_after: str | None = None, token: str | None = None,
                  page_size: int | None = None) -> ListPage:
        """One objects.list page of the direct children of `directory`, with their generations: from the URI
        `start_after` on (GCS's startOffset is inclusive: that name itself may come back too), or continuing
        `token`. One request, without the library's retries (the caller retries and counts)."""
        bucket, key = split_gs_uri(directory.rstrip("/"))
        prefix = self._dir_prefix(key)
        start = split_gs_uri(start_after)[1] if start_after and not token else None
        ex = _api_errors()
        try:
            iterator = self.client.list_blobs(bucket, prefix=prefix or None, delimiter="/",
                                              start_offset=max(start, prefix) if start else None,
                                              page_size=page_size or self.config.list_page_size, page_token=token,
                                              retry=None)
            page = next(iterator.pages, None)
            blobs = list(page) if page is not None else []
            prefixes = sorted(page.prefixes) if page is not None else []
        except ex.NotFound as exc:
            raise RootNotFoundError(f"bucket {bucket!r} does not exist (listing gs://{bucket}/{prefix})") from exc
        except ex.Forbidden as exc:
            raise UnreadableObjectError(f"access denied listing gs://{bucket}/{prefix}: {_describe(exc)}") from exc
        except ex.GoogleAPICallError as exc:
            raise StorageError(f"cannot list gs://{bucket}/{prefix}: {_describe(exc)}") from exc
        names = [b.name for b in blobs] + prefixes
        objects = [_info(bucket, b) for b in blobs if not b.name.endswith("/")]   # "folder" placeholders
        bound = f"gs://{bucket}/{max(names)}" if names else None
        return ListPage(objects, bound, iterator.next_page_token, len(names))

    def check_directory(self, directory: str) -> None:
        """A missing bucket raises RootNotFoundError; a prefix with no object under it raises
        EmptyRootError (a mistyped prefix and an empty directory look the same on GCS)."""
        bucket, key = split_gs_uri(directory)
        ex = _api_errors()
        try:
            found = self.client.lookup_bucket(bucket)
        except ex.Forbidden as exc:
            raise UnreadableObjectError(f"access denied to bucket {bucket!r} (root {directory})") from exc
        except ex.GoogleAPICallError as exc:
            raise StorageError(f"cannot check bucket {bucket!r}: {_describe(exc)}") from exc
        if found is None:
            raise RootNotFoundError(f"bucket {bucket!r} does not exist (root {directory})")
        if not key:
            return
        prefix = self._dir_prefix(key)
        first = next(self._pages(bucket, prefix, None, page_size=1, max_results=1), None)
        if first is None or not any(True for _ in first):
            raise EmptyRootError(f"no object under gs://{bucket}/{prefix} (root {directory}): the prefix does not "
                                 "exist or is empty")

    # -- single objects -----------------------------------------------------------------------

    def stat(self, uri: str) -> FileInfo:
        bucket, key = split_gs_uri(uri)
        if not key:
            raise ObjectNotFoundError(f"gs://{bucket} is a bucket, not an object")
        ex = _api_errors()
        try:
            blob = self.client.bucket(bucket).get_blob(key)
        except ex.NotFound:  # the bucket itself is missing
            blob = None
        except ex.Forbidden as exc:
            raise UnreadableObjectError(f"access denied to gs://{bucket}/{key}") from exc
        except ex.GoogleAPICallError as exc:
            raise StorageError(f"cannot stat gs://{bucket}/{key}: {_describe(exc)}") from exc
        if blob is None:
            raise ObjectNotFoundError(f"gs://{bucket}/{key} does not exist")
        return _info(bucket, blob)

    def open_input(self, uri: str, *, info: FileInfo | None = None) -> BinaryIO:
        bucket, key = split_gs_uri(uri)
        if info is None:
            info = self.stat(uri)
        return GcsRangedInput(self, bucket, key, size=info.size, generation=info.etag,  # type: ignore[return-value]
                              read_ahead=self.config.read_ahead_bytes)

    def write(self, uri: str, data: bytes | BinaryIO, *, if_absent: bool = False, durable: bool = True) -> FileInfo:
        bucket, key = split_gs_uri(uri)
        if not key:
            raise StorageError(f"cannot write to a bucket URI without an object name: {uri}")
        blob = self._blob(bucket, key)
        # ifGenerationMatch=0: "only if no live object has this name", checked by GCS when the upload
        # is committed, so two racing create-only writers cannot both win.
        condition = {"if_generation_match": 0} if if_absent else {}
        ex = _api_errors()
        try:
            if isinstance(data, (bytes, bytearray, memoryview)):
                blob.upload_from_string(bytes(data), content_type="application/octet-stream", **condition)
            else:
                head = data.read(_SINGLE_UPLOAD_MAX + 1)
                if len(head) <= _SINGLE_UPLOAD_MAX:
                    blob.upload_from_string(head, content_type="application/octet-stream", **condition)
                else:
                    # A resumable upload seeks back after a failed chunk, so a one-pass stream is spooled
                    # to a local temporary file first (memory stays bounded; disk holds one object).
                    with tempfile.TemporaryFile() as spool:
                        spool.write(head)
                        shutil.copyfileobj(data, spool, _UPLOAD_CHUNK)
                        size = spool.tell()
                        spool.seek(0)
                        blob.chunk_size = _UPLOAD_CHUNK
                        blob.upload_from_file(spool, size=size, content_type="application/octet-stream",
                                              **condition)
        except ex.PreconditionFailed as exc:
            raise ObjectExistsError(f"gs://{bucket}/{key} already exists (create-only write refused)") from exc
        except ex.NotFound as exc:
            raise RootNotFoundError(f"bucket {bucket!r} does not exist (writing gs://{bucket}/{key})") from exc
        except ex.Forbidden as exc:
            raise UnreadableObjectError(f"access denied writing gs://{bucket}/{key}") from exc
        except ex.GoogleAPICallError as exc:
            raise StorageError(f"cannot write gs://{bucket}/{key}: {_describe(exc)}") from exc
        return _info(bucket, blob)  # the upload's response fills size, updated and generation

    # -- bulk operations ----------------------------------------------------------------------

    def delete_many(self, uris: Iterable[str]) -> DeleteReport:
        """Batched deletes: up to 100 objects per batch request (GCS's limit, or delete_batch_size if
        lower). A 404 for one object is reported as missing; other per-object errors as failures."""
        def locate(uri: str) -> tuple[str, str, str]:
            bucket, key = split_gs_uri(uri)
            if not key:
                raise DeleteRefused("InvalidKey", "refusing to delete a bucket")
            return bucket, bucket, key

        return delete_in_batches(uris, locate, min(self.config.delete_batch_size, _GCS_BATCH_MAX), self._delete_batch)

    def _delete_batch(self, bucket: str, keys: list[str]) -> DeleteReport:
        report = DeleteReport()
        ex = _api_errors()
        handle = self.client.bucket(bucket)
        try:
            with self.client.batch(raise_exception=False) as batch:
                for key in keys:
                    handle.delete_blob(key)
            # One (status, body) per deferred call, in order. The library keeps them on the batch
            # (its public finish() is what __exit__ already called).
            responses = list(batch._responses)
        except ex.GoogleAPICallError as exc:
            report.failed.extend(DeleteFailure(f"gs://{bucket}/{k}", type(exc).__name__, _describe(exc)) for k in keys)
            return report
        if len(responses) != len(keys):
            report.failed.extend(DeleteFailure(f"gs://{bucket}/{k}", "BatchError",
                                               f"{len(responses)} responses for {len(keys)} deletes") for k in keys)
            return report
        for key, response in zip(keys, responses, strict=True):
            uri = f"gs://{bucket}/{key}"
            status = response.status_code
            if 200 <= status < 300:
                report.deleted.append(uri)
            elif status == 404:
                report.missing.append(uri)
            else:
                report.failed.append(DeleteFailure(uri, str(status), (response.text or "")[:300]))
        return report

    # At most this many version-pinned deletes per `delete_if_unchanged` call: one batch request.
    CONDITIONAL_DELETE_MAX = _GCS_BATCH_MAX

    def delete_if_unchanged(self, items: Sequence[tuple[str, str]]) -> list[ConditionalDelete]:
        """Delete each `(uri, generation)` only while `generation` is the live one: one batch request of up
        to 100 calls, all in one bucket, each carrying `ifGenerationMatch=<generation>`. GCS evaluates the
        precondition when it deletes, so an object rewritten after the caller looked at it is kept (412:
        CHANGED) and no other version than the one named can be deleted. One answer per item, in order.

        One attempt and no library retries: the caller retries what comes back `retriable` (and counts it).
        Raises ValueError for items that cannot be pinned (no object name, several buckets, a generation
        that is not a positive integer) and StorageError, caused by the client's error, when the batch
        request as a whole fails (a broken connection propagates as the transport's own exception)."""
        if not items:
            return []
        if len(items) > self.CONDITIONAL_DELETE_MAX:
            raise ValueError(f"at most {self.CONDITIONAL_DELETE_MAX} conditional deletes per batch, got {len(items)}")
        bucket: str | None = None
        calls: list[tuple[str, str, int]] = []
        for uri, generation in items:
            b, key = split_gs_uri(uri)
            if not key:
                raise ValueError(f"refusing to delete a bucket: {uri}")
            if bucket is not None and b != bucket:
                raise ValueError(f"one bucket per conditional batch delete: {uri} is not in gs://{bucket}")
            bucket = b
            if not str(generation).isdigit() or int(generation) <= 0:
                # ifGenerationMatch=0 means "only if absent": never a delete condition.
                raise ValueError(f"{uri}: {generation!r} is not an object generation")
            calls.append((f"gs://{b}/{key}", key, int(generation)))
        assert bucket is not None
        ex = _api_errors()
        handle = self.client.bucket(bucket)
        try:
            with self.client.batch(raise_exception=False) as batch:
                for _, key, generation in calls:
                    handle.delete_blob(key, if_generation_match=generation, retry=None)
            responses = list(batch._responses)   # one per deferred call, in order (see _delete_batch)
        except ex.GoogleAPICallError as exc:
            raise StorageError(f"batch delete of {len(calls)} object(s) in gs://{bucket} failed: "
                               f"{_describe(exc)}") from exc
        if len(responses) != len(calls):
            raise StorageError(f"batch delete in gs://{bucket}: {len(responses)} answers for {len(calls)} deletes")
        out = []
        for (uri, _, generation), response in zip(calls, responses, strict=True):
            status = int(response.status_code)
            text = response.text or ""
            if 200 <= status < 300:
                out.append(ConditionalDelete(uri, ConditionalOutcome.DELETED, status))
            elif status == 404:
                out.append(ConditionalDelete(uri, ConditionalOutcome.MISSING, status, "notFound"))
            elif status == 412:
                out.append(ConditionalDelete(uri, ConditionalOutcome.CHANGED, status, "conditionNotMet",
                                             f"generation {generation} is no longer the live one"))
            else:
                reason = _REASON.search(text)
                out.append(ConditionalDelete(uri, ConditionalOutcome.FAILED, status,
                                             reason.group(1) if reason else str(status), text[:300],
                                             retriable=status in RETRIABLE_HTTP_STATUS))
        return out

    def copy(self, source: str, target: str, *, info: FileInfo | None = None, if_absent: bool = False) -> FileInfo:
        """Server-side rewrite (within a bucket, or across buckets and projects this identity can read and
        write), pinned to the source generation: `info`'s (as listed, indexed or stat'ed by the caller), else one
        stat'ed first. A source replaced meanwhile fails with ObjectChangedError instead of copying another
        version; with `if_absent` the rewrite is create-only (ifGenerationMatch=0: an existing target is
        ObjectExistsError). Returns the new object as the rewrite answered (size, generation, CRC32C: no extra
        read)."""
        src_bucket, src_key = split_gs_uri(source)
        dst_bucket, dst_key = split_gs_uri(target)
        info = info if info is not None else self.stat(source)
        src_blob = self.client.bucket(src_bucket).blob(src_key)
        dst_blob = self._blob(dst_bucket, dst_key)
        ex = _api_errors()
        create = {"if_generation_match": 0} if if_absent else {}
        try:
            token, _, _ = dst_blob.rewrite(src_blob, if_source_generation_match=int(info.etag or 0) or None, **create)
            while token is not None:  # large objects across locations or classes take several calls
                token, _, _ = dst_blob.rewrite(src_blob, token=token,
                                               if_source_generation_match=int(info.etag or 0) or None, **create)
        except ex.PreconditionFailed as exc:
            # The source's and the target's preconditions both answer 412: a read of the target tells which.
            if if_absent and self._blob(dst_bucket, dst_key).exists(retry=None):
                raise ObjectExistsError(f"{target} already exists (create-only copy refused)") from exc
            raise ObjectChangedError(f"{source} changed since it was stat'ed (generation {info.etag}); "
                                     "re-list and retry") from exc
        except ex.NotFound as exc:
            raise ObjectNotFoundError(f"{source} does not exist (or the bucket of {target} does not)") from exc
        except ex.GoogleAPICallError as exc:
            raise StorageError(f"cannot copy {source} to {target}: {_describe(exc)}") from exc
        return _info(dst_bucket, dst_blob)


class GcsRangedInput(RangedInput):
    """Ranged GETs of one generation (ifGenerationMatch), raw bytes (no decompressive transcoding)."""

    def __init__(self, fileio: GcsFileIO, bucket: str, key: str, *, size: int, generation: str | None,
                 read_ahead: int) -> None:
        super().__init__(uri=f"gs://{bucket}/{key}", size=size, read_ahead=read_ahead)
        self._fileio = fileio
        self._bucket = bucket
        self._key = key
        self._generation = int(generation) if generation else None

    def _fetch(self, start: int, end: int) -> bytes:
        ex = _api_errors()
        blob = self._fileio._blob(self._bucket, self._key)
        self.requests += 1
        try:
            data = blob.download_as_bytes(start=start, end=end - 1, raw_download=True, checksum=None,
                                          if_generation_match=self._generation)
        except ex.PreconditionFailed as exc:
            raise ObjectChangedError(
                f"{self._uri} changed while being read (generation {self._generation} no longer current); "
                "re-list and retry") from exc
        except ex.NotFound as exc:
            raise ObjectNotFoundError(f"{self._uri} vanished while being read") from exc
        except ex.Forbidden as exc:
            raise UnreadableObjectError(f"access denied reading {self._uri}") from exc
        except ex.GoogleAPICallError as exc:
            raise UnreadableObjectError(f"cannot read {self._uri} bytes {start}-{end - 1}: {_describe(exc)}") from exc
        if len(data) != end - start:
            raise UnreadableObjectError(
                f"short read from {self._uri}: asked bytes {start}-{end - 1}, got {len(data)} bytes")
        return data

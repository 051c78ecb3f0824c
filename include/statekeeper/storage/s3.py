"""FileIO for `s3://` URIs through boto3 (AWS or any S3-compatible endpoint)."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timezone
from typing import Any, BinaryIO, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from statekeeper.storage.base import FileIO
from statekeeper.storage.config import StorageConfig
from statekeeper.storage.errors import (
    EmptyRootError,
    ObjectChangedError,
    ObjectExistsError,
    ObjectNotFoundError,
    RootNotFoundError,
    StorageError,
    UnreadableObjectError,
)
from statekeeper.storage.model import (
    ConditionalDelete,
    ConditionalOutcome,
    DeleteFailure,
    DeleteRefused,
    DeleteReport,
    FileInfo,
    ListPage,
    delete_in_batches,
)
from statekeeper.storage.retry import RetryPolicy, judge
from statekeeper.storage import s3_delete_body as delete_body
from statekeeper.storage.s3_delete_body import PrebuiltBodyNotSent
from statekeeper.storage.s3_stream import S3RangedInput
from statekeeper.uri import normalize_uri

_SINGLE_PUT_MAX = 64 * 1024 * 1024      # above this, streams go through multipart upload
_PART_SIZE = 64 * 1024 * 1024
_COPY_OBJECT_MAX = 5 * 1024 ** 3        # CopyObject's limit; larger objects need multipart copy
_DELETE_OBJECTS_MAX = 1000              # keys per DeleteObjects request
_MAX_PARTS = 10_000                     # parts per multipart upload


T = TypeVar("T")
# The back-off between rounds of a stat or list request the client gave up on (S3FileIO._request).
_REQUEST_RETRY = RetryPolicy(backoff_base=0.5, backoff_max=10.0)


def split_s3_uri(uri: str) -> tuple[str, str]:
    """(bucket, key) of a canonical `s3://bucket/key` URI; key may be empty for the bucket."""
    return split_bucket_uri(uri, "s3")


def split_bucket_uri(uri: str, scheme: str) -> tuple[str, str]:
    """(bucket, key) of a canonical `<scheme>://bucket/key` URI (s3, oss); key may be empty."""
    norm = normalize_uri(uri)
    if not norm.startswith(scheme + "://"):
        raise StorageError(f"not an {scheme.upper()} URI: {uri!r}")
    bucket, _, key = norm[len(scheme) + 3:].partition("/")
    return bucket, key


def _error_code(exc: ClientError) -> tuple[str, int | None]:
    return (exc.response.get("Error", {}).get("Code", "") or "",
            exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode"))


def _strip_etag(etag: str | None) -> str | None:
    return etag.strip('"') if etag else None


class S3FileIO(FileIO):
    """S3, or another store reached through the S3 API under its own scheme (`uri_scheme="oss"`: URIs in
    and out are `oss://bucket/key`, `config` holds that store's S3-API settings)."""

    scheme = "s3"

    def __init__(self, config: StorageConfig | None = None, *, uri_scheme: str = "s3") -> None:
        self.config = config or StorageConfig()
        self.uri_scheme = uri_scheme
        self._client: Any = None
        self._lock = threading.Lock()

    # boto3 clients do not pickle; Spark tasks rebuild theirs from the config.
    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config, "uri_scheme": self.uri_scheme}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["config"], uri_scheme=str(state.get("uri_scheme", "s3")))  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"S3FileIO({self.config!r})" if self.uri_scheme == "s3" else \
            f"S3FileIO({self.config!r}, uri_scheme={self.uri_scheme!r})"

    def _split(self, uri: str) -> tuple[str, str]:
        return split_bucket_uri(uri, self.uri_scheme)

    @property
    def client(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    # config.max_attempts counts every attempt (1: the client never retries behind its caller's
                    # back, as the bulk engine needs), as the GCS and Azure FileIOs count them.
                    self._client = make_s3_client(self.config, max_attempts=self.config.max_attempts)
        return self._client

    # -- listing ------------------------------------------------------------------------------

    def _request(self, send: Callable[[], T]) -> T:
        """One request, tried again with jittered back-off while its failure is retriable (throttling, 5xx, no
        answer) after the client gave up on it: botocore's standard mode stops retrying when its attempts are spent
        or, under a long SlowDown storm, when the client's retry quota is drained, and a scan (the GC's re-list, an
        index listing) should slow down rather than fail. A client told never to retry (max_attempts=1, the bulk
        engine's, which retries and counts itself) is not retried here either."""
        attempts = self.config.max_attempts
        attempt = 1
        while True:
            try:
                return send()
            except (ClientError, BotoCoreError) as exc:
                if attempt >= attempts or not judge(exc).retriable:
                    raise
            time.sleep(_REQUEST_RETRY.delay(attempt))
            attempt += 1

    def _paginate(self, bucket: str, prefix: str, delimiter: str | None,
                  page_size: int | None = None) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": page_size or self.config.list_page_size}
        if delimiter:
            kwargs["Delimiter"] = delimiter
        while True:
            page = self._list_objects(kwargs, retry=True)
            yield page
            token = page.get("NextContinuationToken") if page.get("IsTruncated") else None
            if not token:
                return
            kwargs["ContinuationToken"] = token

    def _list_objects(self, kwargs: dict[str, Any], *, retry: bool) -> dict[str, Any]:
        """One ListObjectsV2 request (`retry`: through `_request`), its failures as the FileIO's errors."""
        bucket, prefix = kwargs["Bucket"], kwargs["Prefix"]
        where = f"{self.uri_scheme}://{bucket}/{prefix}"
        try:
            if retry:
                return self._request(lambda: self.client.list_objects_v2(**kwargs))
            return self.client.list_objects_v2(**kwargs)
        except ClientError as exc:
            code, status = _error_code(exc)
            if code == "NoSuchBucket":
                raise RootNotFoundError(f"bucket {bucket!r} does not exist (listing {where})") from exc
            if code == "AccessDenied" or status == 403:
                raise UnreadableObjectError(f"access denied listing {where}") from exc
            raise StorageError(f"cannot list {where}: {code or exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"cannot list {where}: {exc}") from exc

    @staticmethod
    def _dir_prefix(key: str) -> str:
        return key + "/" if key else ""

    def list(self, directory: str, *, recursive: bool = True) -> Iterator[FileInfo]:
        bucket, key = self._split(directory)
        for page in self._paginate(bucket, self._dir_prefix(key), None if recursive else "/"):
            for obj in page.get("Contents", ()):
                k = obj["Key"]
                if k.endswith("/"):
                    # Zero-byte "directory marker" objects written by consoles and some tools.
                    continue
                yield FileInfo(f"{self.uri_scheme}://{bucket}/{k}", int(obj["Size"]), obj["LastModified"],
                               _strip_etag(obj.get("ETag")))

    def list_dirs(self, directory: str) -> Iterator[str]:
        bucket, key = self._split(directory)
        for page in self._paginate(bucket, self._dir_prefix(key), "/"):
            for common in page.get("CommonPrefixes", ()):
                prefix = common["Prefix"].rstrip("/")
                if prefix:
                    yield f"{self.uri_scheme}://{bucket}/{prefix}"

    def list_page(self, directory: str, start_after: str | None = None, token: str | None = None,
                  page_size: int | None = None) -> ListPage:
        """One ListObjectsV2 page of the direct children of `directory`, with their ETags: from just after the URI
        `start_after` (S3's StartAfter), or continuing `token`. One request, no retries but the client's."""
        bucket, key = self._split(directory.rstrip("/"))
        prefix = self._dir_prefix(key)
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "Delimiter": "/",
                                  "MaxKeys": page_size or self.config.list_page_size}
        if token:
            kwargs["ContinuationToken"] = token
        elif start_after:
            kwargs["StartAfter"] = max(prefix, self._split(start_after)[1])
        response = self._list_objects(kwargs, retry=False)
        contents = response.get("Contents", ())
        prefixes = response.get("CommonPrefixes", ())
        objects = [FileInfo(f"{self.uri_scheme}://{bucket}/{o['Key']}", int(o["Size"]), _utc(o["LastModified"]),
                            _strip_etag(o.get("ETag")))
                   for o in contents if not o["Key"].endswith("/")]   # "directory markers" are no files
        # A common prefix ("sub/") stands for every key below it, none of which is a direct child.
        ends = [contents[-1]["Key"]] if contents else []
        if prefixes:
            ends.append(prefixes[-1]["Prefix"])
        bound = f"{self.uri_scheme}://{bucket}/{max(ends)}" if ends else None
        next_token = response.get("NextContinuationToken") if response.get("IsTruncated") else None
        return ListPage(objects, bound, next_token, len(contents) + len(prefixes))

    def check_directory(self, directory: str) -> None:
        """A missing bucket raises RootNotFoundError; a prefix with no object under it (not even a
        directory marker) raises EmptyRootError: on S3 a mistyped prefix and an empty directory
        look the same, and indexing a typo as an empty root would lie."""
        bucket, key = self._split(directory)
        try:
            self.client.head_bucket(Bucket=bucket)
        except ClientError as exc:
            code, status = _error_code(exc)
            if status == 404 or code in ("NoSuchBucket", "404"):
                raise RootNotFoundError(f"bucket {bucket!r} does not exist (root {directory})") from exc
            if status == 403:
                raise UnreadableObjectError(f"access denied to bucket {bucket!r} (root {directory})") from exc
            raise StorageError(f"cannot check bucket {bucket!r}: {code or exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"cannot reach the S3 endpoint for {directory}: {exc}") from exc
        if not key:
            return  # a whole bucket: its existence is the check
        prefix = self._dir_prefix(key)
        first = next(self._paginate(bucket, prefix, None, page_size=1), {})  # one request: is there any key?
        if not first.get("KeyCount", len(first.get("Contents", ()))):
            raise EmptyRootError(f"no object under {self.uri_scheme}://{bucket}/{prefix} (root {directory}): "
                                 "the prefix does not exist or is empty")

    # -- single objects -----------------------------------------------------------------------

    def stat(self, uri: str) -> FileInfo:
        bucket, key = self._split(uri)
        try:
            head = self._request(lambda: self.client.head_object(Bucket=bucket, Key=key))
        except ClientError as exc:
            code, status = _error_code(exc)
            if status == 404 or code in ("NoSuchKey", "404", "NotFound"):
                raise ObjectNotFoundError(f"{self.uri_scheme}://{bucket}/{key} does not exist") from exc
            if status == 403:
                raise UnreadableObjectError(f"access denied to {self.uri_scheme}://{bucket}/{key}") from exc
            raise StorageError(f"cannot stat {self.uri_scheme}://{bucket}/{key}: {code or exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"cannot stat {self.uri_scheme}://{bucket}/{key}: {exc}") from exc
        mtime = head["LastModified"]
        if mtime.tzinfo is None:
            mtime = mtime.replace(tzinfo=timezone.utc)
        return FileInfo(f"{self.uri_scheme}://{bucket}/{key}", int(head["ContentLength"]), mtime,
                        _strip_etag(head.get("ETag")))

    def open_input(self, uri: str, *, info: FileInfo | None = None) -> BinaryIO:
        bucket, key = self._split(uri)
        if info is None:
            info = self.stat(uri)
        stream = S3RangedInput(self.client, bucket, key, uri=f"{self.uri_scheme}://{bucket}/{key}", size=info.size,
                               etag=info.etag, read_ahead=self.config.read_ahead_bytes)
        return stream  # type: ignore[return-value]

    def write(self, uri: str, data: bytes | BinaryIO, *, if_absent: bool = False, durable: bool = True) -> FileInfo:
        bucket, key = self._split(uri)
        if not key:
            raise StorageError(f"cannot write to a bucket URI without a key: {uri}")
        try:
            if isinstance(data, (bytes, bytearray, memoryview)):
                body = bytes(data)
                etag, size = self._put(bucket, key, body, if_absent), len(body)
            else:
                head = data.read(_SINGLE_PUT_MAX + 1)
                if len(head) <= _SINGLE_PUT_MAX:
                    etag, size = self._put(bucket, key, head, if_absent), len(head)
                else:
                    etag, size = self._multipart(bucket, key, head, data, if_absent)
        except ClientError as exc:
            code, status = _error_code(exc)
            if if_absent and (status == 412 or code in ("PreconditionFailed", "ConditionalRequestConflict")):
                raise ObjectExistsError(f"{self.uri_scheme}://{bucket}/{key} already exists") from exc
            raise StorageError(f"cannot write {self.uri_scheme}://{bucket}/{key}: {code or exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"cannot write {self.uri_scheme}://{bucket}/{key}: {exc}") from exc
        # Size and ETag come from the request/response; mtime is this client's clock (a HEAD per
        # write would double the request count of table writes). stat() gives the server's.
        return FileInfo(f"{self.uri_scheme}://{bucket}/{key}", size, datetime.now(timezone.utc), _strip_etag(etag))

    def _put(self, bucket: str, key: str, body: bytes, if_absent: bool) -> str | None:
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key, "Body": body}
        if if_absent:
            kwargs["IfNoneMatch"] = "*"
        return self.client.put_object(**kwargs).get("ETag")

    def _multipart(self, bucket: str, key: str, first: bytes, rest: BinaryIO, if_absent: bool) -> tuple[str | None, int]:
        upload_id = self.client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        try:
            parts = []
            total = 0
            buf, eof, number = first, False, 1
            while buf or not eof:
                # Keep more than one part buffered so the final part absorbs any remainder: every
                # part but the last must be at least 5 MiB.
                if not eof and len(buf) < 2 * _PART_SIZE:
                    more = rest.read(_PART_SIZE)
                    if more:
                        buf += more
                        continue
                    eof = True
                if eof:
                    piece, buf = buf, b""
                else:
                    piece, buf = buf[:_PART_SIZE], buf[_PART_SIZE:]
                total += len(piece)
                etag = self.client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id,
                                               PartNumber=number, Body=piece)["ETag"]
                parts.append({"ETag": etag, "PartNumber": number})
                number += 1
            kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key, "UploadId": upload_id,
                                      "MultipartUpload": {"Parts": parts}}
            if if_absent:
                kwargs["IfNoneMatch"] = "*"
            return self.client.complete_multipart_upload(**kwargs).get("ETag"), total
        except BaseException:
            try:
                self.client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
            except (ClientError, BotoCoreError):
                pass  # the original error matters; a lifecycle rule reaps leftovers
            raise

    # -- bulk operations ----------------------------------------------------------------------

    def delete_many(self, uris: Iterable[str]) -> DeleteReport:
        def locate(uri: str) -> tuple[str, str, str]:
            bucket, key = self._split(uri)
            if not key:
                raise DeleteRefused("InvalidKey", "refusing to delete a bucket")
            return bucket, bucket, key

        return delete_in_batches(uris, locate, self.config.delete_batch_size, self._delete_batch)

    def _delete_batch(self, bucket: str, keys: list[str]) -> DeleteReport:
        report = DeleteReport()
        try:
            response = self._send_delete_objects(bucket, keys)
        except (ClientError, BotoCoreError, PrebuiltBodyNotSent) as exc:
            code = _error_code(exc)[0] if isinstance(exc, ClientError) else type(exc).__name__
            report.failed.extend(DeleteFailure(f"{self.uri_scheme}://{bucket}/{k}", code or "Error", str(exc))
                                 for k in keys)
            return report
        failed = {e["Key"]: e for e in response.get("Errors", ())}
        for k in keys:
            if k in failed:
                err = failed[k]
                report.failed.append(DeleteFailure(f"{self.uri_scheme}://{bucket}/{k}", err.get("Code", "Error"),
                                                   err.get("Message", "")))
            else:
                report.deleted.append(f"{self.uri_scheme}://{bucket}/{k}")
        return report

    # At most this many deletes per `delete_if_unchanged` / `delete_batch` call: one DeleteObjects request.
    CONDITIONAL_DELETE_MAX = _DELETE_OBJECTS_MAX

    def delete_if_unchanged(self, items: Sequence[tuple[str, str]]) -> list[ConditionalDelete]:
        """Delete each `(uri, etag)` only while `etag` is its current ETag: one DeleteObjects request of up to 1,000
        keys of one bucket, each object carrying its ETag (S3's conditional delete, general-purpose buckets since
        2025-09; it needs s3:GetObject besides s3:DeleteObject). S3 evaluates the precondition when it deletes, so an
        object rewritten after the caller looked at it is kept (`PreconditionFailed`: CHANGED) and a missing one is
        answered `NoSuchKey` (MISSING). One answer per item, in order.

        A store that accepts the per-object ETag and ignores it deletes unconditionally: such stores need the
        listing re-check, never this (the GC deleter uses it only where statekeeper.storage.enforcement's
        self-test proved the store refuses a wrong ETag). One attempt, no client retries
        expected (the caller retries what comes back `retriable`, and counts it). Raises ValueError for items that
        cannot be pinned (no key, several buckets, no ETag) and StorageError, caused by the client's error, when
        the request as a whole fails."""
        bucket, keys = self._one_bucket([uri for uri, _ in items])
        etags = []
        for uri, etag in items:
            bare = str(etag).strip('"') if etag else ""
            if not bare:
                raise ValueError(f"{uri}: no ETag to make the delete conditional on")
            etags.append(f'"{bare}"')
        errors = self._delete_objects(bucket, keys, etags)
        # Each answer names its URI as given: `scheme://bucket/key`, as _one_bucket checked.
        if not errors:   # the usual answer
            return [ConditionalDelete(uri, ConditionalOutcome.DELETED, 200) for uri, _ in items]
        out = []
        for key, (uri, etag) in zip(keys, items, strict=True):
            err = errors.get(key)
            if err is None:
                out.append(ConditionalDelete(uri, ConditionalOutcome.DELETED, 200))
                continue
            code, message = str(err.get("Code") or "Error"), str(err.get("Message") or "")
            if code == "PreconditionFailed":
                out.append(ConditionalDelete(uri, ConditionalOutcome.CHANGED, 412, code,
                                             f"ETag {etag} is no longer the object's: {message}"))
            elif code == "NoSuchKey":
                out.append(ConditionalDelete(uri, ConditionalOutcome.MISSING, 404, code, message))
            else:
                out.append(_failed_delete(uri, code, message))
        return out

    def delete_batch(self, uris: Sequence[str]) -> list[ConditionalDelete]:
        """Delete keys of one bucket unconditionally (one DeleteObjects request of up to 1,000): for the listing
        re-check of a store that ignores delete preconditions, after the re-check. One answer per URI, in order:
        DELETED (S3 reports a key that was already gone as deleted too) or FAILED."""
        bucket, keys = self._one_bucket(list(uris))
        errors = self._delete_objects(bucket, keys)
        out = []
        for key in keys:
            uri = f"{self.uri_scheme}://{bucket}/{key}"
            err = errors.get(key)
            out.append(ConditionalDelete(uri, ConditionalOutcome.DELETED, 200) if err is None else
                       _failed_delete(uri, str(err.get("Code") or "Error"), str(err.get("Message") or "")))
        return out

    def _one_bucket(self, uris: list[str]) -> tuple[str, list[str]]:
        if len(uris) > _DELETE_OBJECTS_MAX:
            raise ValueError(f"at most {_DELETE_OBJECTS_MAX} deletes per DeleteObjects request, got {len(uris)}")
        bucket: str | None = None
        keys = []
        scheme = self.uri_scheme + "://"
        for uri in uris:
            # Canonical URIs in (the FileIO contract): split, not re-normalize, a thousand per request.
            if not uri.startswith(scheme):
                raise ValueError(f"not an {self.uri_scheme.upper()} URI: {uri!r}")
            b, _, key = uri[len(scheme):].partition("/")
            if not key:
                raise ValueError(f"refusing to delete a bucket: {uri}")
            if bucket is not None and b != bucket:
                raise ValueError(f"one bucket per DeleteObjects request: {uri} is not in {self.uri_scheme}://{bucket}")
            bucket = b
            keys.append(key)
        if bucket is None:
            raise ValueError("no keys to delete")
        return bucket, keys

    def _delete_objects(self, bucket: str, keys: list[str],
                        etags: list[str] | None = None) -> dict[str, dict[str, Any]]:
        try:
            response = self._send_delete_objects(bucket, keys, etags)
        except (ClientError, BotoCoreError, PrebuiltBodyNotSent) as exc:
            raise StorageError(f"DeleteObjects of {len(keys)} key(s) in {self.uri_scheme}://{bucket} failed: "
                               f"{exc}") from exc
        return {e.get("Key"): e for e in response.get("Errors", ())}

    def _send_delete_objects(self, bucket: str, keys: list[str], etags: list[str] | None = None) -> dict[str, Any]:
        """One quiet DeleteObjects request (only failed keys are answered), its body built by
        statekeeper.storage.s3_delete_body rather than by botocore's serializer (the GC's hot loop)."""
        with delete_body.sending(delete_body.delete_objects_body(keys, etags)):
            return self.client.delete_objects(Bucket=bucket, Delete=delete_body.PLACEHOLDER)

    def copy(self, source: str, target: str, *, info: FileInfo | None = None, if_absent: bool = False,
             single_max: int = _COPY_OBJECT_MAX, part_size: int = _PART_SIZE) -> FileInfo:
        """Server-side copy within this store, pinned to the source version: `info`'s ETag (as indexed or listed by
        the caller: no request to learn it), else the source is stat'ed first. CopySourceIfMatch makes S3 refuse a
        source that changed since (ObjectChangedError); a missing source is ObjectNotFoundError. With `if_absent`
        the copy is create-only (If-None-Match: *): an existing target is ObjectExistsError. Above `single_max`
        (at most CopyObject's 5 GiB), `part_size` parts are copied with UploadPartCopy, each pinned the same way. Returns the new object as the copy answered it
        (size of the pinned version, its new ETag): one request for objects up to 5 GiB."""
        src_bucket, src_key = self._split(source)
        dst_bucket, dst_key = self._split(target)
        if info is None:
            info = self.stat(source)
        src = {"Bucket": src_bucket, "Key": src_key}
        pin = {"CopySourceIfMatch": f'"{info.etag}"'} if info.etag else {}
        create = {"IfNoneMatch": "*"} if if_absent else {}
        try:
            if info.size <= min(single_max, _COPY_OBJECT_MAX):
                response = self.client.copy_object(CopySource=src, Bucket=dst_bucket, Key=dst_key, **pin, **create)
                result = response.get("CopyObjectResult") or {}
                etag, mtime = _strip_etag(result.get("ETag")), result.get("LastModified")
            else:
                etag, mtime = self._copy_parts(src, dst_bucket, dst_key, info.size, pin, create, part_size), None
        except ClientError as exc:
            code, status = _error_code(exc)
            if code == "PreconditionFailed" or status == 412:
                # The source's If-Match and the target's If-None-Match both answer 412: a HEAD of the target tells.
                if if_absent and self._exists(dst_bucket, dst_key):
                    raise ObjectExistsError(f"{target} already exists (create-only copy refused)") from exc
                raise ObjectChangedError(f"{source} changed since it was listed (ETag {info.etag} no longer "
                                         "current); the copy was refused by the store") from exc
            if code in ("NoSuchKey", "NotFound") or (status == 404 and code not in ("NoSuchBucket", "NoSuchUpload")):
                raise ObjectNotFoundError(f"{source} does not exist") from exc
            if code == "NoSuchBucket":
                raise RootNotFoundError(f"the bucket of {source} or {target} does not exist") from exc
            raise StorageError(f"cannot copy {source} to {target}: {code or exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"cannot copy {source} to {target}: {exc}") from exc
        return FileInfo(f"{self.uri_scheme}://{dst_bucket}/{dst_key}", info.size,
                        _utc(mtime) if mtime is not None else datetime.now(timezone.utc), etag)

    def _exists(self, bucket: str, key: str) -> bool:
        try:
            self.client.head_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            code, status = _error_code(exc)
            if status == 404 or code in ("NoSuchKey", "404", "NotFound"):
                return False
            raise
        return True

    def _copy_parts(self, src: dict[str, str], bucket: str, key: str, size: int, pin: dict[str, str],
                    create: dict[str, str], part_size: int = _PART_SIZE) -> str | None:
        part = part_size_for(size, part_size)
        upload_id = self.client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        try:
            parts = []
            for number, start in enumerate(range(0, size, part), start=1):
                end = min(size, start + part) - 1
                response = self.client.upload_part_copy(Bucket=bucket, Key=key, UploadId=upload_id,
                                                        PartNumber=number, CopySource=src,
                                                        CopySourceRange=f"bytes={start}-{end}", **pin)
                parts.append({"ETag": response["CopyPartResult"]["ETag"], "PartNumber": number})
            done = self.client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id,
                                                         MultipartUpload={"Parts": parts}, **create)
            return _strip_etag(done.get("ETag"))
        except BaseException:
            abort_upload(self.client, bucket, key, upload_id)
            raise


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def _failed_delete(uri: str, code: str, message: str) -> ConditionalDelete:
    from statekeeper.storage.retry import judge_code

    judged = judge_code(code)
    return ConditionalDelete(uri, ConditionalOutcome.FAILED, None, code, message, retriable=judged.retriable)


def part_size_for(size: int, part_size: int) -> int:
    """`part_size`, raised where needed so that `size` fits in S3's 10,000 parts (1 MiB steps)."""
    needed = -(-size // _MAX_PARTS)
    mib = 1024 * 1024
    return min(_COPY_OBJECT_MAX, max(part_size, -(-needed // mib) * mib))


def abort_upload(client: Any, bucket: str, key: str, upload_id: str) -> None:
    import logging

    try:
        client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
    except (ClientError, BotoCoreError) as exc:
        # The original error matters more; a lifecycle rule for incomplete uploads reaps the parts.
        logging.getLogger("statekeeper.storage.s3").warning(
            "could not abort multipart upload %s of s3://%s/%s (%s); its parts stay billed until an "
            "AbortIncompleteMultipartUpload lifecycle rule removes them", upload_id, bucket, key, exc)


def _observe_throttling(response: Any = None, **_: Any) -> None:
    """botocore `needs-retry` hook: a throttled attempt the client will retry itself slows the prefix of the bulk
    engine worker that made it (statekeeper.storage.bulk.note_throttled; elsewhere a no-op)."""
    if not response:
        return
    http, parsed = response
    status = getattr(http, "status_code", None)
    code = (parsed or {}).get("Error", {}).get("Code", "") if isinstance(parsed, dict) else ""
    from statekeeper.storage.retry import judge_code

    if status and status >= 400 and judge_code(code, status).throttled:
        from statekeeper.storage.bulk import note_throttled

        note_throttled()


def make_s3_client(config: StorageConfig, *, max_attempts: int | None = None,
                   max_pool_connections: int | None = None) -> Any:
    """A boto3 S3 client for `config`. `max_attempts` overrides config.max_attempts as the total
    number of attempts per request: 1 turns botocore's own retries off, for callers that retry (and
    count retries) themselves, e.g. the GC deleter."""
    import boto3
    from botocore.config import Config

    # botocore's "max_attempts" counts retries after the first attempt (max_attempts=1 still retries
    # once); "total_max_attempts" counts every attempt, which is what the override means.
    retries: dict[str, Any] = ({"max_attempts": config.max_attempts, "mode": "standard"} if max_attempts is None
                               else {"total_max_attempts": max_attempts, "mode": "standard"})
    botocore_config = Config(
        region_name=config.region,
        retries=retries,
        max_pool_connections=max(max_pool_connections or 0, config.max_pool_connections),
        s3={"addressing_style": "path" if config.use_path_style else "auto"},
        # Every parameter is built by this package from typed values, and S3 rejects a malformed request itself;
        # botocore's check walks every member of a request: 40% of the client's CPU for a 1,000-key
        # DeleteObjects (the GC's hot loop). Bucket names are still checked before a request is built.
        parameter_validation=False,
    )
    kwargs: dict[str, Any] = {"config": botocore_config, "region_name": config.region}
    if config.endpoint:
        kwargs["endpoint_url"] = config.endpoint
    if config.access_key_id:
        kwargs["aws_access_key_id"] = config.access_key_id
        kwargs["aws_secret_access_key"] = config.secret_access_key
        if config.session_token:
            kwargs["aws_session_token"] = config.session_token
    # A private session (boto3.client() shares a global default session across threads, and a session caches the
    # credentials it resolved), over the process's one model loader.
    client = boto3.session.Session(botocore_session=_botocore_session()).client("s3", **kwargs)
    delete_body.install(client)
    if (config.max_attempts if max_attempts is None else max_attempts) > 1:
        client.meta.events.register("needs-retry.s3", _observe_throttling)
    return client


_LOADER_LOCK = threading.Lock()
_LOADER: Any = None   # the process's botocore loader (_botocore_session)


def _botocore_session() -> Any:
    """A new botocore session that reads service models through the process's one loader. A fresh session loads
    and parses S3's model and endpoint rules again (0.15-0.2 s), and every Spark task that touches S3 makes a
    client of its own; the loader caches what it parsed, and the models are read-only."""
    import botocore.session
    from botocore.loaders import create_loader

    global _LOADER
    with _LOADER_LOCK:
        if _LOADER is None:
            _LOADER = create_loader()
        core = botocore.session.get_session()
        core.register_component("data_loader", _LOADER)
    return core

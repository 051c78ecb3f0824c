"""Seekable read stream over an S3 object using ranged GETs and a read-ahead buffer.

The codec reads `_metadata` as many small reads with occasional seeks; one GET per small read would
be ruinous, one GET for a multi-GB `_metadata` would hold it all in memory. A single read-ahead
window (default 4 MiB) gives sequential reads one request per window and bounded memory.
Every GET carries If-Match with the ETag seen at open, so a concurrent overwrite fails the read
instead of silently splicing two versions.
"""
from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from statekeeper.storage.errors import (
    ObjectChangedError,
    ObjectNotFoundError,
    StorageError,
    UnreadableObjectError,
)
from statekeeper.storage.ranged import RangedInput


class S3RangedInput(RangedInput):
    def __init__(self, client: Any, bucket: str, key: str, *, uri: str, size: int, etag: str | None,
                 read_ahead: int) -> None:
        super().__init__(uri=uri, size=size, read_ahead=read_ahead)
        self._client = client
        self._bucket = bucket
        self._key = key
        self._etag = etag

    # -- fetching -------------------------------------------------------------------------------

    def _fetch(self, start: int, end: int) -> bytes:
        kwargs: dict[str, Any] = {"Bucket": self._bucket, "Key": self._key, "Range": f"bytes={start}-{end - 1}"}
        if self._etag:
            kwargs["IfMatch"] = f'"{self._etag}"'
        self.requests += 1
        try:
            response = self._client.get_object(**kwargs)
            data = response["Body"].read()
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("PreconditionFailed",) or status == 412:
                raise ObjectChangedError(
                    f"{self._uri} changed while being read (ETag {self._etag} no longer current); re-list and retry"
                ) from exc
            if code in ("NoSuchKey", "404") or status == 404:
                raise ObjectNotFoundError(f"{self._uri} vanished while being read") from exc
            if code in ("AccessDenied", "403") or status == 403:
                raise UnreadableObjectError(f"access denied reading {self._uri}") from exc
            raise UnreadableObjectError(f"cannot read {self._uri} bytes {start}-{end - 1}: {code or exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"cannot read {self._uri}: {exc}") from exc
        if len(data) != end - start:
            raise UnreadableObjectError(
                f"short read from {self._uri}: asked bytes {start}-{end - 1}, got {len(data)} bytes"
            )
        return data

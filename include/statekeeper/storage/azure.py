"""FileIO for Azure storage: `abfss://container@account.dfs.<suffix>/path` (canonical) and every
spelling that maps onto it (`abfs://`, `wasb[s]://container@account.blob.<suffix>/...`).

Through the Blob API with Microsoft's client library (azure-storage-blob), not `pyarrow.fs.AzureFileSystem`:
measured against Azurite with pyarrow 26, and in Arrow's azurefs.cc,

* `open_output_stream` replaces the blob with an EMPTY one when it is opened and commits the new
  content only at close, so a reader in between sees a zero-byte object: no atomic replace;
* ranged reads send no `If-Match`, so a blob replaced while being read mixes two versions silently;
* its FileInfo has no ETag and a modification time in whole seconds (the version cannot be pinned);
* no conditional create (`If-None-Match: *`) and no batch delete; listings come back as one vector.

adlfs (fsspec) wraps the same library and would add an async layer, aiohttp and azure-identity, and still
not pin reads to an ETag; the library alone does all of it. Blob and Data Lake Gen2 (hierarchical
namespace) accounts both serve the Blob API; on the latter, directories show up in blob listings as
zero-byte blobs with metadata `hdi_isfolder=true`, which are skipped (they are not files).

Credentials: an account key or a SAS token (StorageConfig.azure_account_key / azure_sas_token); Azure AD
credentials would need azure-identity, which is not installed.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timezone
from typing import Any, BinaryIO

from statekeeper.storage.base import FileIO
from statekeeper.storage.config import StorageConfig
from statekeeper.storage.errors import (
    EmptyRootError,
    NotRegularFileError,
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
    ObjectType,
    delete_in_batches,
)
from statekeeper.storage.ranged import RangedInput
from statekeeper.uri import AZURE_CANONICAL_SCHEME, normalize_uri, split_azure

log = logging.getLogger("statekeeper.storage.azure")

# Blob batch requests carry at most 256 sub-requests.
_AZURE_BATCH_MAX = 256
# Statuses with which an account refuses a Blob Batch request as such (the feature, not one blob); the
# same deletes then go as single requests. 403 (credentials) and 404 (container) are real failures.
_BATCH_REFUSED = frozenset({400, 405, 409, 501})
_COPY_POLL_S = 0.2
_COPY_TIMEOUT_S = 600.0


class AzureLocation:
    """One blob (or container, or prefix) of an Azure URI, in canonical spelling."""

    __slots__ = ("account", "suffix", "container", "path")

    def __init__(self, uri: str) -> None:
        norm = normalize_uri(uri)
        if not norm.startswith(AZURE_CANONICAL_SCHEME + "://"):
            raise StorageError(f"not an Azure URI (abfs[s]:// or wasb[s]://): {uri!r}")
        self.container, host, self.path = split_azure(norm)
        self.account, _, rest = host.partition(".")
        self.suffix = rest[len("dfs."):]

    @property
    def base(self) -> str:
        return f"{AZURE_CANONICAL_SCHEME}://{self.container}@{self.account}.dfs.{self.suffix}"

    def uri(self, name: str | None = None) -> str:
        name = self.path if name is None else name
        return f"{self.base}/{name}" if name else self.base


def _errors() -> Any:
    from azure.core import exceptions

    return exceptions


def _describe(exc: BaseException) -> str:
    code = getattr(exc, "error_code", None)
    message = (getattr(exc, "message", None) or str(exc)).splitlines()[0]
    return f"{code}: {message}" if code else message


def _etag(value: Any) -> str | None:
    return str(value).strip('"') if value else None


def _md5(props: Any) -> str | None:
    """`md5:<hex>` of the blob's Content-MD5, which the service computes for a single-shot Put Blob (a blob
    committed from blocks has one only if its writer set it): a content hash transfers compare."""
    settings = getattr(props, "content_settings", None)
    digest = getattr(settings, "content_md5", None) if settings is not None else None
    return f"md5:{bytes(digest).hex()}" if digest else None


def _mtime(value: datetime | None) -> datetime:
    if value is None:
        return datetime.now(timezone.utc)
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def _is_folder(props: Any) -> bool:
    metadata = getattr(props, "metadata", None) or {}
    return str(metadata.get("hdi_isfolder", "")).lower() == "true"


class AzureFileIO(FileIO):
    scheme = AZURE_CANONICAL_SCHEME

    def __init__(self, config: StorageConfig | None = None) -> None:
        self.config = config or StorageConfig()
        self._services: dict[tuple[str, str], Any] = {}
        self._no_batch: set[tuple[str, str]] = set()   # accounts that refused a Blob Batch request
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["config"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"AzureFileIO({self.config!r})"

    # -- clients --------------------------------------------------------------------------------

    def service(self, loc: AzureLocation) -> Any:
        key = (loc.account, loc.suffix)
        found = self._services.get(key)
        if found is None:
            with self._lock:
                found = self._services.get(key)
                if found is None:
                    found = self._services[key] = self._make_service(loc)
        return found

    def _make_service(self, loc: AzureLocation) -> Any:
        from azure.storage.blob import BlobServiceClient

        config = self.config
        if config.azure_account_name and config.azure_account_name.lower() != loc.account:
            raise StorageConfigError(
                f"{loc.uri()} is in storage account {loc.account!r}, but the Azure credentials are for "
                f"{config.azure_account_name!r}; Statekeeper reaches one Azure account per store "
                "(use the DR store's STATEKEEPER_DR_AZURE_* settings for a second one)"
            )
        if config.azure_account_key:
            credential: Any = {"account_name": loc.account, "account_key": config.azure_account_key}
        elif config.azure_sas_token:
            credential = config.azure_sas_token.lstrip("?")
        else:
            raise StorageConfigError(
                f"no Azure credentials for account {loc.account!r}: set STATEKEEPER_AZURE_ACCOUNT_KEY (or "
                "AZURE_STORAGE_KEY) or STATEKEEPER_AZURE_SAS_TOKEN; Azure AD sign-in is not supported"
            )
        endpoint = (config.azure_blob_endpoint or f"https://{loc.account}.blob.{loc.suffix}").rstrip("/")
        return BlobServiceClient(account_url=endpoint, credential=credential,
                                 retry_total=config.max_attempts - 1,
                                 connection_timeout=20, read_timeout=120)

    def _container(self, loc: AzureLocation) -> Any:
        return self.service(loc).get_container_client(loc.container)

    def _blob(self, loc: AzureLocation, name: str | None = None) -> Any:
        return self.service(loc).get_blob_client(loc.container, loc.path if name is None else name)

    def _fail(self, exc: BaseException, what: str, loc: AzureLocation, *, missing: str | None = None) -> StorageError:
        """The storage error for an Azure exception met while doing `what` on `loc`."""
        ex = _errors()
        code = str(getattr(exc, "error_code", "") or "")
        if isinstance(exc, ex.ResourceNotFoundError) or getattr(exc, "status_code", None) == 404:
            if "ContainerNotFound" in code:
                return RootNotFoundError(f"container {loc.container!r} of account {loc.account!r} does not exist "
                                         f"({what} {loc.uri()})")
            return ObjectNotFoundError(missing or f"{loc.uri()} does not exist")
        if isinstance(exc, ex.ClientAuthenticationError) or getattr(exc, "status_code", None) == 403:
            return UnreadableObjectError(f"access denied {what} {loc.uri()} ({_describe(exc)}): check the account "
                                         "key or SAS token and its permissions")
        return StorageError(f"{what} {loc.uri()} failed: {_describe(exc)}")

    # -- listing ------------------------------------------------------------------------------

    @staticmethod
    def _dir_prefix(path: str) -> str:
        return path + "/" if path else ""

    def list(self, directory: str, *, recursive: bool = True) -> Iterator[FileInfo]:
        loc = AzureLocation(directory)
        ex = _errors()
        container = self._container(loc)
        prefix = self._dir_prefix(loc.path) or None
        try:
            if recursive:
                pages = container.list_blobs(name_starts_with=prefix, include=["metadata"],
                                             results_per_page=self.config.list_page_size).by_page()
            else:
                pages = container.walk_blobs(name_starts_with=prefix, include=["metadata"], delimiter="/",
                                             results_per_page=self.config.list_page_size).by_page()
            for page in pages:
                for item in page:
                    if not hasattr(item, "size") or item.name.endswith("/") or _is_folder(item):
                        continue  # a virtual directory (BlobPrefix) or an HNS directory entry
                    yield FileInfo(loc.uri(item.name), int(item.size), _mtime(item.last_modified), _etag(item.etag),
                                   checksum=_md5(item))
        except ex.AzureError as exc:
            raise self._fail(exc, "listing", loc) from exc

    def list_dirs(self, directory: str) -> Iterator[str]:
        loc = AzureLocation(directory)
        ex = _errors()
        try:
            pages = self._container(loc).walk_blobs(name_starts_with=self._dir_prefix(loc.path) or None,
                                                    delimiter="/").by_page()
            for page in pages:
                names = sorted(item.name.rstrip("/") for item in page if not hasattr(item, "size"))
                for name in names:
                    if name:
                        yield loc.uri(name)
        except ex.AzureError as exc:
            raise self._fail(exc, "listing", loc) from exc

    def list_page(self, directory: str, start_after: str | None = None, token: str | None = None,
                  page_size: int | None = None) -> ListPage:
        """One List Blobs page of the direct children of `directory`, with their ETags, continuing `token`. Blob
        listings take no start key: a first page starts at the directory's first name (`start_after` is
        ignored). Hierarchical-namespace directory entries come back as ObjectType.DIRECTORY objects."""
        loc = AzureLocation(directory.rstrip("/"))
        prefix = self._dir_prefix(loc.path)
        ex = _errors()
        try:
            pages = self._container(loc).walk_blobs(name_starts_with=prefix or None, include=["metadata"],
                                                    delimiter="/",
                                                    results_per_page=page_size or self.config.list_page_size
                                                    ).by_page(continuation_token=token)
            items = list(next(pages, None) or ())
        except ex.AzureError as exc:
            raise self._fail(exc, "listing", loc) from exc
        objects = []
        for item in items:
            if hasattr(item, "size") and not item.name.endswith("/"):   # not a BlobPrefix
                objects.append(FileInfo(loc.uri(item.name), int(item.size), _mtime(item.last_modified),
                                        _etag(item.etag),
                                        ObjectType.DIRECTORY if _is_folder(item) else ObjectType.FILE,
                                        checksum=_md5(item)))
        names = [item.name for item in items]
        bound = loc.uri(max(names)) if names else None
        return ListPage(objects, bound, pages.continuation_token or None, len(names))

    def check_directory(self, directory: str) -> None:
        """A missing container raises RootNotFoundError; a path with no blob under it raises
        EmptyRootError (a mistyped prefix and an empty directory look the same in a blob listing)."""
        loc = AzureLocation(directory)
        ex = _errors()
        try:
            self._container(loc).get_container_properties()
        except ex.AzureError as exc:
            if isinstance(exc, ex.ResourceNotFoundError):
                raise RootNotFoundError(f"container {loc.container!r} of account {loc.account!r} does not exist "
                                        f"(root {directory})") from exc
            raise self._fail(exc, "checking", loc) from exc
        if not loc.path:
            return
        if next(self.list(directory), None) is None:
            raise EmptyRootError(f"no blob under {loc.uri()}/ (root {directory}): the path does not exist or is empty")

    # -- single objects -----------------------------------------------------------------------

    def stat(self, uri: str) -> FileInfo:
        loc = AzureLocation(uri)
        if not loc.path:
            raise ObjectNotFoundError(f"{loc.uri()} is a container, not a blob")
        ex = _errors()
        try:
            props = self._blob(loc).get_blob_properties()
        except ex.AzureError as exc:
            raise self._fail(exc, "stat'ing", loc) from exc
        if _is_folder(props):
            raise NotRegularFileError(f"{loc.uri()} is a directory of a hierarchical-namespace account, not a file")
        return FileInfo(loc.uri(), int(props.size), _mtime(props.last_modified), _etag(props.etag),
                        checksum=_md5(props))

    def open_input(self, uri: str, *, info: FileInfo | None = None) -> BinaryIO:
        loc = AzureLocation(uri)
        if info is None:
            info = self.stat(uri)
        return AzureRangedInput(self, loc, size=info.size, etag=info.etag,  # type: ignore[return-value]
                                read_ahead=self.config.read_ahead_bytes)

    def write(self, uri: str, data: bytes | BinaryIO, *, if_absent: bool = False, durable: bool = True) -> FileInfo:
        """One block-blob upload: a single Put Blob, or staged blocks committed at the end, so readers
        see the old or the new content. if_absent sends `If-None-Match: *` (Azure refuses the commit
        when a blob exists)."""
        loc = AzureLocation(uri)
        if not loc.path:
            raise StorageError(f"cannot write to a container URI without a blob name: {uri}")
        ex = _errors()
        counted = _Counting(data) if not isinstance(data, (bytes, bytearray, memoryview)) else None
        body: Any = bytes(data) if counted is None else counted  # type: ignore[arg-type]
        try:
            result = self._blob(loc).upload_blob(body, overwrite=not if_absent, blob_type="BlockBlob")
        except ex.ResourceExistsError as exc:
            raise ObjectExistsError(f"{loc.uri()} already exists (create-only write refused)") from exc
        except ex.ResourceModifiedError as exc:
            raise ObjectExistsError(f"{loc.uri()} already exists (create-only write refused)") from exc
        except ex.AzureError as exc:
            raise self._fail(exc, "writing", loc) from exc
        size = len(body) if counted is None else counted.count
        return FileInfo(loc.uri(), size, _mtime(result.get("last_modified")), _etag(result.get("etag")))

    # -- bulk operations ----------------------------------------------------------------------

    def delete_many(self, uris: Iterable[str]) -> DeleteReport:
        """Blob batch deletes (up to 256 per request, or delete_batch_size if lower), per container.
        202 is deleted, 404 missing, anything else a failure."""
        def locate(uri: str) -> tuple[tuple[str, str, str], AzureLocation, str]:
            try:
                loc = AzureLocation(uri)
            except (StorageError, ValueError) as exc:
                raise DeleteRefused("InvalidUri", str(exc)) from exc
            if not loc.path:
                raise DeleteRefused("InvalidKey", "refusing to delete a container")
            return (loc.account, loc.suffix, loc.container), loc, loc.path

        return delete_in_batches(uris, locate, min(self.config.delete_batch_size, _AZURE_BATCH_MAX),
                                 self._delete_batch)

    def _delete_batch(self, loc: AzureLocation, names: list[str]) -> DeleteReport:
        report = DeleteReport()
        ex = _errors()
        try:
            responses = list(self._container(loc).delete_blobs(*names, raise_on_any_failure=False))
        except (ex.AzureError, StorageConfigError) as exc:
            report.failed.extend(DeleteFailure(loc.uri(n), type(exc).__name__, _describe(exc)) for n in names)
            return report
        if len(responses) != len(names):
            report.failed.extend(DeleteFailure(loc.uri(n), "BatchError",
                                               f"{len(responses)} responses for {len(names)} deletes") for n in names)
            return report
        for name, response in zip(names, responses, strict=True):
            status = response.status_code
            if 200 <= status < 300:
                report.deleted.append(loc.uri(name))
            elif status == 404:
                report.missing.append(loc.uri(name))
            else:
                report.failed.append(DeleteFailure(loc.uri(name), str(status), str(response.reason or "")[:300]))
        return report

    # At most this many version-pinned deletes per `delete_if_unchanged` call: one Blob Batch request.
    CONDITIONAL_DELETE_MAX = _AZURE_BATCH_MAX

    def delete_if_unchanged(self, items: Sequence[tuple[str, str]]) -> list[ConditionalDelete]:
        """Delete each `(uri, etag)` only while `etag` is the blob's current ETag: one Blob Batch request of up
        to 256 Delete Blob calls, all in one container, each with `If-Match: "<etag>"`. Azure evaluates the
        condition when it deletes, so a blob rewritten after the caller looked at it is kept (412
        ConditionNotMet: CHANGED) and no other version than the one named can be deleted. One answer per
        item, in order.

        An account that refuses Blob Batch as such (400/405/409/501 for the whole request: the API has not
        always been available on hierarchical-namespace accounts) gets the same deletes as single Delete Blob
        requests, each with the same If-Match, one after the other (and for the rest of this FileIO's life):
        never an unconditional batch.

        Retries are the client's (`config.max_attempts`; the GC deleter sets 1 and retries itself). Raises
        ValueError for items that cannot be pinned (no blob name, several containers, no ETag) and
        StorageError, caused by the client's error, when the batch request as a whole fails."""
        if not items:
            return []
        if len(items) > self.CONDITIONAL_DELETE_MAX:
            raise ValueError(f"at most {self.CONDITIONAL_DELETE_MAX} conditional deletes per batch, got {len(items)}")
        first: AzureLocation | None = None
        calls: list[tuple[AzureLocation, str]] = []
        for uri, etag in items:
            loc = AzureLocation(uri)
            if not loc.path:
                raise ValueError(f"refusing to delete a container: {uri}")
            if first is not None and (loc.account, loc.suffix, loc.container) != (first.account, first.suffix,
                                                                                 first.container):
                raise ValueError(f"one container per conditional batch delete: {uri} is not in {first.base}")
            if not etag or not str(etag).strip('"'):
                raise ValueError(f"{uri}: no ETag to pin the delete to")
            first = first or loc
            calls.append((loc, str(etag).strip('"')))
        assert first is not None
        from azure.core import MatchConditions

        ex = _errors()
        account = (first.account, first.suffix)
        if account not in self._no_batch:
            blobs = [{"name": loc.path, "etag": f'"{etag}"', "match_condition": MatchConditions.IfNotModified}
                     for loc, etag in calls]
            try:
                responses = list(self._container(first).delete_blobs(*blobs, raise_on_any_failure=False))
            except ex.HttpResponseError as exc:
                if getattr(exc, "status_code", None) not in _BATCH_REFUSED:
                    raise StorageError(f"batch delete of {len(calls)} blob(s) in {first.base} failed: "
                                       f"{_describe(exc)}") from exc
                with self._lock:
                    self._no_batch.add(account)
                log.warning("storage account %s refused a Blob Batch request (%s); deleting one blob per request "
                            "instead, each still conditional on its ETag", first.account, _describe(exc))
            else:
                if len(responses) != len(calls):
                    raise StorageError(f"batch delete in {first.base}: {len(responses)} answers for {len(calls)} "
                                       "deletes")
                return [_conditional_answer(loc.uri(), etag, int(r.status_code),
                                            str(r.headers.get("x-ms-error-code") or ""), str(r.reason or ""))
                        for (loc, etag), r in zip(calls, responses, strict=True)]
        return [self._delete_one_if_unchanged(loc, etag) for loc, etag in calls]

    def _delete_one_if_unchanged(self, loc: AzureLocation, etag: str) -> ConditionalDelete:
        from azure.core import MatchConditions

        ex = _errors()
        try:
            self._blob(loc).delete_blob(etag=f'"{etag}"', match_condition=MatchConditions.IfNotModified)
        except ex.HttpResponseError as exc:
            status = getattr(exc, "status_code", None)
            code = getattr(exc, "error_code", None) or ""
            return _conditional_answer(loc.uri(), etag, int(status) if status else 0,
                                       str(getattr(code, "value", code)), _describe(exc))
        except ex.AzureError as exc:   # no answer: the connection broke or timed out
            return ConditionalDelete(loc.uri(), ConditionalOutcome.FAILED, None, type(exc).__name__, _describe(exc),
                                     retriable=True)
        return ConditionalDelete(loc.uri(), ConditionalOutcome.DELETED, 202)

    def copy(self, source: str, target: str, *, info: FileInfo | None = None, if_absent: bool = False) -> FileInfo:
        """Server-side copy (Copy Blob) within one account, pinned to the source ETag: `info`'s (as listed or
        stat'ed by the caller), else one stat'ed first; between accounts the bytes stream through this
        process (Copy Blob would need a SAS for the source). Returns the target as stat'ed after the copy."""
        src, dst = AzureLocation(source), AzureLocation(target)
        info = info if info is not None else self.stat(source)
        if (src.account, src.suffix) != (dst.account, dst.suffix):
            with self.open_input(source, info=info) as stream:
                return self.write(target, stream, if_absent=if_absent)
        from azure.core import MatchConditions

        ex = _errors()
        src_url = self._blob(src).url
        if self.config.azure_sas_token:
            src_url += "?" + self.config.azure_sas_token.lstrip("?")
        dst_blob = self._blob(dst)
        try:
            # Create-only (If-None-Match: * on the destination) where the target was absent.
            create: dict[str, Any] = {"match_condition": MatchConditions.IfMissing} if if_absent else {}
            result = dst_blob.start_copy_from_url(src_url, source_etag=f'"{info.etag}"' if info.etag else None,
                                                  source_match_condition=MatchConditions.IfNotModified
                                                  if info.etag else None, **create)
            status = result.get("copy_status")
            deadline = time.monotonic() + _COPY_TIMEOUT_S
            while status == "pending":  # large or cross-region copies finish asynchronously
                if time.monotonic() > deadline:
                    raise StorageError(f"copy of {source} to {target} still pending after {_COPY_TIMEOUT_S:.0f} s")
                time.sleep(_COPY_POLL_S)
                status = dst_blob.get_blob_properties().copy.status
            if status != "success":
                raise StorageError(f"copy of {source} to {target} ended {status!r}")
        except (ex.ResourceModifiedError, ex.ResourceExistsError) as exc:
            code = str(getattr(exc, "error_code", "") or "")
            if if_absent and ("Target" in code or "BlobAlreadyExists" in code or isinstance(exc, ex.ResourceExistsError)):
                raise ObjectExistsError(f"{target} already exists (create-only copy refused)") from exc
            raise ObjectChangedError(f"{source} changed since it was stat'ed (ETag {info.etag}); re-list and retry") \
                from exc
        except ex.AzureError as exc:
            raise self._fail(exc, "copying", src, missing=f"{source} does not exist") from exc
        return self.stat(target)


def _conditional_answer(uri: str, etag: str, status: int, code: str, reason: str) -> ConditionalDelete:
    if 200 <= status < 300:
        return ConditionalDelete(uri, ConditionalOutcome.DELETED, status)
    if status == 404:
        return ConditionalDelete(uri, ConditionalOutcome.MISSING, status, code or "BlobNotFound", reason)
    if status == 412:
        return ConditionalDelete(uri, ConditionalOutcome.CHANGED, status, code or "ConditionNotMet",
                                 f"ETag {etag} is no longer the blob's: {reason}")
    return ConditionalDelete(uri, ConditionalOutcome.FAILED, status or None, code or str(status), reason[:300],
                             retriable=not status or status in RETRIABLE_HTTP_STATUS)


class AzureRangedInput(RangedInput):
    """Ranged downloads of one version: every request carries `If-Match` with the ETag seen first."""

    def __init__(self, fileio: AzureFileIO, loc: AzureLocation, *, size: int, etag: str | None,
                 read_ahead: int) -> None:
        super().__init__(uri=loc.uri(), size=size, read_ahead=read_ahead)
        self._fileio = fileio
        self._loc = loc
        self._etag = etag

    def _fetch(self, start: int, end: int) -> bytes:
        from azure.core import MatchConditions

        ex = _errors()
        self.requests += 1
        kwargs: dict[str, Any] = {"offset": start, "length": end - start}
        if self._etag:
            kwargs.update(etag=f'"{self._etag}"', match_condition=MatchConditions.IfNotModified)
        try:
            data = self._fileio._blob(self._loc).download_blob(**kwargs).readall()
        except ex.ResourceModifiedError as exc:
            raise ObjectChangedError(f"{self._uri} changed while being read (ETag {self._etag} no longer current); "
                                     "re-list and retry") from exc
        except ex.ResourceNotFoundError as exc:
            raise ObjectNotFoundError(f"{self._uri} vanished while being read") from exc
        except ex.AzureError as exc:
            raise UnreadableObjectError(f"cannot read {self._uri} bytes {start}-{end - 1}: {_describe(exc)}") from exc
        if len(data) != end - start:
            raise UnreadableObjectError(
                f"short read from {self._uri}: asked bytes {start}-{end - 1}, got {len(data)} bytes")
        return data


class _Counting:
    """A reader that counts the bytes read from it (the size of a streamed upload)."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self.count += len(data)
        return data

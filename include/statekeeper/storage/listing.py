"""What a store holds at many URIs, learnt from listing pages of their directories instead of a request per URI.

    lookup = ListingLookup(fileio, page_size=1000, policy=RetryPolicy(...))
    found = lookup.resolve(uris)     # {uri: FileInfo (version, size, mtime; object_type) or None (absent)}

One listing page of a directory's direct children answers up to `page_size` URIs (S3 ListObjectsV2, GCS
objects.list, Azure List Blobs, each with the version of every object: the ETag, the generation). Per directory,
the URIs are resolved in key order: the first page starts just before the first of them (S3 StartAfter, GCS
startOffset; Azure lists from the directory's start), later pages continue with the store's token. Where
listing would mostly scan other objects (one URI in a directory, or a page that scanned more than 4 names per URI
still to resolve) the rest are read one by one (a HEAD, a metadata read): never more requests than that.

Used by the GC deleter's re-check (on stores that ignore delete preconditions) and by the DR mover, which learns
what a target directory holds before copying into it. Listings are strongly consistent on S3 (since 2020), GCS
and Azure: an object written before the page was listed is on it. `resolve` can be called again for the next
window of URIs; a directory whose scan is still open continues where it stopped.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone

from statekeeper.storage.errors import NotRegularFileError, ObjectNotFoundError
from statekeeper.storage.model import FileInfo, ListPage, ObjectType
from statekeeper.storage.retry import RetryPolicy, ThrottleLog, call

_LIST_FALLBACK_FACTOR = 4    # a page scanning more than 4x the URIs still to resolve: read the rest one by one
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def parent_of(uri: str) -> str:
    """The directory URI (with its trailing "/") a URI's object is listed in."""
    return uri[:uri.rfind("/") + 1]


def not_regular(uri: str) -> FileInfo:
    """What `resolve` answers for a name that holds something other than a file (an Azure HNS directory)."""
    return FileInfo(uri, 0, _EPOCH, None, ObjectType.DIRECTORY)


@dataclass
class _Scan:
    """An open listing of one directory: everything in (after, bound] is known from `page`."""

    after: str                      # URIs at or before this one are not covered
    page: dict[str, FileInfo]
    bound: str | None               # the page's greatest URI
    token: str | None               # None: the page was the directory's last

    def covers(self, uri: str) -> bool:
        return uri > self.after and (self.token is None or (self.bound is not None and uri <= self.bound))


@dataclass(frozen=True, slots=True)
class Resolved:
    """`resolve`'s answer for one URI: what is there (None: nothing), or why it could not be known."""

    info: FileInfo | None
    error: str | None = None
    retries: int = 0


class ListingLookup:
    """Resolves URIs of one FileIO (its `list_page` and `stat`) with listing pages; counts its retries."""

    def __init__(self, fileio: object, *, page_size: int, policy: RetryPolicy,
                 throttle_log: ThrottleLog | None = None, on_retry: Callable[[int], None] | None = None) -> None:
        self._fileio = fileio
        self._page_size = page_size
        self._policy = policy
        self._throttle_log = throttle_log
        self._on_retry = on_retry
        self._scans: dict[str, _Scan] = {}
        self.list_requests = 0
        self.stat_requests = 0

    def _retried(self, n: int) -> None:
        if n and self._on_retry is not None:
            self._on_retry(n)

    def resolve(self, uris: Iterable[str]) -> dict[str, Resolved]:
        by_dir: dict[str, list[str]] = {}
        for uri in uris:
            by_dir.setdefault(parent_of(uri), []).append(uri)
        out: dict[str, Resolved] = {}
        for directory, members in by_dir.items():
            self._resolve_dir(directory, sorted(set(members)), out)
        return out

    def close(self, directory: str | None = None) -> None:
        """Forget open scans (all, or one directory's): the next `resolve` lists afresh."""
        if directory is None:
            self._scans.clear()
        else:
            self._scans.pop(directory, None)

    # -- one directory -------------------------------------------------------------------------------------

    def _resolve_dir(self, directory: str, uris: list[str], out: dict[str, Resolved]) -> None:
        scan = self._scans.get(directory)
        if len(uris) == 1 and scan is None:
            out[uris[0]] = self._stat(uris[0])   # one HEAD is cheaper than one LIST
            return
        position = 0
        page_retries = 0   # a page's retries count for every URI it settles
        while position < len(uris):
            uri = uris[position]
            if scan is not None and scan.covers(uri):
                out[uri] = Resolved(scan.page.get(uri), None, page_retries)
                position += 1
                continue
            if scan is not None and scan.token is not None and scan.bound is not None and uri > scan.bound:
                start, token, after = None, scan.token, scan.bound
            else:
                # A fresh scan from just before this URI: StartAfter is exclusive, so the URI minus its last
                # character sorts just before it (a few neighbours may be listed too; they are ignored).
                start, token, after = uri[:-1], None, uri[:-1]
            called = call(lambda s=start, t=token: self._fileio.list_page(  # type: ignore[attr-defined]
                directory, s, t, self._page_size),
                what=f"listing {directory}", policy=self._policy, throttle_log=self._throttle_log)
            self.list_requests += 1 + called.retries
            self._retried(called.retries)
            if called.error is not None:
                break   # the listing keeps failing: read the rest one by one (each with its own retries)
            page: ListPage = called.value  # type: ignore[assignment]
            page_retries = called.retries
            scan = self._scans[directory] = _Scan(after, {o.uri: o for o in page.objects}, page.bound, page.token)
            if page.token is not None and page.scanned > _LIST_FALLBACK_FACTOR * (len(uris) - position):
                # Sparse: settle what this page covers, then read the rest one by one.
                while position < len(uris) and scan.covers(uris[position]):
                    out[uris[position]] = Resolved(scan.page.get(uris[position]), None, page_retries)
                    position += 1
                break
        for uri in uris[position:]:
            out[uri] = self._stat(uri)

    def _stat(self, uri: str) -> Resolved:
        absent = False
        regular = True

        def stat() -> FileInfo | None:
            nonlocal absent, regular
            try:
                return self._fileio.stat(uri)  # type: ignore[attr-defined]
            except NotRegularFileError:
                regular = False
                return None
            except ObjectNotFoundError:
                absent = True
                return None

        called = call(stat, what=f"reading the metadata of {uri}", policy=self._policy,
                      throttle_log=self._throttle_log)
        self.stat_requests += 1 + called.retries
        self._retried(called.retries)
        if called.error is not None:
            return Resolved(None, called.error, called.retries)
        if not regular:
            return Resolved(not_regular(uri), None, called.retries)
        return Resolved(None if absent else called.value, None, called.retries)

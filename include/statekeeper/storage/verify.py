"""Verification of DR copies at the target: every object there, of its exact size (and still the version recorded
when it was verified; with `checksum`, of the recorded SHA-256).

    verify_objects(items, target_config, checksum=..., in_flight=16) -> VerifyResult each, in completion order

What the target holds is learnt from listing pages of each target directory (statekeeper.storage.listing: one
request per page of up to 1,000 objects, with sizes and versions), not from a metadata read per object; local
targets are stat'ed (lstat: a symlink is never followed). Only checksum mode reads objects, `in_flight` at a time.
Transient storage errors are retried; what stays unknown is a failed result saying so, never an exception.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from statekeeper.storage.config import StorageConfig
from statekeeper.storage.errors import NotRegularFileError, ObjectNotFoundError
from statekeeper.storage.listing import ListingLookup, Resolved
from statekeeper.storage.model import FileInfo, ObjectType
from statekeeper.storage.retry import RetryPolicy, call
from statekeeper.storage.router import RoutingFileIO, scheme_of

_CHUNK = 4 * 1024 * 1024
_WINDOW = 4000        # items looked up together: enough for listing pages to pay off in each directory
_POOL_SLACK = 4


@dataclass(frozen=True, slots=True)
class VerifyItem:
    target: str
    size: int                          # expected exact size
    checksum: str | None = None        # expected SHA-256 (checked when verify_objects(checksum=True))
    version: str | None = None         # expected version (re-verification: the one recorded when it was verified)


@dataclass(frozen=True, slots=True)
class VerifyResult:
    target: str
    ok: bool
    size: int | None                   # found size (None if missing)
    message: str | None
    version: str | None = None         # found version (FileInfo.etag), recorded so later runs can prove identity


def verify_objects(items: Iterable[VerifyItem], target: StorageConfig, *, checksum: bool,
                   in_flight: int = 16, max_attempts: int = 4) -> Iterator[VerifyResult]:
    """Check that every item exists at the target with its exact size and, with `checksum` and an expected
    checksum, SHA-256 (which reads the whole object)."""
    if in_flight < 1 or max_attempts < 1:
        raise ValueError(f"verify_objects: in_flight and max_attempts must be >= 1, got {in_flight} and {max_attempts}")
    pool = max(target.max_pool_connections, in_flight + _POOL_SLACK)
    fio = RoutingFileIO(target.with_overrides(max_pool_connections=pool))
    policy = RetryPolicy(max_attempts, 0.5, 20.0)
    lookups: dict[str, ListingLookup] = {}
    hashing: list[tuple[VerifyItem, FileInfo]] = []
    window: list[VerifyItem] = []

    def flush() -> Iterator[VerifyResult]:
        found = _look_up(window, fio, lookups, policy)
        for item in window:
            result, info = _judge(item, found[item.target], checksum)
            if result is not None:
                yield result
            else:
                hashing.append((item, info))  # type: ignore[arg-type]
        window.clear()
        if hashing:
            yield from _bounded(lambda pair: _hashed(fio, pair[0], pair[1], policy), list(hashing), in_flight)
            hashing.clear()

    for item in items:
        window.append(item)
        if len(window) >= _WINDOW:
            yield from flush()
    if window:
        yield from flush()


def _look_up(items: list[VerifyItem], fio: RoutingFileIO, lookups: dict[str, ListingLookup],
             policy: RetryPolicy) -> dict[str, Resolved]:
    by_scheme: dict[str, list[str]] = {}
    for item in items:
        by_scheme.setdefault(scheme_of(item.target), []).append(item.target)
    found: dict[str, Resolved] = {}
    for scheme, uris in by_scheme.items():
        backend = fio.backend(uris[0])
        if scheme == "file":
            for uri in uris:   # lstat: a syscall each, no request
                found[uri] = _stat(backend, uri, policy)
            continue
        lookup = lookups.get(scheme)
        if lookup is None:
            lookup = lookups[scheme] = ListingLookup(backend, page_size=fio.config.list_page_size, policy=policy)
        found.update(lookup.resolve(uris))
    return found


def _stat(backend: Any, uri: str, policy: RetryPolicy) -> Resolved:
    state = {"absent": False, "regular": True}

    def stat() -> FileInfo | None:
        try:
            return backend.stat(uri)
        except NotRegularFileError:
            state["regular"] = False
        except ObjectNotFoundError:
            state["absent"] = True
        return None

    called = call(stat, what=f"stat'ing {uri}", policy=policy)
    if called.error is not None:
        return Resolved(None, called.error, called.retries)
    if not state["regular"]:
        from statekeeper.storage.listing import not_regular

        return Resolved(not_regular(uri), None, called.retries)
    return Resolved(called.value, None, called.retries)


def _judge(item: VerifyItem, seen: Resolved, checksum: bool) -> tuple[VerifyResult | None, FileInfo | None]:
    """The verdict from what the target holds, or (None, info) when the bytes must be hashed to tell."""
    if seen.error is not None:
        return VerifyResult(item.target, False, None, f"could not verify {item.target}: {seen.error}; re-run the "
                                                      "verification"), None
    info = seen.info
    if info is None:
        return VerifyResult(item.target, False, None, "missing at the target"), None
    if info.object_type is not ObjectType.FILE:
        return VerifyResult(item.target, False, None, f"not a regular file at the target: {item.target} is a "
                                                      f"{info.object_type.value}"), None
    if info.size != item.size:
        return VerifyResult(item.target, False, info.size, f"size {info.size} at the target, expected {item.size}",
                            info.etag), None
    if item.version and info.etag != item.version and not (checksum and item.checksum):
        # Without a digest to compare, a new version is other bytes until proven otherwise (same size or not).
        return VerifyResult(item.target, False, info.size,
                            f"{item.target} changed at the target since it was verified (version {item.version}, now "
                            f"{info.etag}): its bytes may no longer be the source's; re-run the DR copy, which "
                            "replaces it", info.etag), None
    if checksum and item.checksum:
        return None, info
    return VerifyResult(item.target, True, info.size, None, info.etag), None


def _hashed(fio: RoutingFileIO, item: VerifyItem, info: FileInfo, policy: RetryPolicy) -> VerifyResult:
    gone = False

    def digest() -> str | None:
        nonlocal gone
        try:
            return sha256_of(fio, info)
        except ObjectNotFoundError:
            gone = True
            return None

    called = call(digest, what=f"reading {item.target}", policy=policy)
    if called.error is not None:
        return VerifyResult(item.target, False, None, f"could not verify {item.target}: {called.error}; re-run the "
                                                      "verification")
    if gone:
        return VerifyResult(item.target, False, None, "missing at the target (vanished while being read)")
    found = called.value
    if found != (item.checksum or "").lower():
        return VerifyResult(item.target, False, info.size,
                            f"checksum mismatch at the target: SHA-256 {found}, expected {item.checksum}; the target "
                            "bytes differ from the source's: re-run the DR copy, which replaces it", info.etag)
    return VerifyResult(item.target, True, info.size, None, info.etag)


def sha256_of(fio: Any, info: FileInfo) -> str:
    """SHA-256 of one version of an object (pinned to `info`), read in chunks."""
    hasher = hashlib.sha256()
    with fio.open_input(info.uri, info=info) as stream:
        while data := stream.read(_CHUNK):
            hasher.update(data)
    return hasher.hexdigest()


def _bounded(fn: Any, items: list[Any], in_flight: int) -> Iterator[Any]:
    from concurrent.futures import ThreadPoolExecutor

    if len(items) == 1 or in_flight == 1:
        yield from (fn(i) for i in items)
        return
    with ThreadPoolExecutor(max_workers=min(in_flight, len(items)), thread_name_prefix="statekeeper-verify") as pool:
        yield from pool.map(fn, items)



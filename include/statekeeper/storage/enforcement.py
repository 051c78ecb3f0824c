"""Whether a store enforces the preconditions GC and the DR copy rely on: proven by a self-test, never assumed.

    enforcement = Enforcement(config, tag=run_id)
    enforcement.prove(roots, [Guard.CONDITIONAL_DELETE])     # on the driver, once per store of the run
    enforcement.enforced(root, Guard.CONDITIONAL_DELETE)     # in the tasks (the object pickles with its proofs)

S3-compatible stores accept a per-key ETag in DeleteObjects, `CopySourceIfMatch` and `If-None-Match: *` and some of
them ignore what they accepted (moto ignores the first two and If-None-Match on CopyObject; several self-hosted S3
servers are documented to do likewise). A mover that trusts such a store deletes an object rewritten after the plan,
or copies another version than the one pinned, and reports it as done. So before relying on a precondition a run
proves it per store (an S3/OSS endpoint and bucket, a GCS endpoint and bucket, an Azure endpoint, account and
container): in a scratch directory below one of the run's own roots (`<root>/_statekeeper_probe/<tag>/`) it writes a
scratch object and asks for what must be refused:

* CONDITIONAL_DELETE: delete the scratch object conditional on a version it does not have (S3/OSS: DeleteObjects
  with a wrong per-key ETag; GCS: a batch delete with a wrong ifGenerationMatch; Azure: Blob Batch / Delete Blob with
  a wrong If-Match), exactly as the GC deleter sends it; the object must be refused (412) and still be there;
* PINNED_COPY: copy it server-side pinned to a wrong source version (CopySourceIfMatch, ifSourceGenerationMatch, the
  source If-Match of Copy Blob); the copy must be refused and its target must not appear;
* CREATE_ONLY_WRITE: write it again create-only (If-None-Match: * on PutObject, ifGenerationMatch=0, If-None-Match:
  * on Put Blob); the write must be refused and the old bytes stay;
* CREATE_ONLY_COPY: copy onto a second scratch object create-only (If-None-Match: * on CopyObject, ifGenerationMatch=0
  on a rewrite, If-None-Match: * on Copy Blob); refused, its bytes stay.

Then the scratch objects are deleted. A self-test that cannot complete (no permission to write, an error, an answer
that is neither a refusal nor a success) is UNKNOWN, which callers treat as not enforced: they fall back to their
re-checks. Only ENFORCED lets a mover rely on the store. A refusal proves what one request showed, on one day: a store
reconfigured during a run is not noticed, and a store that refuses the wrong version but also other requests is not
told apart (the self-test's right-version requests are the movers' own, which fail loudly where they fail).

Verdicts are kept per store identity for the life of the object (one run), so roots in one bucket share one
self-test, and the tasks get them with the object instead of testing again.
"""
from __future__ import annotations

import hashlib
import logging
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from statekeeper.storage.config import StorageConfig
from statekeeper.storage.errors import ObjectChangedError, ObjectExistsError, ObjectNotFoundError
from statekeeper.storage.model import ConditionalOutcome, FileInfo
from statekeeper.uri import normalize_uri

log = logging.getLogger("statekeeper.storage.enforcement")

PROBE_DIR = "_statekeeper_probe"
OBJECT_STORES = ("s3", "oss", "gs", "abfss")


class Guard(StrEnum):
    """A precondition a mover relies on (what the store must refuse)."""

    CONDITIONAL_DELETE = "conditional_delete"   # a delete pinned to the planned version (GC)
    PINNED_COPY = "pinned_copy"                 # a server-side copy pinned to the source's version (DR)
    CREATE_ONLY_WRITE = "create_only_write"     # a write refused when the object exists (DR's streamed copies)
    CREATE_ONLY_COPY = "create_only_copy"       # a server-side copy refused when the target exists (DR)


class Verdict(StrEnum):
    ENFORCED = "enforced"       # the store refused what it must refuse, and the scratch object is as it was
    IGNORED = "ignored"         # the store did what it must have refused
    UNKNOWN = "unknown"         # the self-test could not complete: treated as not enforced
    NOT_TESTED = "not_tested"   # the configuration says not to rely on it (delete_recheck=listing)


# What each guard is called on each store, for messages and the run's record.
_NAMES: dict[str, dict[Guard, str]] = {
    "s3": {Guard.CONDITIONAL_DELETE: "the per-key ETag of DeleteObjects",
           Guard.PINNED_COPY: "CopySourceIfMatch on CopyObject",
           Guard.CREATE_ONLY_WRITE: "If-None-Match: * on PutObject",
           Guard.CREATE_ONLY_COPY: "If-None-Match: * on CopyObject"},
    "gs": {Guard.CONDITIONAL_DELETE: "ifGenerationMatch on a batch delete",
           Guard.PINNED_COPY: "ifSourceGenerationMatch on a rewrite",
           Guard.CREATE_ONLY_WRITE: "ifGenerationMatch=0 on an upload",
           Guard.CREATE_ONLY_COPY: "ifGenerationMatch=0 on a rewrite"},
    "abfss": {Guard.CONDITIONAL_DELETE: "If-Match on Delete Blob",
              Guard.PINNED_COPY: "the source If-Match of Copy Blob",
              Guard.CREATE_ONLY_WRITE: "If-None-Match: * on Put Blob",
              Guard.CREATE_ONLY_COPY: "If-None-Match: * on Copy Blob"},
}
_NAMES["oss"] = _NAMES["s3"]


def guard_name(scheme: str, guard: Guard) -> str:
    return _NAMES.get(scheme, {}).get(guard, guard.value)


@dataclass(frozen=True)
class Proof:
    """The verdict of one self-test: `store` (store_identity), the guard, what was found."""

    store: str
    guard: Guard
    verdict: Verdict
    detail: str

    @property
    def enforced(self) -> bool:
        return self.verdict is Verdict.ENFORCED


def store_identity(config: StorageConfig, uri: str) -> str | None:
    """What one self-test speaks for: the bucket or container of `uri` and the endpoint it is reached at (None for
    local files, which no self-test concerns)."""
    norm = normalize_uri(uri)
    scheme = norm.partition(":")[0]
    if scheme == "s3":
        bucket = norm[len("s3://"):].partition("/")[0]
        where = config.endpoint.rstrip("/") if config.endpoint else f"AWS {config.region}"
        return f"s3://{bucket} at {where}"
    if scheme == "oss":
        bucket = norm[len("oss://"):].partition("/")[0]
        return f"oss://{bucket} at {(config.oss_endpoint or '').rstrip('/')}"
    if scheme == "gs":
        bucket = norm[len("gs://"):].partition("/")[0]
        return f"gs://{bucket} at {config.gcs_endpoint.rstrip('/') if config.gcs_endpoint else 'Google'}"
    if scheme == "abfss":
        from statekeeper.storage.azure import AzureLocation

        base = AzureLocation(norm).base
        return f"{base} at {config.azure_blob_endpoint.rstrip('/')}" if config.azure_blob_endpoint else base
    return None


def _wrong_version(scheme: str, version: str | None) -> str:
    """A version the scratch object does not have, in the store's spelling."""
    if scheme == "gs":
        return str(int(version or 0) + 1_000_003)
    if scheme == "abfss":
        wrong = "0x8D0000000000001"
        return wrong if wrong != (version or "").strip('"') else "0x8D0000000000002"
    wrong = hashlib.md5(b"statekeeper: not this object", usedforsecurity=False).hexdigest()
    if wrong == (version or "").strip('"'):
        wrong = hashlib.md5(wrong.encode(), usedforsecurity=False).hexdigest()
    return wrong


def self_test(backend: Any, scratch: str, guards: Iterable[Guard], store: str) -> list[Proof]:
    """Run the self-tests of `guards` with `backend` (the store's FileIO) in the directory `scratch` (canonical,
    below a root of the run; nothing else may be there). One Proof per guard; the scratch objects are deleted."""
    wanted = list(dict.fromkeys(guards))
    scheme = scratch.partition(":")[0]
    a, b, c = f"{scratch}/a", f"{scratch}/b", f"{scratch}/c"
    first, other = b"statekeeper self-test: first", b"statekeeper self-test: other bytes"
    try:
        backend.write(a, first)
        info = backend.stat(a)
    except Exception as exc:  # noqa: BLE001 - any failure leaves the verdict unknown, never enforced
        detail = f"cannot write the scratch object {a}: {type(exc).__name__}: {exc}"
        _clean(backend, [a])
        return [Proof(store, g, Verdict.UNKNOWN, detail) for g in wanted]
    proofs = []
    for guard in wanted:
        try:
            proof = _TESTS[guard](backend, scheme, info, a, b, c, first, other, store)
        except Exception as exc:  # noqa: BLE001
            proof = Proof(store, guard, Verdict.UNKNOWN, f"the self-test failed: {type(exc).__name__}: {exc}")
        proofs.append(proof)
        if proof.verdict is not Verdict.ENFORCED:
            try:   # the next test needs the first object as it was
                backend.write(a, first)
                info = backend.stat(a)
            except Exception as exc:  # noqa: BLE001
                rest = wanted[len(proofs):]
                proofs += [Proof(store, g, Verdict.UNKNOWN, f"cannot restore the scratch object {a}: {exc}")
                           for g in rest]
                break
    _clean(backend, [a, b, c])
    for proof in proofs:
        log.info("%s: %s is %s (%s)", store, guard_name(scheme, proof.guard), proof.verdict.value, proof.detail)
    return proofs


def _clean(backend: Any, uris: list[str]) -> None:
    try:
        report = backend.delete_many(uris)
        failed = report.failed
    except Exception as exc:  # noqa: BLE001
        failed = [exc]
    if failed:
        log.warning("could not delete the self-test's scratch objects %s (%s); they are no Flink files, GC never "
                    "deletes them: remove them by hand", uris, failed[:2])


def _test_delete(backend: Any, scheme: str, info: FileInfo, a: str, b: str, c: str, first: bytes, other: bytes,
                 store: str) -> Proof:
    guard, name = Guard.CONDITIONAL_DELETE, guard_name(scheme, Guard.CONDITIONAL_DELETE)
    wrong = _wrong_version(scheme, info.etag)
    [answer] = backend.delete_if_unchanged([(a, wrong)])
    try:
        now = backend.stat(a)
    except ObjectNotFoundError:
        return Proof(store, guard, Verdict.IGNORED, f"{name}: a delete pinned to a version the scratch object does "
                                                   f"not have deleted it (answered {answer.outcome.value})")
    if now.etag != info.etag:
        return Proof(store, guard, Verdict.UNKNOWN, f"{name}: the scratch object changed during the self-test")
    if answer.outcome is ConditionalOutcome.CHANGED:
        return Proof(store, guard, Verdict.ENFORCED, f"{name}: a delete pinned to another version was refused "
                                                    f"({answer.status} {answer.code})")
    return Proof(store, guard, Verdict.UNKNOWN, f"{name}: the pinned delete was answered {answer.outcome.value} "
                                               f"{answer.status} {answer.code} {answer.message[:200]}, neither a "
                                               "refusal nor a delete")


def _test_pinned_copy(backend: Any, scheme: str, info: FileInfo, a: str, b: str, c: str, first: bytes, other: bytes,
                      store: str) -> Proof:
    guard, name = Guard.PINNED_COPY, guard_name(scheme, Guard.PINNED_COPY)
    pinned = FileInfo(info.uri, info.size, info.mtime, _wrong_version(scheme, info.etag))
    try:
        backend.copy(a, b, info=pinned)
    except ObjectChangedError:
        if backend.exists(b):
            return Proof(store, guard, Verdict.IGNORED, f"{name}: the copy answered a refusal but its target exists")
        return Proof(store, guard, Verdict.ENFORCED, f"{name}: a copy pinned to another source version was refused")
    return Proof(store, guard, Verdict.IGNORED, f"{name}: a copy pinned to a version the source does not have was "
                                               "made")


def _test_create_only_write(backend: Any, scheme: str, info: FileInfo, a: str, b: str, c: str, first: bytes,
                            other: bytes, store: str) -> Proof:
    guard, name = Guard.CREATE_ONLY_WRITE, guard_name(scheme, Guard.CREATE_ONLY_WRITE)
    try:
        backend.write(a, other, if_absent=True)
    except ObjectExistsError:
        if backend.read_bytes(a) != first:
            return Proof(store, guard, Verdict.IGNORED, f"{name}: the write answered a refusal but replaced the object")
        return Proof(store, guard, Verdict.ENFORCED, f"{name}: a create-only write onto an existing object was "
                                                    "refused")
    return Proof(store, guard, Verdict.IGNORED, f"{name}: a create-only write replaced an existing object")


def _test_create_only_copy(backend: Any, scheme: str, info: FileInfo, a: str, b: str, c: str, first: bytes,
                           other: bytes, store: str) -> Proof:
    guard, name = Guard.CREATE_ONLY_COPY, guard_name(scheme, Guard.CREATE_ONLY_COPY)
    backend.write(c, other)
    try:
        backend.copy(a, c, info=info, if_absent=True)
    except ObjectExistsError:
        if backend.read_bytes(c) != other:
            return Proof(store, guard, Verdict.IGNORED, f"{name}: the copy answered a refusal but replaced its target")
        return Proof(store, guard, Verdict.ENFORCED, f"{name}: a create-only copy onto an existing object was refused")
    return Proof(store, guard, Verdict.IGNORED, f"{name}: a create-only copy replaced an existing object")


_TESTS = {Guard.CONDITIONAL_DELETE: _test_delete, Guard.PINNED_COPY: _test_pinned_copy,
          Guard.CREATE_ONLY_WRITE: _test_create_only_write, Guard.CREATE_ONLY_COPY: _test_create_only_copy}


@dataclass
class Enforcement:
    """The proven verdicts of one run, per store identity and guard. `prove` runs the missing self-tests (on the
    driver); `proof`/`enforced` answer from them, proving on first need where nothing was proven yet (a mover used
    on its own). Pickles with its proofs, without clients or locks."""

    config: StorageConfig
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:12])   # names the scratch directory
    proofs: dict[tuple[str, Guard], Proof] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._router: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config, "tag": self.tag, "proofs": dict(self.proofs)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.config, self.tag, self.proofs = state["config"], state["tag"], state["proofs"]
        self.__post_init__()

    def prove(self, roots: Iterable[str], guards: Iterable[Guard]) -> list[Proof]:
        """Self-test every store of `roots` (object stores only) for `guards` not proven yet; the proofs of those
        stores and guards, in the order of `roots`."""
        wanted = list(dict.fromkeys(guards))
        out: list[Proof] = []
        seen: set[str] = set()
        for root in roots:
            store = store_identity(self.config, root)
            if store is None or store in seen:
                continue
            seen.add(store)
            with self._lock:
                missing = [g for g in wanted if (store, g) not in self.proofs]
                if missing:
                    for proof in self._self_test(root, store, missing):
                        self.proofs[(store, proof.guard)] = proof
            out += [self.proofs[(store, g)] for g in wanted]
        return out

    def proof(self, root: str, guard: Guard) -> Proof | None:
        """The verdict for the store of `root` (None for local files), proven now if it was not yet."""
        store = store_identity(self.config, root)
        if store is None:
            return None
        found = self.proofs.get((store, guard))
        if found is None:
            [found] = self.prove([root], [guard])
        return found

    def enforced(self, root: str, guard: Guard) -> bool:
        found = self.proof(root, guard)
        return found is not None and found.enforced

    def _self_test(self, root: str, store: str, guards: list[Guard]) -> list[Proof]:
        from statekeeper.storage.router import RoutingFileIO

        if self._router is None:
            self._router = RoutingFileIO(self.config)
        scratch = f"{normalize_uri(root).rstrip('/')}/{PROBE_DIR}/{self.tag}-{uuid.uuid4().hex[:8]}"
        try:
            backend = self._router.backend(scratch)
        except Exception as exc:  # noqa: BLE001 - no client (credentials, a scheme without settings)
            return [Proof(store, g, Verdict.UNKNOWN, f"no client for {scratch}: {exc}") for g in guards]
        return self_test(backend, scratch, guards, store)

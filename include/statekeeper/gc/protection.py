"""How a deleting GC run holds each store to the planned versions, decided once on the driver.

For every object-store root with planned files, the store's self-test (statekeeper.storage.enforcement, a scratch
object below that root) says whether the store refuses a delete pinned to another version. Where it does (and the
configuration allows it: `delete_recheck` / `oss_delete_recheck` = precondition), the deletes carry the planned
version and nothing is re-checked first; everywhere else (the precondition ignored, a self-test that could not
complete, `listing` configured) each directory is listed again just before its keys are deleted. The verdicts go to
the tasks with the run's `Enforcement` (the tasks test nothing again) and into `gc_runs.protection`.
"""
from __future__ import annotations

from typing import Any

from statekeeper.gc.deleter import configured_recheck, recheck_mode
from statekeeper.jobs.protection import StoreProtection
from statekeeper.storage import StorageConfig
from statekeeper.storage.enforcement import OBJECT_STORES, Enforcement, Guard, Verdict, store_identity
from statekeeper.storage.model import DeleteRecheck
from statekeeper.tables.vocabulary import Protection


def decide(storage: StorageConfig, enforcement: Enforcement,
           roots: list[tuple[str, str]]) -> tuple[list[str], tuple[StoreProtection, ...]]:
    """For the (root, root_id) pairs with planned files: the root ids whose deletes the store's precondition holds
    (their keys may be spread over the tasks), and one record per object store."""
    spread: list[str] = []
    records: dict[str, StoreProtection] = {}
    for root, root_id in sorted(roots):
        scheme = root.partition(":")[0]
        if scheme not in OBJECT_STORES:
            continue
        mode = recheck_mode(storage, enforcement, root)   # runs the store's self-test once
        if mode is DeleteRecheck.PRECONDITION:
            spread.append(root_id)
        store = store_identity(storage, root)
        if store is None or store in records:
            continue
        if configured_recheck(storage, scheme) is DeleteRecheck.LISTING:
            setting = "oss_delete_recheck" if scheme == "oss" else "delete_recheck"
            records[store] = StoreProtection(store, Guard.CONDITIONAL_DELETE, Verdict.NOT_TESTED, Protection.LISTING,
                                             f"{setting}=listing: the store is not trusted, nothing was tested")
        else:
            proof = enforcement.proof(root, Guard.CONDITIONAL_DELETE)
            assert proof is not None
            records[store] = StoreProtection.of(proof, Protection.LISTING)
    return spread, tuple(records.values())


def planned_roots(todo: Any) -> list[tuple[str, str]]:
    """(root, root_id) of every root with planned files (a row per root reaches the driver)."""
    return [(r["root"], r["root_id"]) for r in todo.select("root", "root_id").distinct().collect()]

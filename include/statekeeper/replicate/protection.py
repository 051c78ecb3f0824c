"""Which preconditions a DR copy relies on at each target store, proven once per run on the driver.

Per target root (object stores only), the guards its copies can use: a create-only write (every streamed copy),
and where the source root shares the store and identity (a server-side copy) the source pin and a create-only
copy. The target store's self-test (statekeeper.storage.enforcement, scratch objects below the target root) proves
each; the copy tasks get the verdicts with the run's `Enforcement` and fall back where a guard is not proven: an
existence check just before a create-only write or copy, the source's version read before and after a server-side
copy. The records go into `dr_runs.protection`, one summary line per store.
"""
from __future__ import annotations

from statekeeper.jobs.protection import StoreProtection
from statekeeper.storage import StorageConfig
from statekeeper.storage.enforcement import OBJECT_STORES, Enforcement, Guard
from statekeeper.storage.router import scheme_of
from statekeeper.storage.transfer import server_side_possible
from statekeeper.tables.vocabulary import Protection

FALLBACK = {Guard.PINNED_COPY: Protection.SOURCE_RECHECK, Guard.CREATE_ONLY_WRITE: Protection.EXISTENCE_CHECK,
            Guard.CREATE_ONLY_COPY: Protection.EXISTENCE_CHECK}


def decide(source: StorageConfig, target: StorageConfig, enforcement: Enforcement,
           mapping: dict[str, str]) -> tuple[StoreProtection, ...]:
    """Prove what the target stores of `mapping` (source root -> target root) enforce; one record per store and
    guard the copies may rely on. `enforcement` must be made with the target's settings."""
    guards: dict[str, list[Guard]] = {}
    for src, dst in sorted(mapping.items()):
        if scheme_of(dst) not in OBJECT_STORES:
            continue
        wanted = guards.setdefault(dst, [Guard.CREATE_ONLY_WRITE])
        if server_side_possible(source, target, src, dst):
            wanted += [g for g in (Guard.PINNED_COPY, Guard.CREATE_ONLY_COPY) if g not in wanted]
    records: dict[tuple[str, Guard], StoreProtection] = {}
    for dst, wanted in guards.items():
        for proof in enforcement.prove([dst], wanted):
            records.setdefault((proof.store, proof.guard), StoreProtection.of(proof, FALLBACK[proof.guard]))
    order = list(Guard)
    return tuple(sorted(records.values(), key=lambda r: (r.store, order.index(r.guard))))

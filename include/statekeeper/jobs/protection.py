"""Which protection each store of a run got (`gc_runs.protection`, `dr_runs.protection`): one record per store
and precondition a mover may rely on, with the verdict of the store's self-test (statekeeper.storage.enforcement)
and what the mover did about it. Written by the GC and DR jobs, read back by the report; one definition here."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from statekeeper.storage.enforcement import Guard, Proof, Verdict, guard_name
from statekeeper.tables.vocabulary import Protection


@dataclass(frozen=True)
class StoreProtection:
    """One store (storage.enforcement.store_identity) and guard: the self-test's verdict, and the protection the
    run used (PRECONDITION only where the verdict is ENFORCED)."""

    store: str
    guard: Guard
    verdict: Verdict
    protection: Protection
    detail: str

    @classmethod
    def of(cls, proof: Proof, fallback: Protection) -> StoreProtection:
        """The record of `proof`: the precondition where it is enforced, else `fallback`."""
        return cls(proof.store, proof.guard, proof.verdict,
                   Protection.PRECONDITION if proof.enforced else fallback, proof.detail)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> StoreProtection:
        return cls(row["store"], Guard(row["guard"]), Verdict(row["verdict"]), Protection(row["protection"]),
                   row.get("detail") or "")

    def row(self) -> dict[str, str]:
        return {"store": self.store, "guard": self.guard.value, "verdict": self.verdict.value,
                "protection": self.protection.value, "detail": self.detail}


def summary_lines(records: tuple[StoreProtection, ...]) -> list[str]:
    """One line per store: each guard's protection, and the verdict it rests on."""
    by_store: dict[str, list[StoreProtection]] = {}
    for r in records:
        by_store.setdefault(r.store, []).append(r)
    lines = []
    for store, found in by_store.items():
        scheme = store.partition(":")[0]
        parts = [f"{guard_name(scheme, r.guard)}: {r.protection.value} ({r.verdict.value})" for r in found]
        lines.append(f"  protection: {store}: {'; '.join(parts)}")
    return lines

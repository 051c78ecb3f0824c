"""Where reports live in a warehouse, and the one way to write and find them.

    <warehouse>/_reports/runs/<run dir>/index.html    the self-contained page
    <warehouse>/_reports/runs/<run dir>/report.json   the numbers it shows (for tools and tests)
    <warehouse>/_reports/latest.json                  pointer to the newest run (written last)
    <warehouse>/_reports/latest.html                  a copy of the newest page, for file:// browsing

A run's directory is its run id with every character outside [A-Za-z0-9._-] replaced by "_"
(Airflow run ids hold ':' and '+', which URLs and some file systems handle badly); report.json
keeps the id as given. The pointer is written after the run's files, so a reader that follows it
never finds a half-written run; a run killed before the pointer leaves the previous one current.
Imports no Airflow or Spark: the Airflow page reads reports through this module.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from statekeeper.errors import StatekeeperError
from statekeeper.storage.errors import ObjectNotFoundError, RootNotFoundError
from statekeeper.tables.warehouse import Warehouse
from statekeeper.uri import join_uri

REPORTS_DIR = "_reports"
RUNS_DIR = "runs"
PAGE = "index.html"
DATA = "report.json"
LATEST = "latest.json"
LATEST_PAGE = "latest.html"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_RUN_DIR = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")


class ReportNotFound(StatekeeperError):
    """No report (or no report of that run) in the warehouse."""


def data_json(data: dict[str, Any]) -> bytes:
    """report.json's bytes (the store's copy and `--out`'s are the same)."""
    return json.dumps(data, indent=1, sort_keys=True, default=str).encode()


def run_dir_name(run_id: str) -> str:
    """The directory name of run `run_id` (see the module doc)."""
    name = _UNSAFE.sub("_", run_id.strip())
    if not name or not _RUN_DIR.match(name):
        raise ValueError(f"cannot make a report directory name of run id {run_id!r}")
    return name


@dataclass(frozen=True)
class ReportRef:
    """One stored report."""
    run_id: str
    run_dir: str
    generated_at: datetime
    page_uri: str

    def to_mapping(self) -> dict[str, str]:
        return {"run_id": self.run_id, "run_dir": self.run_dir, "generated_at": self.generated_at.isoformat(),
                "page_uri": self.page_uri}


class ReportStore:
    """The reports of one warehouse, through the warehouse's own (confined) FileIO."""

    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse
        self.base = join_uri(warehouse.uri, REPORTS_DIR)
        self._io = warehouse.file_io()

    def page_uri(self, run_dir: str) -> str:
        return join_uri(self.base, f"{RUNS_DIR}/{_checked(run_dir)}/{PAGE}")

    def data_uri(self, run_dir: str) -> str:
        return join_uri(self.base, f"{RUNS_DIR}/{_checked(run_dir)}/{DATA}")

    @property
    def latest_uri(self) -> str:
        return join_uri(self.base, LATEST)

    @property
    def latest_page_uri(self) -> str:
        return join_uri(self.base, LATEST_PAGE)

    def publish(self, run_id: str, page: bytes, data: dict[str, Any], generated_at: datetime) -> ReportRef:
        """Write a run's page and data, then make it the latest. Re-publishing a run replaces it."""
        run_dir = run_dir_name(run_id)
        ref = ReportRef(run_id, run_dir, generated_at, self.page_uri(run_dir))
        self._io.write(self.data_uri(run_dir), data_json(data))
        self._io.write(ref.page_uri, page)
        self._io.write(self.latest_page_uri, page)
        self._io.write(self.latest_uri, json.dumps(ref.to_mapping(), indent=1).encode())
        return ref

    def latest(self) -> ReportRef | None:
        """The newest published report, or None when the warehouse has none."""
        try:
            raw = self._io.read_bytes(self.latest_uri)
        except ObjectNotFoundError:
            return None
        try:
            doc = json.loads(raw)
            return ReportRef(doc["run_id"], _checked(doc["run_dir"]), _parse_time(doc["generated_at"]),
                             self.page_uri(doc["run_dir"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ReportNotFound(f"{self.latest_uri} is not a report pointer ({exc}); re-run `statekeeper report "
                                 f"--warehouse {self.warehouse.uri}` to rewrite it") from exc

    def runs(self, limit: int = 50) -> list[ReportRef]:
        """The stored reports, newest first (by their page's modification time), at most `limit`."""
        runs_uri = join_uri(self.base, RUNS_DIR)
        found: list[ReportRef] = []
        try:
            listing = list(self._io.list(runs_uri, recursive=True))
        except (ObjectNotFoundError, RootNotFoundError):
            return []
        for info in listing:
            rest = info.uri[len(runs_uri) + 1:]
            run_dir, _, name = rest.partition("/")
            if name == PAGE and _RUN_DIR.match(run_dir):
                found.append(ReportRef(run_dir, run_dir, info.mtime, info.uri))
        found.sort(key=lambda r: (r.generated_at, r.run_dir), reverse=True)
        return found[:limit]

    def page(self, run_dir: str | None = None) -> tuple[ReportRef, bytes]:
        """A run's page (the latest when `run_dir` is None); ReportNotFound when there is none."""
        if run_dir is None:
            ref = self.latest()
            if ref is None:
                raise ReportNotFound(f"no report in {self.warehouse.uri} yet: the `report` task of "
                                     "checkpoint_maintenance writes one, or run `statekeeper report --warehouse "
                                     f"{self.warehouse.uri}`")
        else:
            ref = ReportRef(run_dir, _checked(run_dir), datetime.now(timezone.utc), self.page_uri(run_dir))
        try:
            return ref, self._io.read_bytes(ref.page_uri)
        except ObjectNotFoundError:
            raise ReportNotFound(f"no report of run {ref.run_dir!r} in {self.warehouse.uri}") from None


def _checked(run_dir: str) -> str:
    """A run directory name as stored; anything else (a path, '..') is refused."""
    if not isinstance(run_dir, str) or not _RUN_DIR.match(run_dir) or run_dir in (".", ".."):
        raise ReportNotFound(f"{run_dir!r} is not a report run")
    return run_dir


def _parse_time(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)

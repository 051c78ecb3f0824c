"""The result every job returns: counts and table versions, the JSON it reports, and the audit row.

A job's Result dataclass is the one place its outcome is spelled: `to_mapping()` (the
--result-json and the Airflow XCom) is derived from its fields, and the audit row from the audit
table's columns, each taken from the field of the same name (or from the run's context, such as
`airflow_run_id`). A column that is neither is a schema error, caught by the jobs' tests.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

import pyarrow as pa

from statekeeper.tables.spec import TableSpec

_PROBLEMS_IN_SUMMARY = 20   # the rest are in the audit row and the job's own table


@dataclass(frozen=True, kw_only=True)
class JobResult:
    run_id: str
    status: str
    started_at: datetime
    finished_at: datetime
    warehouse: str
    table_versions: dict[str, int | None] = field(default_factory=dict)
    error: str | None = None

    @property
    def seconds(self) -> float:
        return (self.finished_at - self.started_at).total_seconds()

    def summary(self) -> str:
        raise NotImplementedError

    def _closing_lines(self, problems: tuple[str, ...] = (), more_in: str = "") -> list[str]:
        """How a summary ends: the first problems (the others counted, `more_in` says where they all
        are), then the run's error."""
        lines = [f"  PROBLEM: {p}" for p in problems[:_PROBLEMS_IN_SUMMARY]]
        if len(problems) > _PROBLEMS_IN_SUMMARY:
            lines.append(f"  ... {len(problems) - _PROBLEMS_IN_SUMMARY} more in {more_in}")
        if self.error:
            lines.append(f"  error: {self.error}")
        return lines

    def to_mapping(self) -> dict[str, Any]:
        """JSON-ready: datetimes as ISO-8601, enums as their values, nested dataclasses as objects."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            out[f.name] = _json_value(getattr(self, f.name))
            if f.name == "finished_at":
                out["seconds"] = round(self.seconds, 3)
        return out

    def audit_values(self) -> dict[str, Any]:
        """Values of audit columns whose shape differs from the field of the same name."""
        return {}

    def audit_row(self, spec: TableSpec, context: dict[str, Any]) -> pa.Table:
        """The run's row of `spec` (its audit table): each column from `audit_values()`, the run's
        `context`, or the field of the same name, in that order."""
        special = self.audit_values()
        row: dict[str, Any] = {}
        for column in spec.schema:
            name = column.name
            if name in special:
                value = special[name]
            elif name in context:
                value = context[name]
            else:
                try:
                    value = getattr(self, name)
                except AttributeError:
                    raise AttributeError(f"{type(self).__name__} has nothing for the {spec.name} column {name!r}") \
                        from None
            row[name] = _column_value(value, column.type)
        return pa.Table.from_pylist([row], schema=spec.schema)


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _json_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    return value


def _column_value(value: Any, type_: pa.DataType) -> Any:
    """A field's value as its audit column stores it: maps as (key, value) pairs without nulls
    (a table version that was never written is absent, not null), sequences as lists, enums as values."""
    if isinstance(value, Enum):
        return value.value
    if pa.types.is_map(type_) and isinstance(value, dict):
        return [(k, v) for k, v in value.items() if v is not None]
    if isinstance(value, tuple):
        return list(value)
    return value

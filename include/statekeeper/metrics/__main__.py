"""`python -m statekeeper.metrics --warehouse W [--scope S]`: print what a run pushes, in Prometheus's text format.

The figures of one scope (maintenance: what checkpoint_maintenance pushes; dr_copy and dr_follow: what the DR
DAGs push) read from the warehouse's tables now, with the default thresholds. Storage settings come from the
environment, as for every command (docs/storage-schemes.md, "Settings"). Exit codes: 0 printed, 2 a bad warehouse or
setting, 3 anything else.
"""
from __future__ import annotations

import argparse
import sys

from statekeeper.metrics.names import Scope


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        allow_abbrev=False, prog="python -m statekeeper.metrics",
        description="Print the metrics a DAG run pushes for a warehouse (docs/metrics.md), from its tables now.")
    p.add_argument("--warehouse", required=True, help="where the Delta tables live (local path or s3:// prefix)")
    p.add_argument("--scope", choices=[s.value for s in Scope], default=Scope.MAINTENANCE.value,
                   help="maintenance (checkpoint_maintenance's figures, default), dr_copy or dr_follow")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from statekeeper.errors import ConfigurationError
    from statekeeper.metrics.gather import gather
    from statekeeper.metrics.push import exposition
    from statekeeper.storage import StorageConfig
    from statekeeper.tables import TableError, Warehouse

    try:
        warehouse = Warehouse(args.warehouse, StorageConfig.from_env())
        print(exposition(gather(warehouse, Scope(args.scope))), end="")
    except (ConfigurationError, TableError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:   # noqa: BLE001 - the command's exit code for "anything else"
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())

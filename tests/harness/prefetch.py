"""Fetch what the test harness runs once, before the suite: each harness version's Flink distribution (from PyPI's
apache-flink-libraries) and the S3 filesystem plugin of the version that writes the S3 stores (Maven Central).

`make test` (and the other test targets) run this after `make setup`, so no test downloads anything: every fetch is
idempotent (a cached, verified copy is kept) and the caches live outside the checkout (`STATEKEEPER_CACHE`).

    python -m tests.harness.prefetch            # every version of STATEKEEPER_FLINK_VERSIONS (or the default)
"""
from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.harness.prefetch", description=__doc__.split("\n\n")[0],
                                     allow_abbrev=False)
    parser.add_argument("--no-s3-plugin", action="store_true",
                        help="only the Flink distributions (the demo writes no store to S3)")
    args = parser.parse_args(argv)
    from tests.harness import FLINK_VERSIONS
    from tests.harness.flink import HarnessSetupError, flink_lib
    from tests.harness.s3_plugin import plugins_root

    began = time.monotonic()
    try:
        for version in FLINK_VERSIONS:
            lib = flink_lib(version)
            print(f"harness: Flink {version} in {lib}")
        if not args.no_s3_plugin:
            # The S3 stores are written by the newest harness version only (tests/harness/s3_store.py).
            root = plugins_root(FLINK_VERSIONS[-1])
            print(f"harness: Flink {FLINK_VERSIONS[-1]}'s S3 filesystem plugin in {root}")
    except HarnessSetupError as exc:
        print(f"harness: {exc}", file=sys.stderr)
        return 2
    print(f"harness: ready in {time.monotonic() - began:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`python -m bench [NAME [ARGS...]]`: run every benchmark, or one with its own arguments."""
from __future__ import annotations

import sys

from bench import benchmarks


def main(argv: list[str]) -> int:
    found = benchmarks()
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        for name, module in found.items():
            print(f"  {name:20} {module.DESCRIPTION}")
        return 0
    if argv:
        name, rest = argv[0], argv[1:]
        if name not in found:
            print(f"unknown benchmark {name!r}; available: {', '.join(found)}", file=sys.stderr)
            return 2
        return found[name].main(rest)
    status = 0
    for name, module in found.items():
        print(f"=== {name}: {module.DESCRIPTION}", flush=True)
        status = module.main([]) or status
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

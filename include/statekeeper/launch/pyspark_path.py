"""Where a spark-submit driver imports PySpark from: the installed package, when it is SPARK_HOME.

spark-submit puts `$SPARK_HOME/python/lib/pyspark.zip` and the py4j zip at the front of the Python
driver's path. Python keeps no bytecode for modules imported from a zip, so every driver compiled the
~100 PySpark modules a job imports from source: 0.4-0.7 s of a compute_chains run on 2 cores (two
interleaved measurements of 3 and 5 runs, about 12-13.5 s each). With a pip-installed PySpark (the venv,
a DAG's local master) SPARK_HOME *is* the installed `pyspark` package, and the zip holds the same
release's files as the package, whose bytecode was compiled at install. Then the driver drops the two
zips from its path before anything imports PySpark, and imports the package.

Nothing changes when SPARK_HOME is a Spark distribution (its zip may be another release than any
installed package), when the package's directory is not on the path, or when PySpark or py4j is
already imported. Executors' Python workers get the same rule from the daemon they fork from
(statekeeper.launch.pyspark_daemon).
"""
from __future__ import annotations

import os
import sys
from collections.abc import Container, Mapping, Sequence

_ZIP_DIR = ("python", "lib")


def installed_package_path(path: Sequence[str], environ: Mapping[str, str], imported: Container[str]) -> list[str]:
    """`path` without SPARK_HOME's PySpark and py4j zips when SPARK_HOME is the `pyspark` package of a
    directory on `path` (py4j's zip stays unless that directory has py4j too); `path` unchanged otherwise."""
    path = list(path)
    if "pyspark" in imported or "py4j" in imported or not environ.get("SPARK_HOME"):
        return path
    home = os.path.realpath(environ["SPARK_HOME"])
    site = os.path.dirname(home)
    if os.path.basename(home) != "pyspark" or not os.path.isfile(os.path.join(home, "__init__.py")):
        return path
    if not any(entry and not entry.endswith(".zip") and os.path.realpath(entry) == site for entry in path):
        return path
    zips = os.path.join(home, *_ZIP_DIR)
    has_py4j = os.path.isfile(os.path.join(site, "py4j", "__init__.py"))

    def dropped(entry: str) -> bool:
        if not entry.endswith(".zip") or os.path.dirname(os.path.realpath(entry)) != zips:
            return False
        name = os.path.basename(entry)
        return name == "pyspark.zip" or (name.startswith("py4j-") and has_py4j)

    return [entry for entry in path if not dropped(entry)]


def prefer_installed_pyspark() -> None:
    """Apply `installed_package_path` to this process's path (a driver's entry point, before its imports)."""
    sys.path[:] = installed_package_path(sys.path, os.environ, sys.modules)

"""A spark-submit driver imports PySpark from the installed package (with its bytecode) when SPARK_HOME is
that package, and from SPARK_HOME's zip in every other case (statekeeper.launch.pyspark_path)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from statekeeper.launch.pyspark_path import installed_package_path


def _site(tmp_path: Path, *, py4j: bool = True) -> tuple[Path, list[str]]:
    """A site directory holding an installed pyspark package (with its python/lib zips) and py4j; the path a
    spark-submit driver gets: the library zip, SPARK_HOME's two zips, then the site directory."""
    site = tmp_path / "site-packages"
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    for name in ("pyspark.zip", "py4j-0.10.9.9-src.zip"):
        (lib / name).write_bytes(b"")
    if py4j:
        (site / "py4j").mkdir()
        (site / "py4j" / "__init__.py").write_text("")
    path = [str(tmp_path / "job"), str(tmp_path / "statekeeper.zip"), str(lib / "pyspark.zip"),
            str(lib / "py4j-0.10.9.9-src.zip"), str(site)]
    return site, path


def test_the_zips_are_dropped_when_spark_home_is_the_installed_package(tmp_path):
    site, path = _site(tmp_path)
    got = installed_package_path(path, {"SPARK_HOME": str(site / "pyspark")}, set())
    assert got == [path[0], path[1], str(site)]


def test_py4j_stays_in_its_zip_when_the_site_has_no_py4j(tmp_path):
    site, path = _site(tmp_path, py4j=False)
    got = installed_package_path(path, {"SPARK_HOME": str(site / "pyspark")}, set())
    assert got == [path[0], path[1], path[3], str(site)]


def test_nothing_changes_for_a_spark_distribution_or_a_package_off_the_path_or_after_an_import(tmp_path):
    site, path = _site(tmp_path)
    distribution = tmp_path / "spark-4.2.0-bin"
    (distribution / "python" / "lib").mkdir(parents=True)
    assert installed_package_path(path, {"SPARK_HOME": str(distribution)}, set()) == path
    assert installed_package_path(path, {}, set()) == path
    assert installed_package_path(path[:-1], {"SPARK_HOME": str(site / "pyspark")}, set()) == path[:-1]
    for imported in ({"pyspark"}, {"py4j"}):
        assert installed_package_path(path, {"SPARK_HOME": str(site / "pyspark")}, imported) == path


def test_a_spark_submit_driver_imports_the_installed_package(tmp_path):
    """The real launcher: spark-submit of the venv (SPARK_HOME is its pyspark package) runs a script that
    applies the rule as the jobs' entry points do, then imports PySpark (no session: no JVM of its own)."""
    script = tmp_path / "where.py"
    script.write_text("import sys\n"
                      "print('BEFORE', any(p.endswith('pyspark.zip') for p in sys.path))\n"
                      "from statekeeper.launch.pyspark_path import prefer_installed_pyspark\n"
                      "prefer_installed_pyspark()\n"
                      "import pyspark, py4j\n"
                      "print('PYSPARK', pyspark.__file__)\n"
                      "print('PY4J', py4j.__file__)\n")
    include = Path(__file__).resolve().parents[2] / "include"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "PYTHONPATH": str(include), "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("SPARK_HOME", None)
    out = subprocess.run([str(Path(sys.executable).with_name("spark-submit")), "--master", "local[1]", str(script)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if line.split(" ", 1)[0] in
                 ("BEFORE", "PYSPARK", "PY4J"))
    assert lines["BEFORE"] == "True", "spark-submit no longer puts pyspark.zip on the driver's path"
    assert ".zip" not in lines["PYSPARK"] and ".zip" not in lines["PY4J"], lines
    assert Path(lines["PYSPARK"]).parent.name == "pyspark" and Path(lines["PYSPARK"]).is_file()


def test_a_sessions_python_workers_import_the_installed_package(spark):
    """A session on a local master whose JVM this process starts (configure_builder, as the test session and a
    job run with --master local[N] are built): its Python workers fork from statekeeper.launch.pyspark_daemon, which
    applies the same rule before PySpark is imported. A task sees PySpark from the installed package, not from
    SPARK_HOME's zip (Spark puts the zip first on the workers' path; from it, every worker compiled PySpark
    from source)."""
    assert spark.sparkContext.getConf().get("spark.python.daemon.module") == "statekeeper.launch.pyspark_daemon"
    seen = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("pyspark").__file__).collect()
    assert len(seen) == 1 and ".zip" not in seen[0], seen
    assert Path(seen[0]).parent.name == "pyspark" and Path(seen[0]).is_file()

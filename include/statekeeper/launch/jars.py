"""The JVM parts every Statekeeper Spark job runs with: Delta Lake's Spark integration (the table engine) and
Hadoop's S3A connector with the AWS SDK v2 modules it uses (`s3a://` warehouses).

They are not on PyPI. `make setup` runs `python -m statekeeper.launch.jars`, which resolves `jvm-parts.pom.xml`
once with `mvn` (its local repository in the Statekeeper cache, so a fresh clone downloads nothing again), checks
every jar against `jvm-parts.sha256` (the set must match exactly) and installs them into this Python environment
(`<sys.prefix>/share/statekeeper/jars-<digest of the pins>`), beside the packages that use them. Jobs, tests and
DAG tasks only read that directory: a missing or altered jar is a `MissingJarsError` that names the fix, never a
download and never a Spark stack trace. Which coordinates and why: docs/jvm-parts.md.

One part is ours: Delta's log store for s3a:// tables (java/, statekeeper.delta.S3ConditionalLogStore: commits with
S3's create-only PUT, safe with several drivers; docs/jvm-parts.md, "Delta on S3"). Setup compiles it with the JDK's
javac against the installed jars and PySpark's into the same directory, named by a digest of its source.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path

from statekeeper.errors import ConfigurationError

POM = Path(__file__).resolve().with_name("jvm-parts.pom.xml")
PINS = Path(__file__).resolve().with_name("jvm-parts.sha256")
JAVA_SOURCES = Path(__file__).resolve().with_name("java")
LOG_STORE_CLASS = "statekeeper.delta.S3ConditionalLogStore"
LOG_STORE_JAR_PREFIX = "statekeeper-logstore-"
S3A_LOG_STORE_CONF = "spark.delta.logStore.s3a.impl"


class MissingJarsError(ConfigurationError):
    """The JVM parts are not installed in this environment, or one differs from its pinned sha256."""


class JavacNotFoundError(MissingJarsError):
    """Setup found no JDK compiler (javac) to build Statekeeper's Delta log store."""


def _pins_bytes() -> bytes:
    """The pin file's bytes, also when the library runs from spark-submit's --py-files zip (no file path there)."""
    from importlib.resources import files

    return files("statekeeper.launch").joinpath("jvm-parts.sha256").read_bytes()


def pinned() -> dict[str, str]:
    """Jar file name -> pinned sha256."""
    pins: dict[str, str] = {}
    for line in _pins_bytes().decode("utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            digest, name = line.split()
            pins[name] = digest
    return pins


def jars_dir(prefix: str | None = None) -> Path:
    """Where setup installs the pinned set: named by a digest of the pins, so a changed set is a new directory."""
    digest = hashlib.sha256(_pins_bytes()).hexdigest()[:12]
    return Path(prefix or sys.prefix) / "share" / "statekeeper" / f"jars-{digest}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def jar_paths() -> list[str]:
    """The installed jars' paths (sorted by name), or MissingJarsError. Checks presence and count only: the
    checksums were verified when setup installed them, and a job should not hash 23 MB at every start."""
    directory = jars_dir()
    pins = pinned()
    missing = [name for name in sorted(pins) if not (directory / name).is_file()]
    if missing:
        raise MissingJarsError(
            f"the JVM parts (Delta Lake for Spark, S3A) are not installed in {directory}: missing "
            f"{', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''} ({len(missing)} of {len(pins)}); "
            "run `make setup` (or `python -m statekeeper.launch.jars`) with this Python environment")
    store = log_store_jar(directory)
    if not store.is_file():
        raise MissingJarsError(
            f"Statekeeper's Delta log store ({LOG_STORE_CLASS}) is not built in {directory}: missing {store.name}; "
            "run `make setup` (or `python -m statekeeper.launch.jars`) with this Python environment and a JDK")
    return [str(directory / name) for name in sorted(pins)] + [str(store)]


def _java_sources() -> list[Path]:
    return sorted(JAVA_SOURCES.rglob("*.java"))


def log_store_jar(directory: Path | None = None) -> Path:
    """The log store's jar in the installed directory, named by a digest of its sources: a changed source is a
    jar that is not built yet, never a stale one."""
    directory = directory or jars_dir()
    sources = _java_sources()
    if not sources:
        # The library runs from spark-submit's --py-files zip (no source files on disk): the one jar setup built.
        built = sorted(directory.glob(f"{LOG_STORE_JAR_PREFIX}*.jar"))
        if len(built) == 1:
            return built[0]
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.relative_to(JAVA_SOURCES).as_posix().encode() + b"\0" + source.read_bytes())
    return directory / f"{LOG_STORE_JAR_PREFIX}{digest.hexdigest()[:12]}.jar"


def _javac() -> str:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "javac") if home and (Path(home) / "bin" / "javac").is_file() else None
    found = found or shutil.which("javac")
    if found is None:
        raise JavacNotFoundError(
            "javac not found: Statekeeper's Delta log store is compiled at setup; install a JDK 17 or newer "
            "(Debian's `default-jdk-headless`) or set JAVA_HOME to one, then run `make setup` again")
    return found


def build_log_store(directory: Path, *, log=print) -> Path:
    """Compile java/ against the installed jars and PySpark's into the log store's jar (idempotent: a built jar
    of the same sources is kept; jars of older sources are removed)."""
    target = log_store_jar(directory)
    if target.is_file():
        return target
    javac = _javac()
    import pyspark

    classpath = [p for p in sorted(directory.glob("*.jar")) if not p.name.startswith(LOG_STORE_JAR_PREFIX)]
    classpath += sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    work = Path(tempfile.mkdtemp(prefix=".logstore-", dir=directory.parent))
    try:
        classes = work / "classes"
        proc = subprocess.run([javac, "--release", "17", "-encoding", "UTF-8", "-d", str(classes),
                               "-cp", os.pathsep.join(map(str, classpath)), *map(str, _java_sources())],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise MissingJarsError(f"javac could not compile {JAVA_SOURCES} (exit {proc.returncode}):\n"
                                   f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        staged = work / target.name
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as jar:
            # Fixed entry times: the same sources give the same jar.
            jar.writestr(zipfile.ZipInfo("META-INF/MANIFEST.MF", (1980, 1, 1, 0, 0, 0)), "Manifest-Version: 1.0\n")
            for path in sorted(p for p in classes.rglob("*") if p.is_file()):
                jar.writestr(zipfile.ZipInfo(path.relative_to(classes).as_posix(), (1980, 1, 1, 0, 0, 0)),
                             path.read_bytes())
        for old in directory.glob(f"{LOG_STORE_JAR_PREFIX}*.jar"):
            old.unlink()
        os.replace(staged, target)
        log(f"jvm parts: {LOG_STORE_CLASS} compiled into {target}")
        return target
    finally:
        shutil.rmtree(work, ignore_errors=True)


def spark_conf(deployment: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings that put the JVM parts in a session: its jars and Delta's extension and catalog, each added to
    what `deployment` (the session's existing conf) already holds rather than replacing it."""
    # Here, not at import: the Airflow plugin imports this module while DAGs are parsed, and the table package is
    # the jobs' (pyarrow, storage).
    from statekeeper.tables.engine import DELTA_CATALOG, DELTA_EXTENSION

    deployment = deployment or {}
    jars = [j for j in (deployment.get("spark.jars") or "").split(",") if j]
    jars += [j for j in jar_paths() if j not in jars]
    extensions = [e for e in (deployment.get("spark.sql.extensions") or "").split(",") if e]
    if DELTA_EXTENSION not in extensions:
        extensions.append(DELTA_EXTENSION)
    conf = {
        "spark.jars": ",".join(jars),
        "spark.sql.extensions": ",".join(extensions),
        "spark.sql.catalog.spark_catalog": deployment.get("spark.sql.catalog.spark_catalog") or DELTA_CATALOG,
        # A Statekeeper table's log is a few dozen commits; Delta's default of 50 snapshot partitions made every
        # table read run 50 tasks for it.
        # Delta deletes commit files past the log retention when it checkpoints; readers are pinned to old versions
        # (statekeeper.tables.delta_spark.KEEP_LOGS_PROPERTY): every table this session creates keeps them.
        "spark.databricks.delta.properties.defaults.enableExpiredLogCleanup": "false",
        # Spark sizes a Delta scan by its files' bytes on disk, and these tables take 10-53x that when read (parquet
        # of URIs with long shared prefixes): unscaled, a 1M-object `files` table was broadcast into validation's
        # tasks until the JVM ran out of heap.
        "spark.sql.sources.fileCompressionFactor": deployment.get("spark.sql.sources.fileCompressionFactor") or "10",
        "spark.databricks.delta.snapshotPartitions": deployment.get("spark.databricks.delta.snapshotPartitions") or "1",
    }
    # s3a:// tables commit through our log store (safe with several drivers; docs/jvm-parts.md, "Delta on S3"),
    # unless the deployment chose one (a DynamoDB log store): Delta refuses a scheme's store beside the legacy
    # spark.delta.logStore.class, so that one is left alone too.
    if not deployment.get("spark.delta.logStore.class"):
        conf[S3A_LOG_STORE_CONF] = deployment.get(S3A_LOG_STORE_CONF) or LOG_STORE_CLASS
    return conf


def submit_args(deployment: Mapping[str, str] | None = None) -> list[str]:
    """`spark_conf(deployment)` as spark-submit's arguments: `--conf key=value` for each setting."""
    return [arg for key, value in spark_conf(deployment).items() for arg in ("--conf", f"{key}={value}")]


def maven_repo() -> Path:
    """The Maven repository every Statekeeper fetch uses: in the cache, outside any checkout, so a fresh clone
    resolves offline what an earlier one downloaded."""
    from statekeeper.launch.jvm_startup import cache_dir

    return cache_dir(os.environ).parent / "m2"


def run_mvn(args: list[str], what: str) -> None:
    """Run `mvn` in batch mode against `maven_repo()`, outside any project; MissingJarsError naming `what`."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MissingJarsError(f"mvn not found: install Maven (Debian's `maven`, `make setup` does) to fetch {what}")
    with tempfile.TemporaryDirectory(prefix="mvn-") as work:
        proc = subprocess.run([mvn, "-B", "-q", f"-Dmaven.repo.local={maven_repo()}", *args],
                              capture_output=True, text=True, cwd=work)
    if proc.returncode != 0:
        raise MissingJarsError(f"mvn could not resolve {what} (exit {proc.returncode}); is Maven Central "
                               f"reachable?\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def fetch_artifact(group: str, artifact: str, version: str) -> Path:
    """One jar (no dependencies) in `maven_repo()`, resolved by mvn if it is not there yet. The caller verifies it
    against its own pin."""
    jar = maven_repo().joinpath(*group.split("."), artifact, version, f"{artifact}-{version}.jar")
    if not jar.is_file():
        coordinate = f"{group}:{artifact}:{version}"
        run_mvn(["dependency:get", f"-Dartifact={coordinate}", "-Dtransitive=false"], coordinate)
    if not jar.is_file():
        raise MissingJarsError(f"mvn reported {group}:{artifact}:{version} resolved, but {jar} is not there")
    return jar


def install(*, log=print) -> Path:
    """Resolve, verify and install the pinned set (idempotent: an installed, verified set is kept)."""
    directory = jars_dir()
    pins = pinned()
    if directory.is_dir() and sorted(p.name for p in directory.glob("*.jar")
                                     if not p.name.startswith(LOG_STORE_JAR_PREFIX)) == sorted(pins):
        build_log_store(directory, log=log)
        return directory
    repo = maven_repo()
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".jars-", dir=directory.parent))
    try:
        began = time.monotonic()
        # `dependency:copy-dependencies` on our own pom: one mvn run, offline once the cache's repository has them.
        run_mvn(["-f", str(POM), "dependency:copy-dependencies", f"-DoutputDirectory={staging}"], str(POM))
        got = {p.name: p for p in staging.glob("*.jar")}
        unexpected = sorted(set(got) - set(pins))
        absent = sorted(set(pins) - set(got))
        if unexpected or absent:
            raise MissingJarsError(f"{POM.name} resolved a different set than {PINS.name} pins: not pinned "
                                   f"{unexpected or 'none'}, not resolved {absent or 'none'}; re-pin deliberately "
                                   "(docs/jvm-parts.md says how) or fix the pom")
        for name, path in sorted(got.items()):
            actual = _sha256(path)
            if actual != pins[name]:
                raise MissingJarsError(f"{name} has sha256 {actual}, pinned {pins[name]} in {PINS}: remove it from "
                                       f"{repo} and run setup again; if Maven Central changed the artifact, check "
                                       "it before re-pinning")
        # The pom and the directory's own `target/` stay behind; only the jars move.
        final = Path(tempfile.mkdtemp(prefix=".jars-ready-", dir=directory.parent))
        for path in got.values():
            os.replace(path, final / path.name)
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(final, directory)
        log(f"jvm parts: {len(got)} jars verified and installed in {directory} ({time.monotonic() - began:.1f}s)")
        build_log_store(directory, log=log)
        return directory
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m statekeeper.launch.jars", allow_abbrev=False,
                                     description="Install the pinned JVM parts (Delta Lake for Spark, S3A) into "
                                                 "this Python environment, resolving them once with mvn.")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--print", action="store_true", help="only print the installed jars' directory "
                                                           "(exit 2 if they are not installed)")
    what.add_argument("--submit-args", action="store_true",
                      help="only print the spark-submit arguments that put the installed parts in a job's session, "
                           "one per line (`--conf` and its value): for running a job's script with spark-submit by "
                           "hand (exit 2 if they are not installed)")
    args = parser.parse_args(argv)
    try:
        if args.submit_args:
            print("\n".join(submit_args()))
        elif args.print:
            jar_paths()
            print(jars_dir())
        else:
            print(f"jvm parts: {install()}")
    except MissingJarsError as exc:
        print(f"jvm parts: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

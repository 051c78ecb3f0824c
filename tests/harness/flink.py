"""Flink runtime from PyPI, our Java sources compiled against it, and the JVM command line.

PyPI's `apache-flink-libraries` is the only Flink distribution reachable here. It ships the whole
runtime (`flink-dist-*.jar` bundles the RocksDB/ForSt backends with native libraries) either as an
sdist (`*/deps/lib/*.jar`) or as a wheel (`pyflink/lib/*.jar`). We keep only `flink-dist` and the
log4j jars: the table planner, Python and SQL-client jars are not needed by the harness and would
double the cache.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import uuid
import zipfile
from pathlib import Path

from statekeeper.launch.jvm_startup import (ARCHIVE_MAP_OPTION, ARCHIVE_WRITE_OPTION, JvmStartup, jars_identity,
                                     jdk_identity)
from tests.harness._fs import cache_root, file_lock, publish_dir

JAVA_SOURCES = Path(__file__).resolve().parent / "java"

# Flink's own Java 17 flags (`env.java.opts.all` in flink-dist's config.yaml, 1.18+/2.x): the
# runtime reflects into these JDK packages (Kryo, RPC, memory management).
FLINK_JAVA17_OPTS = (
    "--add-exports=java.base/sun.net.util=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.api=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.parser=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.tree=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.util=ALL-UNNAMED",
    "--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.text=ALL-UNNAMED",
    "--add-opens=java.base/java.time=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.locks=ALL-UNNAMED",
)
# Modest heap (other test sessions share the 2 cores / 24 GB); serial GC avoids a GC thread pool.
# C1 only: harness JVMs live 2-20 s, and C2 compiler threads roughly doubled the CPU time of a
# verifier run (18 s -> 11 s CPU for two runs). Later options win, so callers can append
# -XX:TieredStopAtLevel=4 (e.g. to benchmark Flink's own reader at full speed).
JVM_BASE_OPTS = ("-Xmx1g", "-Xss4m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                 "-Djava.awt.headless=true")

_KEEP_JAR_PREFIXES = ("flink-dist-", "log4j-")


class HarnessSetupError(RuntimeError):
    """Java, javac or the Flink distribution is missing or broken (tests must error, not skip)."""


def flink_lib(version: str) -> Path:
    """Directory with the Flink jars of `version`, downloaded and extracted once per cache."""
    base = cache_root() / "flink" / version
    lib = base / "lib"
    if lib.is_dir():
        return lib
    with file_lock(base.parent / f"{version}.lock"):
        if lib.is_dir():
            return lib
        base.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=base, prefix="download-") as download:
            archive = _pip_download(version, Path(download))
            staging = Path(tempfile.mkdtemp(dir=base, prefix="lib.tmp-"))
            _extract_jars(archive, staging)
            publish_dir(staging, lib)
    return lib


def _pip_command() -> list[str]:
    """A pip for `pip download`: the running interpreter's, else the wheel bundled with ensurepip.

    uv-built virtualenvs have no pip module; the stdlib's bundled pip wheel runs directly from
    the zip, without installing anything into the environment.
    """
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    import ensurepip

    bundled = sorted((Path(ensurepip.__file__).parent / "_bundled").glob("pip-*.whl"))
    if not bundled:
        raise HarnessSetupError("no pip available to download apache-flink-libraries (no pip module, "
                                "no ensurepip bundled wheel); install pip into the environment")
    return [sys.executable, str(bundled[-1] / "pip")]


def _pip_download(version: str, dest: Path) -> Path:
    cmd = _pip_command() + [
        "download", "--no-deps", "--no-cache-dir", "--disable-pip-version-check", "--quiet",
        f"apache-flink-libraries=={version}", "-d", str(dest),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise HarnessSetupError(
            f"pip download apache-flink-libraries=={version} failed (exit {proc.returncode}):\n"
            f"{proc.stdout}\n{proc.stderr}")
    archives = [p for p in dest.iterdir() if p.name.endswith((".whl", ".tar.gz", ".zip"))]
    if len(archives) != 1:
        raise HarnessSetupError(f"expected one apache-flink-libraries archive in {dest}, got {archives}")
    return archives[0]


def _wanted(member: str) -> str | None:
    """Jar file name if `member` is a runtime jar we keep (`*/lib/<name>.jar`), else None."""
    parts = member.split("/")
    if len(parts) >= 2 and parts[-2] == "lib" and parts[-1].endswith(".jar") \
            and parts[-1].startswith(_KEEP_JAR_PREFIXES):
        return parts[-1]
    return None


def _extract_jars(archive: Path, dest: Path) -> None:
    found: list[str] = []
    if archive.name.endswith(".whl") or archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                name = _wanted(info.filename)
                if name:
                    with zf.open(info) as src, open(dest / name, "wb") as out:
                        shutil.copyfileobj(src, out, 1 << 20)
                    found.append(name)
    else:
        with tarfile.open(archive, "r:*") as tf:
            for member in tf:
                name = _wanted(member.name)
                if name and member.isfile():
                    src = tf.extractfile(member)
                    assert src is not None
                    with src, open(dest / name, "wb") as out:
                        shutil.copyfileobj(src, out, 1 << 20)
                    found.append(name)
    if not any(n.startswith("flink-dist-") for n in found):
        raise HarnessSetupError(f"{archive.name} contains no flink-dist jar (found {found})")


# Entry points that read stores but take no part in writing them (VerifyMany: Verify's batch
# form): a fix there must not invalidate every cached fixture. VerbatimGenerate writes stores, but
# only those of plans with a `store_dir`, whose fingerprints cover its source
# (scenarios.ScenarioPlan.fingerprint); likewise ClusterGenerate and ExtraOptions, only those of
# `clustered` plans (clustered.py), and RecoveryGenerate only those of `recovering` plans
# (recovering.py). RunJob runs a job for a test's own directory (running.py) and never writes a fixture;
# S3Plugins loads the S3 plugin for RunJob, VerifyMany and S3Generate, which writes stores on S3 for one test
# session only (s3_store.py), never a cached fixture.
_NOT_GENERATOR = frozenset({"Oracle.java", "Verify.java", "VerifyMany.java", "VerbatimGenerate.java", "RunJob.java",
                            "ClusterGenerate.java", "ExtraOptions.java", "RecoveryGenerate.java",
                            "S3Plugins.java", "S3Generate.java"})


def java_sources_hash(generator_only: bool = False) -> str:
    """Content hash of the files under tests/harness/java (names and bytes); with
    `generator_only`, of those that determine what the generator writes."""
    digest = hashlib.sha256()
    for path in sorted(p for p in JAVA_SOURCES.rglob("*") if p.is_file()):
        if generator_only and path.name in _NOT_GENERATOR:
            continue
        digest.update(path.relative_to(JAVA_SOURCES).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def java_source_hash(name: str) -> str:
    """Content hash of the one Java source file `name` (e.g. "VerbatimGenerate.java")."""
    (path,) = [p for p in JAVA_SOURCES.rglob(name) if p.is_file()]
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def harness_classes(version: str) -> Path:
    """Our Java sources compiled (javac --release 17) against Flink `version`, cached by hash."""
    lib = flink_lib(version)
    base = cache_root() / "harness" / version / java_sources_hash()
    classes = base / "classes"
    if classes.is_dir():
        return classes
    javac = shutil.which("javac")
    if javac is None:
        raise HarnessSetupError("javac not found: the harness needs a JDK 17+ on PATH")
    with file_lock(base / "compile.lock"):
        if classes.is_dir():
            return classes
        staging = Path(tempfile.mkdtemp(dir=base, prefix="classes.tmp-"))
        sources = sorted(str(p) for p in JAVA_SOURCES.rglob("*.java"))
        cmd = [javac, "--release", "17", "-nowarn", "-encoding", "UTF-8",
               "-cp", str(lib / "*"), "-d", str(staging), *sources]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise HarnessSetupError(f"javac against Flink {version} failed:\n{proc.stdout}\n{proc.stderr}")
        for resource in JAVA_SOURCES.rglob("*"):
            if resource.is_file() and resource.suffix != ".java":
                target = staging / resource.relative_to(JAVA_SOURCES)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(resource, target)
        publish_dir(staging, classes)
    return classes


def harness_jar(version: str) -> Path:
    """The compiled harness as one jar beside its classes: the JDK archives classes from jars only, and
    refuses to write an archive at all while a non-empty directory is on the class path."""
    classes = harness_classes(version)
    jar = classes.parent / "harness.jar"
    if jar.is_file():
        return jar
    with file_lock(classes.parent / "compile.lock"):
        if jar.is_file():
            return jar
        staging = classes.parent / f".harness.jar.{os.getpid()}.tmp"
        with zipfile.ZipFile(staging, "w") as out:
            for f in sorted(classes.rglob("*")):
                if f.is_file():
                    out.write(f, f.relative_to(classes).as_posix())
        os.replace(staging, jar)
    return jar


def _class_path(version: str, jar: Path) -> list[str]:
    # Listed, not `lib/*`: the JDK checks an archive against the class path in order, and a wildcard's
    # order is the directory's.
    return [str(jar), *map(str, sorted(flink_lib(version).glob("*.jar")))]


def class_sharing(version: str, *, write: bool) -> JvmStartup:
    """A class-data-sharing archive of a harness JVM's classes (JDK dynamic CDS), per Flink version.

    A harness JVM spends most of its CPU loading and verifying Flink's classes: measured on a restore
    (Verify, 2 cores), mapping the archive took its CPU from 7.4 s to 4.6 s. The first JVM allowed to
    `write` (one that starts a MiniCluster, so the archive holds what restores load) dumps it at its exit;
    the caller publishes it after a clean exit (`JvmStartup.publish`: an atomic rename) or discards it.
    Its name is a digest of what the JDK checks it against (the JDK, each jar's path, size and time): a
    new JDK or new jars get a new archive, and a JVM that still cannot use one says so in one warning line
    and starts without it."""
    jar = harness_jar(version)
    # The `java` of PATH, as java_command runs it (not JAVA_HOME's).
    identity = [jdk_identity({"PATH": os.environ.get("PATH", "")}), jars_identity(jar.parent),
                jars_identity(flink_lib(version))]
    key = hashlib.sha1("\n".join(identity).encode()).hexdigest()[:16]
    archive = jar.parent / f"flink-harness-{key}.jsa"
    if archive.is_file():
        return JvmStartup(f"{ARCHIVE_MAP_OPTION}{archive}", archive=archive)
    if not write:
        return JvmStartup("")
    pending = jar.parent / f".{archive.name}.{uuid.uuid4().hex}.tmp"
    return JvmStartup(f"{ARCHIVE_WRITE_OPTION}{pending}", pending=pending, archive=archive)


def java_command(version: str, main_class: str, *args: str, jvm_opts: tuple[str, ...] = (),
                 sharing: JvmStartup | None = None) -> list[str]:
    """Full `java ...` argv running `main_class` of the harness against Flink `version`; with `sharing`
    (`class_sharing`), from the harness jar with that archive option."""
    java = shutil.which("java")
    if java is None:
        raise HarnessSetupError("java not found: the harness needs a JDK 17+ on PATH")
    classes = harness_classes(version)
    if sharing is None:
        classpath = os.pathsep.join([str(classes), str(flink_lib(version) / "*")])
        sharing_opts: list[str] = []
    else:
        classpath = os.pathsep.join(_class_path(version, harness_jar(version)))
        sharing_opts = sharing.options.split()
    return [java, *JVM_BASE_OPTS, *sharing_opts, *FLINK_JAVA17_OPTS,
            f"-Dlog4j.configurationFile={classes / 'log4j2-harness.properties'}",
            "-Dlog4j2.disable.jmx=true",
            *jvm_opts, "-cp", classpath, main_class, *args]

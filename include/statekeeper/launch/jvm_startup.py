"""JVM start-up settings for a job on a local master, whose JVM lives only as long as the job.

On a small machine a short job's JVM spends most of its CPU starting: the C2 compiler working on
Spark's planner and codegen, and loading and verifying Spark's classes. Measured with
`python -m bench pipeline_floor` (2 cores): C1 only takes 35% off an empty session's CPU and 42% off
compute_chains'; a class-data-sharing archive (JDK dynamic CDS) of the classes a job loads takes
another third off the empty session. The first local run writes the archive when its JVM exits (to
a private name, published by an atomic rename only after a normal exit); later runs map it. The
archive's name is a digest of what the JVM checks it against (the JDK binary, the path, size and
time of each of Spark's jars, the task's extra class path), so a new JDK, other jars or another
installation of the same jars get a new archive; a JVM that still cannot use
one says so in one warning line and starts as it would without it. Each use of an archive sets its
mtime; archives unused for UNUSED_DAYS, and all but the MAX_ARCHIVES last used, are removed when another
is published (`prune`).

Cluster executors are started by the cluster manager, so none of this applies to them: whether their
JVMs (and a cluster driver's) run C1 only is the deployment's choice, through Spark's
`spark.{driver,executor}.defaultJavaOptions` in its spark-defaults.conf. For a cluster whose apps live
under a minute it pays (the standalone-cluster test: executors' CPU halved); a production job of hours
wants C2. A job started as `python spark_jobs/<job>.py --master local[N]` maps the archive
too (`mapped_archive_option`) and gets the same heap (`self_started_heap_conf`), but keeps C2 and writes no
archive.

The first local run is usually an index run, so its archive holds the index's classes only, and every other
job loaded the rest of Spark's planner from the jars on each run. A DAG run's shared driver runs every step of
the run in one JVM: until there is one, it writes the *pipeline* archive at its exit (`shared_driver_startup`;
`python -m statekeeper.launch.jvm_startup` runs it and publishes the archive after a normal exit of a driver that ran
MIN_PIPELINE_JOBS jobs), and from then on every local driver maps that one instead (sample store, 3 runs each
with an archive of seven jobs against the index's: chains 7.8 -> 7.3 s, validation without the quality suite
8.7 -> 7.6 s, the DR copy 9.7 -> 9.0 s, the index as before; an archive of the DR job's own classes gave it no
more). A JDK cannot write a dynamic archive while it maps one, so that one driver starts without an archive.
(`jcmd <pid> VM.cds dynamic_dump`, which writes one while the JVM runs, was tried: its archive of the same seven
jobs was 141 MB against 187 MB, and the DR copy with it took 10.0 s against 9.0 s.)

A local driver is also every task's executor, so its heap holds the kept DataFrames and the joins'
hash tables of the whole job; Spark's default of 1 GiB suits neither. At a million objects
(`python -m bench scale`, local[2]) the GC plan's kept frames no longer fit and went to disk, and the
run took 39 s (35 s with 2 GiB, 30 s with 3 GiB, 25 s with 6 GiB). `local_driver_memory` gives a
local driver a quarter of the machine's memory (or of its cgroup's limit), between 1 and 8 GiB: a
maximum, not a reservation. Its memory pages stay at the 16 MiB Spark chose for a 1 GiB heap on 2
cores (`LOCAL_PAGE_SIZE`).

A local driver needs no connection from another host, and by default Spark gives it one from anywhere: its RPC
server and block manager on the machine's external address (unauthenticated), its UI on every interface with links
that kill stages. `local_network` keeps them on loopback with the kill links off, for the DAG's local tasks and
(`self_started_network`) for a job started as `python spark_jobs/<job>.py --master local[N]`, each part unless the
run or its deployment chose it.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

C1_ONLY = "-XX:TieredStopAtLevel=1"
# The two ways a driver's options name an archive: one written at the JVM's exit, one mapped at its start.
ARCHIVE_WRITE_OPTION = "-XX:ArchiveClassesAtExit="
ARCHIVE_MAP_OPTION = "-XX:SharedArchiveFile="
UNUSED_DAYS = 14   # an archive no local driver mapped for this long is removed when another is published
# An age alone did not bound the cache: a machine that clones the project afresh for every CI run writes an
# archive per clone (a new venv path), 28 of them (3 GB) in two days here, each useless once its clone is gone.
MAX_ARCHIVES = 6
_ARCHIVE_PREFIX = "spark-driver-"   # archives are <prefix><digest>.jsa; a JVM's private file is .<archive>.<id>.tmp
# The archive a shared driver writes of every job's classes: <prefix><digest>-pipeline.jsa, preferred when present.
_PIPELINE_SUFFIX = "-pipeline.jsa"
# A shared driver that ran fewer jobs than this writes no pipeline archive: the classes of one or two jobs
# would stand in for every job's from then on (a DAG run's first steps: index, chains, validation).
MIN_PIPELINE_JOBS = 3
# A claim to write the pipeline archive older than this is a driver that died: another may write it then.
PIPELINE_WRITE_HOURS = 6
_DYNAMIC_ARCHIVE_MAGIC = 0xF00BABA8   # the first four bytes (little-endian) of a dynamic CDS archive
# Spark settings that change the driver's class path, hence the archive.
_CLASS_PATH_KEYS = ("spark.jars", "spark.jars.packages", "spark.driver.extraClassPath")
# Directories spark-submit's launcher puts on the driver's class path when set. The JDK refuses to dump an
# archive when a class-path directory is not empty ("Error: non-empty directory"), and then the JVM exits 1
# after the job's work is done: a deployment with a spark-defaults.conf in SPARK_CONF_DIR would fail every
# local run. With any of them non-empty no archive is written (an existing one is still mapped, or skipped
# with one warning line when the class path no longer matches it).
_CONF_DIR_VARIABLES = ("SPARK_CONF_DIR", "HADOOP_CONF_DIR", "YARN_CONF_DIR")
DRIVER_MEMORY = "spark.driver.memory"
# Spark sizes its memory pages from the heap (heap x 0.6 / cores / 16, up to 64 MiB), and every sort and
# aggregation starts with one. With the sized heap they grew from 16 to 64 MiB, and on the sample store the steps
# took 1-7% longer (chains 7.6 -> 7.9 s; with 16 MiB pages 7.7 s).
PAGE_SIZE = "spark.buffer.pageSize"
LOCAL_PAGE_SIZE = "16m"
_MIB = 1 << 20
# A quarter of the machine: room for the Python workers, the page cache and a second job beside it.
_HEAP_SHARE = 4
# The floor is Spark's own default; the largest heap measured here was 6 GiB, so the cap stays near it.
_HEAP_MIN_MIB, _HEAP_MAX_MIB = 1024, 8192


@dataclass(frozen=True)
class JvmStartup:
    """What to add to spark.driver.extraJavaOptions, and the archive this run writes, if any."""

    options: str
    pending: Path | None = None   # written by the JVM at exit; publish() moves it into place
    archive: Path | None = None

    def publish(self) -> bool:
        """Move the archive the JVM wrote into place (after a normal exit only: a JVM killed while
        writing leaves a partial file, which is discarded)."""
        if self.pending is None or self.archive is None:
            return False
        try:
            if self.pending.stat().st_size == 0:
                return False
            os.replace(self.pending, self.archive)
        except FileNotFoundError:
            return False
        prune(self.archive.parent, keep=self.archive)
        return True

    def discard(self) -> None:
        if self.pending is not None:
            self.pending.unlink(missing_ok=True)


def prune(directory: Path, *, keep: Path | None = None) -> list[Path]:
    """Remove archives no driver has used for UNUSED_DAYS (a mapped archive's mtime is set at each use), all
    but the MAX_ARCHIVES most recently used (`keep` counts among them), and private files of JVMs that never
    published (killed while writing) older than a day. Each archive is about 150 MB, and every new class
    path (another checkout's venv, a reinstall, other jars) writes one.
    A JVM that mapped a removed archive keeps its mapping; one that starts with it gone says so in one
    warning line and runs without it. Returns what was removed."""
    now = time.time()
    removed = []
    try:
        entries = list(directory.iterdir())
    except OSError:
        return removed
    archives: list[tuple[float, Path]] = []
    for path in entries:
        if path == keep:
            continue
        archive = path.name.startswith(_ARCHIVE_PREFIX) and path.name.endswith(".jsa")
        if archive:
            limit = UNUSED_DAYS * 86400
        elif path.name.startswith(f".{_ARCHIVE_PREFIX}") and path.name.endswith(".tmp"):
            limit = 86400
        else:
            continue
        try:
            mtime = path.lstat().st_mtime
            if now - mtime > limit:
                path.unlink()
                removed.append(path)
            elif archive:
                archives.append((mtime, path))
        except OSError:   # gone meanwhile, or not ours to remove: left alone
            continue
    archives.sort(reverse=True)
    for _, path in archives[MAX_ARCHIVES - (keep is not None):]:
        try:
            path.unlink()
            removed.append(path)
        except OSError:
            continue
    return removed


def _mark_used(archive: Path) -> None:
    try:
        os.utime(archive)
    except OSError:   # a read-only cache: the archive is still used, only never pruned by its age
        pass


def cache_dir(environ: Mapping[str, str]) -> Path:
    base = environ.get("STATEKEEPER_CACHE") or str(Path(environ.get("HOME") or Path.home()) / ".cache" / "statekeeper")
    return Path(base) / "jvm"


def jdk_identity(environ: Mapping[str, str]) -> str:
    """The JDK an archive was written by, as the JVM checks it: the `java` of JAVA_HOME, else of PATH."""
    java_home = environ.get("JAVA_HOME")
    java = Path(java_home, "bin", "java") if java_home else (shutil.which("java", path=environ.get("PATH")) or "")
    if not java:
        return "no-java"
    real = Path(java).resolve()
    try:
        st = real.stat()
    except OSError:
        return str(real)
    return f"{real}:{st.st_size}:{int(st.st_mtime)}"


def jars_identity(jars: Path | None = None) -> str:
    """A directory's jars (default: Spark's) as the JVM checks them against an archive: each jar's full
    path, size and modification time. Names alone are not enough: a second checkout (another venv) or a reinstall
    has the same jar names elsewhere or newer, every JVM then refuses the archive ("The top archive
    failed to load") and each local job starts without it, with nothing but one warning line to tell."""
    if jars is None:
        import pyspark

        jars = Path(pyspark.__file__).parent / "jars"
    if not jars.is_dir():
        return ""
    entries = []
    for jar in sorted(jars.resolve().glob("*.jar")):
        st = jar.stat()
        entries.append(f"{jar}:{st.st_size}:{st.st_mtime_ns}")
    return ",".join(entries)


def archive_for(conf: Mapping[str, str], environ: Mapping[str, str]) -> Path:
    """Where the archive for a driver with this `conf` is (or would be written)."""
    key = hashlib.sha1("\n".join([jdk_identity(environ), jars_identity(),
                                  *(f"{k}={conf.get(k, '')}" for k in _CLASS_PATH_KEYS)]).encode()).hexdigest()[:16]
    return cache_dir(environ) / f"{_ARCHIVE_PREFIX}{key}.jsa"


def pipeline_archive(archive: Path) -> Path:
    """The pipeline archive beside the archive `archive` (the same class path, written by a shared driver)."""
    if archive.name.endswith(_PIPELINE_SUFFIX):
        return archive
    return archive.with_name(archive.name[:-len(".jsa")] + _PIPELINE_SUFFIX)


def _existing(archive: Path) -> Path | None:
    """The archive a driver with `archive`'s class path maps: the pipeline archive when there is one."""
    for candidate in (pipeline_archive(archive), archive):
        if candidate.is_file():
            return candidate
    return None


def local_startup(conf: Mapping[str, str], environ: Mapping[str, str] | None = None) -> JvmStartup:
    """C1 only plus the class-data-sharing archive for a driver with this `conf`, unless the task's
    own Java options already choose a compiler or an archive (theirs stay)."""
    environ = os.environ if environ is None else environ
    java = conf.get("spark.driver.extraJavaOptions", "")
    options = [] if "TieredStopAtLevel" in java else [C1_ONLY]
    if _chooses_sharing(java):
        return JvmStartup(" ".join(options))
    archive = archive_for(conf, environ)
    existing = _existing(archive)
    if existing is not None:
        _mark_used(existing)
        return JvmStartup(" ".join([*options, f"{ARCHIVE_MAP_OPTION}{existing}"]), archive=existing)
    if _non_empty_conf_dir(environ):
        return JvmStartup(" ".join(options))
    try:
        archive.parent.mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only cache: run without an archive
        return JvmStartup(" ".join(options))
    pending = archive.parent / f".{archive.name}.{uuid.uuid4().hex}.tmp"
    return JvmStartup(" ".join([*options, f"{ARCHIVE_WRITE_OPTION}{pending}"]), pending=pending, archive=archive)


def mapped_archive_option(conf: Mapping[str, str], environ: Mapping[str, str] | None = None) -> str:
    """For a driver JVM a Python process starts itself (`python spark_jobs/<job>.py --master local[N]`):
    the option that maps an archive an earlier run wrote, or "" (none yet, or the job's own options
    choose). Such a JVM writes none: it ends with its Python process, which can no longer publish it,
    and a killed run would leave a partial one; the DAG's local tasks write it."""
    environ = os.environ if environ is None else environ
    # A configuration directory may set the driver's Java options in spark-defaults.conf, which the
    # caller's setting would replace: leave such deployments as they are.
    if _chooses_sharing(conf.get("spark.driver.extraJavaOptions", "")) or _non_empty_conf_dir(environ):
        return ""
    archive = _existing(archive_for(conf, environ))
    if archive is None:
        return ""
    _mark_used(archive)
    return f"{ARCHIVE_MAP_OPTION}{archive}"


def shared_driver_startup(startup: JvmStartup | None, environ: Mapping[str, str] | None = None) -> JvmStartup | None:
    """What a DAG run's shared driver, started with the settings of `startup` (its setup task's local_startup),
    adds to its Java options to write the pipeline archive at its exit (instead of mapping an archive), and
    where; None when it writes none: one exists (it maps it, as its tasks do), the task's options choose their
    own class sharing, or a configuration directory on the class path is not empty (the JDK refuses to dump)."""
    environ = os.environ if environ is None else environ
    if startup is None or startup.archive is None or _non_empty_conf_dir(environ):
        return None
    target = pipeline_archive(startup.archive)
    if target.is_file() or _being_written(target):
        return None
    pending = target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp"
    try:
        pending.touch()   # claims the write (the JVM replaces the file at its exit): a driver started meanwhile maps
    except OSError:       # the archive there is, rather than write a second one beside this one
        return None
    return JvmStartup(f"{ARCHIVE_WRITE_OPTION}{pending}", pending=pending, archive=target)


def _being_written(target: Path) -> bool:
    """Whether a shared driver started in the last PIPELINE_WRITE_HOURS writes `target` (its claim is there)."""
    for claim in target.parent.glob(f".{target.name}.*.tmp"):
        try:
            age = time.time() - claim.stat().st_mtime
            if not claim.name.endswith(".jobs.tmp") and age < PIPELINE_WRITE_HOURS * 3600:
                return True
        except OSError:   # published or discarded meanwhile
            continue
    return False


def jobs_file(pending: Path) -> Path:
    """Where a shared driver writing `pending` records how many jobs it ran (pruned as a private file)."""
    return pending.with_name(pending.name[:-len(".tmp")] + ".jobs.tmp")


def run_and_publish(command: Sequence[str], startup: JvmStartup, min_jobs: int = MIN_PIPELINE_JOBS) -> int:
    """Run `command` (a shared driver's spark-submit, whose JVM writes `startup.pending` at its exit); publish
    the archive only after it exited 0 having run at least `min_jobs` jobs (the count it wrote to `jobs_file`)
    and when the file is a whole dynamic archive. Returns the command's exit status."""
    assert startup.pending is not None and startup.archive is not None
    counted = jobs_file(startup.pending)
    try:
        code = subprocess.call(list(command))
        try:
            jobs = int(counted.read_text().strip())
            with open(startup.pending, "rb") as f:
                whole = int.from_bytes(f.read(4), "little") == _DYNAMIC_ARCHIVE_MAGIC
        except (OSError, ValueError):
            jobs, whole = 0, False
        if code == 0 and jobs >= min_jobs and whole:
            startup.publish()
        return code
    finally:
        startup.discard()
        counted.unlink(missing_ok=True)


def main(argv: Sequence[str] | None = None) -> int:
    """python -m statekeeper.launch.jvm_startup --pending P --archive A [--min-jobs N] -- COMMAND...: run_and_publish."""
    import argparse
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    split = args.index("--") if "--" in args else len(args)
    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m statekeeper.launch.jvm_startup",
                                description="Run a shared Spark driver's spark-submit and publish the class archive "
                                            "its JVM writes at exit (statekeeper.launch.jvm_startup).")
    p.add_argument("--pending", type=Path, required=True, help="the file the JVM writes (-XX:ArchiveClassesAtExit)")
    p.add_argument("--archive", type=Path, required=True, help="where to publish it")
    p.add_argument("--min-jobs", type=int, default=MIN_PIPELINE_JOBS,
                   help="publish only if the driver ran this many jobs (default %(default)s)")
    opts = p.parse_args(args[:split])
    command = args[split + 1:]
    if not command:
        p.error("no command after --")
    return run_and_publish(command, JvmStartup("", pending=opts.pending, archive=opts.archive), opts.min_jobs)


def with_java_options(conf: Mapping[str, str], options: str) -> str:
    """The driver's Java options of `conf` with `options` after them (theirs first: a later -XX wins)."""
    return f"{conf.get('spark.driver.extraJavaOptions', '')} {options}".strip()


def without_options(java: str, prefixes: Sequence[str]) -> str:
    """Java options `java` without those starting with one of `prefixes` (e.g. one run's archive file)."""
    return " ".join(o for o in java.split() if not o.startswith(tuple(prefixes)))


def _chooses_sharing(java: str) -> bool:
    return "SharedArchiveFile" in java or "ArchiveClassesAtExit" in java or "-Xshare" in java


def _non_empty_conf_dir(environ: Mapping[str, str], names: Sequence[str] = _CONF_DIR_VARIABLES) -> str | None:
    """The first configuration directory (of the variables `names`; default: those on the driver's class path) that
    holds anything, if any."""
    for name in names:
        value = environ.get(name)
        if value:
            try:
                if any(Path(value).iterdir()):
                    return value
            except OSError:   # missing or unreadable: the launcher adds nothing the JDK would refuse
                continue
    return None


def machine_memory(cgroup_root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """Bytes of memory this process may use: the physical memory, or its cgroup's limit when lower
    (a container sees the host's memory in /proc but is killed at its own limit). None: unknown."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None
    for limit_file in (cgroup_root / "memory.max", cgroup_root / "memory" / "memory.limit_in_bytes"):
        try:
            text = limit_file.read_text().strip()
        except OSError:
            continue
        if text.isdigit():   # "max" (v2) or an absent file: no limit of its own
            total = min(total, int(text))
        break
    return total if total > 0 else None


def local_heap_conf(conf: Mapping[str, str], environ: Mapping[str, str] | None = None, *,
                    deployment: Mapping[str, str] | None = None, memory: int | None = None) -> dict[str, str]:
    """The heap (`local_driver_memory` of `memory`, else of this machine) and memory pages of a driver on a
    local master, or {} where its run (`conf`), its deployment (`deployment`: what a properties file or
    spark-defaults.conf sets) or SPARK_DRIVER_MEMORY, which spark-submit reads after both, chose a heap."""
    environ = os.environ if environ is None else environ
    deployment = deployment or {}
    if DRIVER_MEMORY in conf or DRIVER_MEMORY in deployment or environ.get("SPARK_DRIVER_MEMORY"):
        return {}
    heap = local_driver_memory(machine_memory() if memory is None else memory)
    if heap is None:
        return {}
    out = {DRIVER_MEMORY: heap}
    if PAGE_SIZE not in conf and PAGE_SIZE not in deployment:
        out[PAGE_SIZE] = LOCAL_PAGE_SIZE
    return out


def self_started_heap_conf(conf: Mapping[str, str], environ: Mapping[str, str] | None = None, *,
                           memory: int | None = None) -> dict[str, str]:
    """`local_heap_conf` for a driver JVM a Python process starts itself (`python spark_jobs/<job>.py --master
    local[N]`), whose launcher also reads PYSPARK_SUBMIT_ARGS and a configuration directory's
    spark-defaults.conf: {} when either may choose the heap (the deployment's choice stays)."""
    environ = os.environ if environ is None else environ
    submit_args = environ.get("PYSPARK_SUBMIT_ARGS", "")
    if "driver-memory" in submit_args or DRIVER_MEMORY in submit_args or _non_empty_conf_dir(environ):
        return {}
    return local_heap_conf(conf, environ, memory=memory)


LOOPBACK = "127.0.0.1"
DRIVER_ADDRESS_KEYS = ("spark.driver.bindAddress", "spark.driver.host")
KILL_ENABLED = "spark.ui.killEnabled"
# Spark's UI binds to $SPARK_LOCAL_IP, else to every interface: it has no setting of its own for its host. The
# variable is also the driver's address where spark.driver.host is not set, and so is SPARK_LOCAL_HOSTNAME.
UI_ADDRESS_VARIABLE = "SPARK_LOCAL_IP"
_ADDRESS_VARIABLES = (UI_ADDRESS_VARIABLE, "SPARK_LOCAL_HOSTNAME")


@dataclass(frozen=True)
class LocalNetwork:
    """What a driver on a local master adds to stay on loopback: Spark settings, and variables for the environment
    its JVM starts with."""

    conf: dict[str, str]
    env: dict[str, str]


def local_network(conf: Mapping[str, str], environ: Mapping[str, str] | None = None, *,
                  deployment: Mapping[str, str] | None = None) -> LocalNetwork:
    """The driver's RPC server and block manager (spark.driver.bindAddress and host) and its UI (SPARK_LOCAL_IP) on
    127.0.0.1, the UI's kill links off: each unless its run (`conf`), its deployment (`deployment`: a properties
    file or spark-defaults.conf) or its environment (`environ`: SPARK_LOCAL_IP, SPARK_LOCAL_HOSTNAME, which Spark
    reads for the driver's address too) chose it. The two address settings go together: a host chosen with
    another address to bind would not be reached."""
    environ = os.environ if environ is None else environ
    chosen = {**(deployment or {}), **conf}
    out: dict[str, str] = {}
    if not any(k in chosen for k in DRIVER_ADDRESS_KEYS) and not any(environ.get(v) for v in _ADDRESS_VARIABLES):
        out.update(dict.fromkeys(DRIVER_ADDRESS_KEYS, LOOPBACK))
    if KILL_ENABLED not in chosen:
        out[KILL_ENABLED] = "false"
    env = {} if environ.get(UI_ADDRESS_VARIABLE) else {UI_ADDRESS_VARIABLE: LOOPBACK}
    return LocalNetwork(out, env)


def self_started_network(conf: Mapping[str, str], environ: Mapping[str, str] | None = None) -> LocalNetwork:
    """`local_network` for a driver JVM a Python process starts itself (`python spark_jobs/<job>.py --master
    local[N]`), whose launcher also reads PYSPARK_SUBMIT_ARGS and Spark's configuration directory: a setting either
    may make is left to them (spark-defaults.conf may set the keys, spark-env.sh the variables). Only Spark's own
    directory counts, not Hadoop's or YARN's, which set nothing of Spark's: a machine with Hadoop's client
    configuration would otherwise run every job on its external address."""
    environ = os.environ if environ is None else environ
    if _non_empty_conf_dir(environ, ("SPARK_CONF_DIR",)):
        return LocalNetwork({}, {})
    submit_args = environ.get("PYSPARK_SUBMIT_ARGS", "")
    named = {k: "" for k in (*DRIVER_ADDRESS_KEYS, KILL_ENABLED) if k in submit_args}
    return local_network(conf, environ, deployment=named)


def local_driver_memory(memory: int | None) -> str | None:
    """`spark.driver.memory` for a driver on a local master on a machine of `memory` bytes: a quarter of it,
    between 1 and 8 GiB, in MiB; None (Spark's default of 1 GiB) when the memory is unknown."""
    if memory is None:
        return None
    mib = max(_HEAP_MIN_MIB, min(_HEAP_MAX_MIB, memory // _HEAP_SHARE // _MIB))
    return f"{mib}m"


if __name__ == "__main__":
    raise SystemExit(main())

"""The JVM start-up settings of local-master jobs: C1 only and a class-data-sharing archive, checked
against a real JVM (the archive one run writes is one the next run maps)."""
from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from statekeeper.launch import jvm_startup


def _startup():
    return jvm_startup


def _env(tmp_path):
    return {**os.environ, "STATEKEEPER_CACHE": str(tmp_path / "cache")}


def test_first_run_writes_the_archive_and_later_runs_map_it(tmp_path):
    js = _startup()
    env = _env(tmp_path)
    first = js.local_startup({}, env)
    assert first.options.split()[0] == "-XX:TieredStopAtLevel=1"
    assert f"-XX:ArchiveClassesAtExit={first.pending}" in first.options
    assert first.pending.parent == tmp_path / "cache" / "jvm" and not first.archive.exists()
    assert first.publish() is False  # the JVM wrote nothing (killed before exit): nothing published
    first.pending.write_bytes(b"archive")
    assert first.publish() is True and first.archive.read_bytes() == b"archive" and not first.pending.exists()
    second = js.local_startup({}, env)
    assert second.pending is None and f"-XX:SharedArchiveFile={first.archive}" in second.options
    # Other jars on the driver's class path: another archive.
    other = js.local_startup({"spark.jars": "/opt/extra.jar"}, env)
    assert other.archive != first.archive and other.pending is not None
    other.discard()
    assert not other.pending.exists()


def test_a_shared_driver_writes_the_pipeline_archive_once_and_every_driver_prefers_it(tmp_path):
    """The pipeline archive (every job's classes, written by a DAG run's shared driver at its exit) wins over the
    archive of the first local job; the shared driver writes it only while there is none, and never when the
    task's options choose their own sharing or a configuration directory on the class path is not empty."""
    js = _startup()
    env = _env(tmp_path)
    job = js.local_startup({}, env)
    job.pending.write_bytes(b"index classes")
    assert job.publish()
    driver = js.shared_driver_startup(js.local_startup({}, env), env)
    assert driver.archive == js.pipeline_archive(job.archive)
    assert driver.options == f"-XX:ArchiveClassesAtExit={driver.pending}"
    counted = js.jobs_file(driver.pending)
    assert counted.name.endswith(".jobs.tmp") and counted.parent == driver.pending.parent   # pruned as a private file
    assert driver.pending.exists()   # claimed: a second run's driver, started meanwhile, writes none
    assert js.shared_driver_startup(js.local_startup({}, env), env) is None
    stale = time.time() - js.PIPELINE_WRITE_HOURS * 3600 - 60
    os.utime(driver.pending, (stale, stale))   # a driver that died with its claim: the next one writes it
    again = js.shared_driver_startup(js.local_startup({}, env), env)
    assert again is not None and again.pending != driver.pending
    again.discard()
    driver.pending.write_bytes(b"every job's classes")
    assert driver.publish()
    for startup in (js.local_startup({}, env), js.local_startup({}, env)):
        assert startup.pending is None and f"-XX:SharedArchiveFile={driver.archive}" in startup.options
    assert js.mapped_archive_option({}, env) == f"-XX:SharedArchiveFile={driver.archive}"
    assert js.shared_driver_startup(js.local_startup({}, env), env) is None   # one exists: the driver maps it
    mine = js.local_startup({"spark.driver.extraJavaOptions": "-Xshare:off"}, env)
    assert js.shared_driver_startup(mine, env) is None
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("spark.sql.shuffle.partitions 4\n")
    fresh = {**os.environ, "STATEKEEPER_CACHE": str(tmp_path / "other-cache")}
    assert js.shared_driver_startup(js.local_startup({}, fresh), {**fresh, "SPARK_CONF_DIR": str(conf_dir)}) is None
    assert js.shared_driver_startup(None, env) is None


def test_no_archive_is_written_with_a_non_empty_conf_dir_on_the_class_path(tmp_path):
    """spark-submit puts SPARK_CONF_DIR (HADOOP_/YARN_CONF_DIR) on the driver's class path; the JDK refuses
    to dump an archive over a non-empty class-path directory and the job's JVM then exits 1 (seen on a
    cold cache with a spark-defaults.conf there). Then the run writes no archive; an empty one is fine."""
    js = _startup()
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    env = {**_env(tmp_path), "SPARK_CONF_DIR": str(conf_dir)}
    empty = js.local_startup({}, env)
    assert empty.pending is not None
    empty.discard()
    (conf_dir / "spark-defaults.conf").write_text("spark.sql.shuffle.partitions 4\n")
    for name in ("SPARK_CONF_DIR", "HADOOP_CONF_DIR", "YARN_CONF_DIR"):
        run = js.local_startup({}, {**_env(tmp_path), name: str(conf_dir)})
        assert run.pending is None and "ArchiveClassesAtExit" not in run.options, (name, run)
        assert run.options == "-XX:TieredStopAtLevel=1"


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK on PATH")
def test_a_real_jvm_refuses_to_dump_over_a_non_empty_class_path_directory(tmp_path):
    """Why the rule above exists: a JVM with such a directory ahead of its jars on the class path (where
    spark-submit's launcher puts SPARK_CONF_DIR) does its work, then fails to write the archive and exits 1."""
    js = _startup()
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("x\n")
    (tmp_path / "Hello.java").write_text('public class Hello { public static void main(String[] a) '
                                         '{ System.out.println("done"); } }\n')
    subprocess.run(["javac", "-d", str(tmp_path / "classes"), str(tmp_path / "Hello.java")], check=True)
    subprocess.run(["jar", "cf", str(tmp_path / "hello.jar"), "-C", str(tmp_path / "classes"), "."], check=True)
    first = js.local_startup({}, _env(tmp_path))
    out = subprocess.run(["java", *first.options.split(), "-cp", f"{conf_dir}:{tmp_path / 'hello.jar'}", "Hello"],
                         capture_output=True, text=True, env=_env(tmp_path))
    assert "done" in out.stdout and out.returncode == 1 and "non-empty directory" in out.stdout + out.stderr, out
    first.discard()


def test_the_tasks_own_java_options_win(tmp_path):
    js = _startup()
    env = _env(tmp_path)
    mine = js.local_startup({"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=4 -Xshare:off"}, env)
    assert mine.options == "" and mine.pending is None
    assert not (tmp_path / "cache" / "jvm").exists()


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a JDK on PATH")
def test_a_real_jvm_writes_an_archive_that_the_next_jvm_maps(tmp_path):
    js = _startup()
    env = _env(tmp_path)
    first = js.local_startup({}, env)
    subprocess.run(["java", *first.options.split(), "-version"], check=True, capture_output=True, env=env)
    assert first.publish()
    second = js.local_startup({}, env)
    # -Xshare:on makes the JVM fail rather than fall back when it cannot map the archive.
    out = subprocess.run(["java", *second.options.split(), "-Xshare:on", "-Xlog:cds=info", "-version"],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert str(first.archive) in out.stdout + out.stderr


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK on PATH")
def test_the_same_jars_installed_elsewhere_get_their_own_archive(tmp_path):
    """A JVM maps an archive only over the very class path it was dumped with (paths, sizes, times).
    The key used to be the jar names alone: every checkout after the first (another venv, same jar
    names) got the first one's archive, and every local job's JVM refused it and started without it."""
    js = _startup()
    (tmp_path / "Hello.java").write_text('public class Hello { public static void main(String[] a) '
                                         '{ System.out.println("done"); } }\n')
    subprocess.run(["javac", "-d", str(tmp_path / "classes"), str(tmp_path / "Hello.java")], check=True)
    first, second = tmp_path / "venv-a" / "jars", tmp_path / "venv-b" / "jars"
    for jars in (first, second):
        jars.mkdir(parents=True)
        subprocess.run(["jar", "cf", str(jars / "hello.jar"), "-C", str(tmp_path / "classes"), "."], check=True)
    assert js.jars_identity(first) != js.jars_identity(second)
    # What the key stands for: the archive dumped over one installation is refused over the other.
    archive = tmp_path / "a.jsa"
    subprocess.run(["java", f"-XX:ArchiveClassesAtExit={archive}", "-cp", str(first / "hello.jar"), "Hello"],
                   check=True, capture_output=True)
    mapped = subprocess.run(["java", f"-XX:SharedArchiveFile={archive}", "-Xshare:on", "-cp",
                             str(first / "hello.jar"), "Hello"], capture_output=True, text=True)
    assert mapped.returncode == 0 and "done" in mapped.stdout, mapped.stdout + mapped.stderr
    refused = subprocess.run(["java", f"-XX:SharedArchiveFile={archive}", "-Xshare:on", "-cp",
                              str(second / "hello.jar"), "Hello"], capture_output=True, text=True)
    assert refused.returncode != 0, refused.stdout + refused.stderr
    # A reinstall in place (same path, another file time) is another class path too.
    before = js.jars_identity(first)
    os.utime(first / "hello.jar", ns=(0, 1_000_000_000))
    assert js.jars_identity(first) != before


def test_a_job_that_starts_its_own_jvm_maps_an_archive_but_never_writes_one(tmp_path):
    """`python spark_jobs/<job>.py --master local[N]`: its JVM ends with its Python process (which could
    not publish an archive any more, and a killed run would leave a partial one), so it only maps one
    the DAG's local tasks wrote; and it leaves a deployment with a spark-defaults.conf alone."""
    js = _startup()
    env = _env(tmp_path)
    assert js.mapped_archive_option({}, env) == ""
    assert not (tmp_path / "cache" / "jvm").exists()      # nothing pending, nothing created
    written = js.local_startup({}, env)
    written.pending.write_bytes(b"archive")
    assert written.publish()
    assert js.mapped_archive_option({}, env) == f"-XX:SharedArchiveFile={written.archive}"
    assert js.mapped_archive_option({"spark.driver.extraJavaOptions": "-Xshare:off"}, env) == ""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("spark.driver.extraJavaOptions -Dx=1\n")
    assert js.mapped_archive_option({}, {**env, "SPARK_CONF_DIR": str(conf_dir)}) == ""


def test_archives_unused_for_two_weeks_are_removed_when_another_is_published(tmp_path):
    """Every new class path (another checkout's venv, a reinstall) writes an archive of about 150 MB; without
    pruning the cache grew by one per fresh clone. A mapped archive counts as used (its mtime is set)."""
    js = _startup()
    env = _env(tmp_path)
    jvm = tmp_path / "cache" / "jvm"
    jvm.mkdir(parents=True)
    old = time.time() - (js.UNUSED_DAYS + 1) * 86400
    stale, in_use, recent = (jvm / f"spark-driver-{n}.jsa" for n in ("0" * 16, "1" * 16, "2" * 16))
    dead_write, other = jvm / ".spark-driver-3.jsa.abc.tmp", jvm / "notes.txt"
    for path in (stale, in_use, recent, dead_write, other):
        path.write_bytes(b"x")
    for path in (stale, in_use, dead_write, other):
        os.utime(path, (old, old))
    # a driver maps `in_use` (as local_startup and mapped_archive_option do when its class path matches)
    js._mark_used(in_use)
    first = js.local_startup({}, env)
    first.pending.write_bytes(b"archive")
    assert first.publish() is True
    assert sorted(p.name for p in jvm.iterdir()) == sorted([first.archive.name, in_use.name, recent.name, other.name])
    # mapping the published archive marks it used too
    os.utime(first.archive, (old, old))
    assert f"-XX:SharedArchiveFile={first.archive}" in js.local_startup({}, env).options
    assert time.time() - first.archive.stat().st_mtime < 3600
    assert js.prune(jvm) == []


def test_only_the_most_recently_used_archives_are_kept(tmp_path):
    """Two weeks of age did not bound the cache where every CI run is a fresh clone (a new venv path, a new
    archive each): it held 28 archives (3 GB) after two days. The newest published one always stays."""
    js = _startup()
    env = _env(tmp_path)
    jvm = tmp_path / "cache" / "jvm"
    jvm.mkdir(parents=True)
    now = time.time()
    older = []
    for n in range(js.MAX_ARCHIVES + 2):
        path = jvm / f"spark-driver-{n:016d}.jsa"
        path.write_bytes(b"x")
        os.utime(path, (now - 3600 * (n + 1), now - 3600 * (n + 1)))   # n = 0 used last
        older.append(path)
    published = js.local_startup({}, env)
    published.pending.write_bytes(b"archive")
    assert published.publish() is True
    kept = sorted(p.name for p in jvm.iterdir())
    assert kept == sorted([published.archive.name, *(p.name for p in older[:js.MAX_ARCHIVES - 1])])
    assert js.prune(jvm) == []   # the published archive counts among the MAX_ARCHIVES kept


@pytest.mark.unit
def test_a_local_driver_gets_a_quarter_of_the_memory_it_may_use_between_one_and_eight_gib(tmp_path):
    js = _startup()
    gib = 1 << 30
    assert js.local_driver_memory(23 * gib) == f"{23 * 1024 // 4}m"
    assert js.local_driver_memory(2 * gib) == "1024m"      # never below Spark's own default
    assert js.local_driver_memory(64 * gib) == "8192m"
    assert js.local_driver_memory(None) is None             # unknown: Spark's default stays
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    # A container is killed at its cgroup's limit, whatever /proc says of the host.
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "memory.max").write_text(f"{2 * gib}\n")
    assert js.machine_memory(v2) == min(2 * gib, physical)
    (v2 / "memory.max").write_text("max\n")
    assert js.machine_memory(v2) == physical
    v1 = tmp_path / "v1"
    (v1 / "memory").mkdir(parents=True)
    (v1 / "memory" / "memory.limit_in_bytes").write_text(f"{3 * gib}\n")
    assert js.machine_memory(v1) == min(3 * gib, physical)
    assert js.machine_memory(tmp_path / "none") == physical


@pytest.mark.unit
def test_a_driver_a_python_process_starts_gets_the_local_heap_unless_something_chose_one(tmp_path):
    js = _startup()
    gib = 1 << 30
    env = {"PATH": os.environ.get("PATH", "")}
    sized = {js.DRIVER_MEMORY: "4096m", js.PAGE_SIZE: js.LOCAL_PAGE_SIZE}
    assert js.self_started_heap_conf({}, env, memory=16 * gib) == sized
    assert js.self_started_heap_conf({js.PAGE_SIZE: "64m"}, env, memory=16 * gib) == {js.DRIVER_MEMORY: "4096m"}
    # Whatever else may choose the heap keeps it: the session's conf, the launcher's arguments, the variable
    # spark-submit reads, a configuration directory's spark-defaults.conf.
    assert js.self_started_heap_conf({js.DRIVER_MEMORY: "2g"}, env, memory=16 * gib) == {}
    for submit_args in ("--driver-memory 3g pyspark-shell", "--conf spark.driver.memory=3g pyspark-shell"):
        assert js.self_started_heap_conf({}, {**env, "PYSPARK_SUBMIT_ARGS": submit_args}, memory=16 * gib) == {}
    assert js.self_started_heap_conf({}, {**env, "PYSPARK_SUBMIT_ARGS": "--conf spark.ui.enabled=false "
                                          "pyspark-shell"}, memory=16 * gib) == sized
    assert js.self_started_heap_conf({}, {**env, "SPARK_DRIVER_MEMORY": "3g"}, memory=16 * gib) == {}
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    assert js.self_started_heap_conf({}, {**env, "SPARK_CONF_DIR": str(conf_dir)}, memory=16 * gib) == sized
    (conf_dir / "spark-defaults.conf").write_text("spark.driver.memory 3g\n")
    assert js.self_started_heap_conf({}, {**env, "SPARK_CONF_DIR": str(conf_dir)}, memory=16 * gib) == {}
    # The DAG's tasks: the deployment's properties file decides as the task's own conf does.
    assert js.local_heap_conf({}, env, deployment={js.DRIVER_MEMORY: "3g"}, memory=16 * gib) == {}
    assert js.local_heap_conf({}, env, memory=None) in ({}, {js.DRIVER_MEMORY: js.local_driver_memory(
        js.machine_memory()), js.PAGE_SIZE: js.LOCAL_PAGE_SIZE})


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a JDK on PATH")
def test_a_job_started_as_python_with_a_local_master_runs_with_the_local_heap(tmp_path):
    """`python spark_jobs/<job>.py --master local[N]` starts its driver through PySpark's launcher, not the
    operator: the heap it gets must reach that JVM's command line."""
    import sys

    js = _startup()
    env = {k: v for k, v in os.environ.items()   # the cache's archive, if any, is only mapped
           if k not in ("PYSPARK_SUBMIT_ARGS", "SPARK_DRIVER_MEMORY", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")}
    expected = js.self_started_heap_conf({}, env)
    script = ("from statekeeper.launch.entrypoint import spark_session\n"
              "with spark_session('heap-check', 'local[1]') as spark:\n"
              "    jvm = spark.sparkContext._jvm\n"
              "    print('CONF', spark.sparkContext.getConf().get('spark.driver.memory', ''))\n"
              "    print('ARGS', ' '.join(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()"
              ".getInputArguments()))\n")
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if line.startswith(("CONF ", "ARGS ")))
    if not expected:   # this machine's memory is unknown: Spark's default stays
        assert lines["CONF"] == ""
        return
    assert lines["CONF"] == expected[js.DRIVER_MEMORY]
    assert f"-Xmx{expected[js.DRIVER_MEMORY]}" in lines["ARGS"].split()


@pytest.mark.unit
def test_a_local_driver_stays_on_loopback_with_kill_links_off_unless_its_run_or_deployment_chose(tmp_path):
    js = _startup()
    env = {"PATH": os.environ.get("PATH", "")}
    loopback = {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1",
                "spark.ui.killEnabled": "false"}
    ui = {"SPARK_LOCAL_IP": "127.0.0.1"}
    assert js.local_network({}, env) == js.LocalNetwork(loopback, ui)
    # The address keys go together: a host chosen by the run or the deployment keeps Spark's binding of it.
    kill_only = js.LocalNetwork({"spark.ui.killEnabled": "false"}, ui)
    assert js.local_network({"spark.driver.host": "10.1.2.3"}, env) == kill_only
    assert js.local_network({}, env, deployment={"spark.driver.bindAddress": "0.0.0.0"}) == kill_only
    # SPARK_LOCAL_IP (and SPARK_LOCAL_HOSTNAME) is also the driver's address: the environment chose it.
    assert js.local_network({}, {**env, "SPARK_LOCAL_IP": "10.1.2.3"}) == js.LocalNetwork(
        {"spark.ui.killEnabled": "false"}, {})
    assert js.local_network({}, {**env, "SPARK_LOCAL_HOSTNAME": "box"}) == kill_only
    addresses = {k: v for k, v in loopback.items() if k != "spark.ui.killEnabled"}
    assert js.local_network({}, env, deployment={"spark.ui.killEnabled": "true"}) == js.LocalNetwork(addresses, ui)
    # A job started by hand: its launcher's arguments and Spark's configuration directory may choose as well.
    assert js.self_started_network({}, env) == js.LocalNetwork(loopback, ui)
    assert js.self_started_network({}, {**env, "PYSPARK_SUBMIT_ARGS": "--conf spark.driver.host=h pyspark-shell"}
                                   ) == kill_only
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    assert js.self_started_network({}, {**env, "SPARK_CONF_DIR": str(conf_dir)}) == js.LocalNetwork(loopback, ui)
    (conf_dir / "spark-env.sh").write_text("SPARK_LOCAL_IP=10.1.2.3\n")
    assert js.self_started_network({}, {**env, "SPARK_CONF_DIR": str(conf_dir)}) == js.LocalNetwork({}, {})
    # Hadoop's and YARN's configuration set nothing of Spark's.
    assert js.self_started_network({}, {**env, "HADOOP_CONF_DIR": str(conf_dir)}) == js.LocalNetwork(loopback, ui)


LISTENING_PROBE = """
import json, os, sys, time
from pathlib import Path
from statekeeper.launch.entrypoint import spark_session

out = Path(sys.argv[1])
with spark_session('bind-check', 'local[1]') as spark:
    sc = spark.sparkContext
    # Python workers too: their daemon is the JVM's child and listens while it lives.
    assert sc.parallelize(range(4), 2).map(lambda x: x + 1).sum() == 10
    info = {"jvm": sc._jvm.java.lang.ProcessHandle.current().pid(), "ui": sc.uiWebUrl,
            "kill": sc.getConf().get("spark.ui.killEnabled", "true")}
    out.with_suffix(".tmp").write_text(json.dumps(info))
    out.with_suffix(".tmp").rename(out)
    deadline = time.monotonic() + 180
    while not out.with_suffix(".stop").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
"""


@pytest.mark.spark
@pytest.mark.skipif(shutil.which("java") is None, reason="needs a JDK on PATH")
def test_a_job_started_as_python_with_a_local_master_listens_on_loopback_only(tmp_path):
    """`python spark_jobs/<job>.py --master local[N]` starts its driver through PySpark's launcher, not the
    operator: its JVM (RPC server, block manager, UI, Py4J) and the Python workers it forks listen on loopback only,
    and the UI's kill links are off."""
    import json
    import sys

    import psutil

    # Nothing of the deployment's: SPARK_LOCAL_IP, a launcher's arguments or a configuration directory would choose.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET", "SPARK_LOCAL_IP",
                        "SPARK_LOCAL_HOSTNAME", "SPARK_CONF_DIR")}
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen([sys.executable, "-c", LISTENING_PROBE, str(ready)], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 300
        while not ready.exists():
            assert proc.poll() is None, proc.stdout.read()[-3000:]
            assert time.monotonic() < deadline, "the session never started"
            time.sleep(0.5)
        info = json.loads(ready.read_text())
        jvm = psutil.Process(info["jvm"])
        # A JVM's IPv4 sockets show as IPv4-mapped IPv6 addresses (::ffff:127.0.0.1).
        listening = sorted({(c.laddr.ip.removeprefix("::ffff:"), c.laddr.port)
                            for p in [jvm, *jvm.children(recursive=True)]
                            for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN})
    finally:
        ready.with_suffix(".stop").touch()
        out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, out[-3000:]
    ui_port = int(info["ui"].rsplit(":", 1)[1])
    assert ("127.0.0.1", ui_port) in listening, (info, listening)
    assert len(listening) >= 3, listening     # at least the UI, the driver's RPC server and its block manager
    exposed = [(ip, port) for ip, port in listening if ip not in ("127.0.0.1", "::1")]
    assert not exposed, f"listening beyond loopback: {exposed} (all: {listening})"
    assert info["kill"] == "false"

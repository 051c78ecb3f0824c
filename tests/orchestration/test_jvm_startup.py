"""The JVM start-up settings of local-master jobs: C1 only and a class-data-sharing archive, checked
against a real JVM (the archive one run writes is one the next run maps)."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.orchestration.support import plugin_module


def _startup():
    return plugin_module("jvm_startup")


def _env(tmp_path):
    import os

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

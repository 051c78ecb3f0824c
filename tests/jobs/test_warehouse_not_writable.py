"""A warehouse the job cannot write is a configuration error before any work: exit 2 (which the DAG does not
retry), one line naming the directory and what to do, no traceback, nothing written. The job runs as a user starts
it (`python spark_jobs/index_checkpoints.py`), against a real read-only file system, a real full one (tmpfs mounts:
the tests run as root, to whom a directory's mode denies nothing) and a path through a regular file."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from statekeeper.registry import INDEX, ExitCode

REPO = Path(__file__).resolve().parents[2]


def _index(warehouse: Path, root: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "include"), str(REPO)]))
    return subprocess.run([sys.executable, str(REPO / "spark_jobs" / "index_checkpoints.py"), "--warehouse",
                           str(warehouse), "--root", str(root), "--allow-empty-root", "--master", "local[1]"],
                          env=env, capture_output=True, text=True, timeout=600)


def _refused(warehouse: Path, root: Path, *what: str) -> None:
    out = _index(warehouse, root)
    assert out.returncode == ExitCode.USAGE, out.stderr[-3000:]
    assert ExitCode.USAGE in INDEX.final_exit_codes   # the DAG fails the task for good: a retry cannot help
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and out.stdout == "", out.stdout + out.stderr
    assert "configuration error: warehouse " in lines[0] and "Traceback" not in out.stderr
    for text in what:
        assert text in lines[0], lines[0]


@contextmanager
def _tmpfs(path: Path, options: str) -> Iterator[Path]:
    path.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def test_a_warehouse_below_a_regular_file(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "notes").write_text("a file where a directory was meant\n")
    _refused(tmp_path / "notes" / "warehouse", tmp_path / "root", f"{tmp_path / 'notes'} is a file")
    assert (tmp_path / "notes").read_text() == "a file where a directory was meant\n"


def test_a_warehouse_on_a_read_only_file_system(tmp_path):
    (tmp_path / "root").mkdir()
    with _tmpfs(tmp_path / "ro", "ro,size=1m") as mount:
        _refused(mount / "warehouse", tmp_path / "root", str(mount), "read-only file system")
        assert list(mount.iterdir()) == []


def test_a_warehouse_on_a_full_disk(tmp_path):
    (tmp_path / "root").mkdir()
    with _tmpfs(tmp_path / "full", "size=1m") as mount:
        warehouse = mount / "warehouse"
        warehouse.mkdir()
        with open(mount / "filler", "wb") as f:
            try:
                while True:
                    f.write(b"x" * 65536)
                    f.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
        _refused(warehouse, tmp_path / "root", str(warehouse), "disk is full")
        assert list(warehouse.iterdir()) == []

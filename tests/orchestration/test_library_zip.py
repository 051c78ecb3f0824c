"""The --py-files zip every submission ships: each module's source and, beside it, bytecode compiled from that
source, so neither the driver nor a Python worker compiles the library in a job; an interpreter that cannot use
the bytecode imports the source."""
from __future__ import annotations

import importlib.util
import marshal
import subprocess
import sys
import zipfile
from pathlib import Path

import statekeeper
from statekeeper.index.parse import PARSER_VERSION
from tests.orchestration.support import plugin_module

PACKAGE = Path(statekeeper.__file__).parent


def _zip(tmp_path: Path) -> Path:
    return Path(plugin_module("submission").library_zip(str(tmp_path)))


def _python(archive: Path, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(archive), "PATH": "/usr/bin:/bin"},
                          cwd=archive.parent, capture_output=True, text=True)


def test_every_module_ships_with_bytecode_of_its_own_source(tmp_path):
    archive = _zip(tmp_path)
    with zipfile.ZipFile(archive) as zf:
        names = set(zf.namelist())
        sources = {p.relative_to(PACKAGE.parent).as_posix() for p in PACKAGE.rglob("*.py")
                   if "__pycache__" not in p.parts}
        assert sources and sources <= names
        for name in sorted(sources):
            source, pyc = zf.read(name), zf.read(name + "c")
            assert pyc[:4] == importlib.util.MAGIC_NUMBER, name
            assert int.from_bytes(pyc[4:8], "little") == 0b01, name     # hash-based, unchecked
            assert pyc[8:16] == importlib.util.source_hash(source), name
            code = marshal.loads(pyc[16:])
            assert code.co_filename == f"{archive}/{name}", name
        assert not any("__pycache__" in n for n in names)


def test_modules_import_from_the_bytecode_with_the_same_parser_version_and_source_lines(tmp_path):
    archive = _zip(tmp_path)
    out = _python(archive, "import traceback, statekeeper.index.parse as p, statekeeper.units as u\n"
                           "print(p.__spec__.origin); print(p.PARSER_VERSION)\n"
                           "try:\n    u.human_size('x')\nexcept TypeError:\n    traceback.print_exc()")
    assert out.returncode == 0, out.stderr
    origin, version = out.stdout.split()
    assert origin == f"{archive}/statekeeper/index/parse.pyc"
    # the parser version digests the sources, which the zip still carries
    assert version == PARSER_VERSION
    # a traceback through zipped bytecode still quotes the source line (the loader reads the source)
    assert "statekeeper/units.py" in out.stderr and "abs(n)" in out.stderr, out.stderr


def test_bytecode_another_interpreter_cannot_read_falls_back_to_the_source(tmp_path):
    archive = _zip(tmp_path)
    rewritten = tmp_path / "other" / "statekeeper.zip"
    rewritten.parent.mkdir()
    with zipfile.ZipFile(archive) as src, zipfile.ZipFile(rewritten, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith(".pyc"):
                data = b"\x00\x00\r\n" + data[4:]      # another version's magic number
            dst.writestr(info, data)
    out = _python(rewritten, "import statekeeper.index.parse as p; print(p.__spec__.origin); print(p.PARSER_VERSION)")
    assert out.returncode == 0, out.stderr
    origin, version = out.stdout.split()
    assert origin == f"{rewritten}/statekeeper/index/parse.py"
    assert version == PARSER_VERSION

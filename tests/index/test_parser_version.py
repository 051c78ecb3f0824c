"""The parser version stamped into `snapshots.parser_version` is the same whether the package is
imported from the checkout or from the zip a cluster run ships with `--py-files`: a digest of
no sources would make a local and a cluster run re-parse each other's rows on every run."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import statekeeper
from statekeeper.index.parse import PARSER_VERSION

PACKAGE = Path(statekeeper.__file__).parent


def test_a_zipped_package_stamps_the_same_parser_version(tmp_path: Path) -> None:
    archive = tmp_path / "statekeeper.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in PACKAGE.rglob("*.py"):
            zf.write(path, path.relative_to(PACKAGE.parent).as_posix())
    out = subprocess.run(
        [sys.executable, "-c", "import statekeeper, statekeeper.index.parse as p;"
         "print(statekeeper.__file__); print(p.PARSER_VERSION)"],
        env={"PYTHONPATH": str(archive), "PATH": "/usr/bin:/bin"}, cwd=tmp_path,
        capture_output=True, text=True, check=True).stdout.split()
    assert out[0].startswith(str(archive)), out
    assert out[1] == PARSER_VERSION
    assert not PARSER_VERSION.endswith("da39a3ee5e6b")  # sha1 of nothing

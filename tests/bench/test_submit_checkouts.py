"""A before/after benchmark runs each checkout's own code (bench._submit): the operator of a second
checkout is imported beside the first one's, not taken from the module cache, so its library zip and its
Spark settings are its own. From the cache, both sides of a comparison ran the first checkout's library."""
from __future__ import annotations

import shutil
import sys
import zipfile

from bench._submit import REPO, _operators, library_zip

MARKER = "statekeeper/only_in_the_other_checkout.py"


def test_a_second_checkout_gets_its_own_library_zip_and_settings(tmp_path):
    other = tmp_path / "other"
    for part in ("include", "plugins"):
        shutil.copytree(REPO / part, other / part, ignore=shutil.ignore_patterns("__pycache__"))
    (other / "include" / MARKER).write_text("")
    submission = other / "plugins" / "statekeeper_airflow" / "submission.py"
    source = submission.read_text()
    assert '"spark.ui.killEnabled": "false",' in source
    submission.write_text(source.replace('"spark.ui.killEnabled": "false",',
                                        '"spark.ui.killEnabled": "false", "statekeeper.bench.marker": "other",'))
    library_before = sys.modules.get("statekeeper")

    zips = {}
    for name, checkout in (("repo", REPO), ("other", other)):
        (tmp_path / f"zip-{name}").mkdir()
        zips[name] = set(zipfile.ZipFile(library_zip(checkout, tmp_path / f"zip-{name}")).namelist())
    assert MARKER in zips["other"] and MARKER not in zips["repo"]
    assert "statekeeper/__init__.py" in zips["repo"]
    assert _operators(other).job_conf().get("statekeeper.bench.marker") == "other"
    assert "statekeeper.bench.marker" not in _operators(REPO).job_conf()
    assert _operators(REPO) is _operators(REPO)
    # The process's own library is the one it had: the other checkout's modules were imported aside.
    assert sys.modules.get("statekeeper") is library_before

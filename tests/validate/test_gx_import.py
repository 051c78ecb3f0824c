"""GX is imported without the optional backends the suite never uses, and only its importing thread is refused them."""
from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from statekeeper.validate.gx_import import LAZY_MODULES, UNUSED_BACKENDS, _HiddenFrom

_PROBE = """
import json, sys
from statekeeper.validate.gx_import import LAZY_MODULES, UNUSED_BACKENDS, import_gx
gx = import_gx()
context = gx.get_context(mode="ephemeral")
loaded = [name for name in UNUSED_BACKENDS if name in sys.modules]
deferred = {name: type(sys.modules[name]).__name__ for name in LAZY_MODULES}
import sqlalchemy   # after the import nothing is hidden
from scipy import stats   # the first use runs the deferred module's code
import altair as alt
print(json.dumps({"loaded": loaded, "context": type(context).__name__, "finders": len(sys.meta_path),
                  "sqlalchemy": sqlalchemy.__name__, "deferred": deferred, "median": stats.norm.ppf(0.5),
                  "chart": alt.Chart.__name__,
                  "after": {name: type(sys.modules[name]).__name__ for name in LAZY_MODULES},
                  "same": sys.modules["scipy.stats"] is stats and sys.modules["scipy"].stats is stats}))
"""


def test_gx_imports_and_makes_a_context_without_the_unused_backends() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["loaded"] == []
    assert result["context"] == "EphemeralDataContext"
    assert result["sqlalchemy"] == "sqlalchemy"
    # SciPy's statistics and Altair were imported by GX but their code had not run; the first use runs it, once.
    assert result["deferred"] == {name: "_RunOnFirstUse" for name in LAZY_MODULES}
    assert result["after"] == {name: "module" for name in LAZY_MODULES}
    assert result["median"] == 0.0 and result["chart"] == "Chart" and result["same"] is True


_FLAKY = """
import os, sys, threading
sys.path.insert(0, {path!r})
from statekeeper.validate.gx_import import lazily
lazily("flaky_mod")
lazily("flaky_pkg.sub")
import flaky_mod
from flaky_pkg import sub
os.environ["FAIL"] = "1"
for module in (flaky_mod, sub):
    try:
        module.VALUE
    except RuntimeError:
        print("failed")
del os.environ["FAIL"]
assert "flaky_mod" not in sys.modules and "flaky_pkg.sub" not in sys.modules
assert not hasattr(sys.modules["flaky_pkg"], "sub")
import flaky_mod
from flaky_pkg import sub
lazily("slow_mod")
import slow_mod
seen = []
readers = [threading.Thread(target=lambda: seen.append(slow_mod.VALUE)) for _ in range(4)]
for t in readers:
    t.start()
for t in readers:
    t.join()
print(flaky_mod.VALUE, sub.VALUE, seen, slow_mod.RUNS)
"""


def test_a_deferred_module_runs_once_and_a_failed_one_is_imported_afresh(tmp_path) -> None:
    flaky = "import os\nif os.environ.get('FAIL'):\n    raise RuntimeError('boom')\nVALUE = 7\n"
    (tmp_path / "flaky_mod.py").write_text(flaky)
    (tmp_path / "flaky_pkg").mkdir()
    (tmp_path / "flaky_pkg" / "__init__.py").write_text("")
    (tmp_path / "flaky_pkg" / "sub.py").write_text(flaky)
    # Readers in other threads wait for the code to finish; it runs once.
    (tmp_path / "slow_mod.py").write_text("import time\nRUNS = globals().get('RUNS', 0) + 1\ntime.sleep(0.3)\n"
                                          "VALUE = 3\n")
    out = subprocess.run([sys.executable, "-c", _FLAKY.format(path=str(tmp_path))], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == ["failed", "failed", "7 7 [3, 3, 3, 3] 1"]


def test_only_the_importing_thread_is_refused() -> None:
    finder = _HiddenFrom(threading.current_thread(), ("sqlalchemy",))
    with pytest.raises(ModuleNotFoundError, match="sqlalchemy.orm is not imported"):
        finder.find_spec("sqlalchemy.orm")
    assert finder.find_spec("sqlalchemyx") is None          # a name that only starts alike
    assert finder.find_spec("pyarrow") is None
    seen: list[object] = []
    other = threading.Thread(target=lambda: seen.append(finder.find_spec("sqlalchemy")))
    other.start()
    other.join()
    assert seen == [None]
    assert "google.cloud" in UNUSED_BACKENDS and "google" not in UNUSED_BACKENDS

"""GX is imported without the optional backends the suite never uses, and only its importing thread is refused them."""
from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from statekeeper.validate.gx_import import UNUSED_BACKENDS, _HiddenFrom

_PROBE = """
import json, sys
from statekeeper.validate.gx_import import UNUSED_BACKENDS, import_gx
gx = import_gx()
context = gx.get_context(mode="ephemeral")
loaded = [name for name in UNUSED_BACKENDS if name in sys.modules]
import sqlalchemy   # after the import nothing is hidden
print(json.dumps({"loaded": loaded, "context": type(context).__name__, "finders": len(sys.meta_path),
                  "sqlalchemy": sqlalchemy.__name__}))
"""


def test_gx_imports_and_makes_a_context_without_the_unused_backends() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["loaded"] == []
    assert result["context"] == "EphemeralDataContext"
    assert result["sqlalchemy"] == "sqlalchemy"


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

"""How the operator hands environment to spark-submit without putting secrets on its command line.

The provider's SparkSubmitHook turns `env_vars` into `--conf spark.yarn.appMasterEnv.K=V` (YARN) or
`--conf spark.kubernetes.driverEnv.K=V` (Kubernetes) arguments, which any local user can read in
`ps`. For those masters the operator keeps the storage variables out of `env_vars` and instead
* writes them as the same properties into a Spark properties file (mode 0600, in the task's private
  temporary directory, removed when the task ends), passed with `--properties-file`, which carries
  them to a driver in cluster deploy mode, and
* puts them in the spark-submit process's own environment, for a driver in client deploy mode.

spark-submit reads conf/spark-defaults.conf only when no `--properties-file` is given (Spark 4.2:
`SparkSubmitArguments.mergeDefaultSparkProperties` loads it then, or with `--load-spark-defaults`,
which the hook cannot pass). So the file starts with what spark-submit would otherwise have loaded
(the task's own `properties_file`, else spark-defaults.conf) and the credentials follow; Java
properties let a later line win, and nothing the cluster relied on is dropped.
"""
from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

ClusterKind = Literal["yarn", "k8s"]

# Where the provider puts env_vars for each cluster manager (SparkSubmitHook._build_spark_common_args).
DRIVER_ENV_PREFIX: dict[str, str] = {
    "yarn": "spark.yarn.appMasterEnv.",
    "k8s": "spark.kubernetes.driverEnv.",
}


def connection_master(conn_type: str, host: str | None, port: int | None) -> str:
    """The master URL the provider's hook derives from a Spark connection (its _resolve_connection)."""
    if conn_type == "spark" and host and ("://" in host or not port):
        master = host
    else:
        master = f"{conn_type}://{host or ''}"
    return f"{master}:{port}" if port else master


def cluster_kind(master: str) -> ClusterKind | None:
    """The provider's own test (`"yarn" in master`, `"k8s" in master`), so we agree with it on when
    env_vars would become command-line arguments."""
    if "yarn" in master:
        return "yarn"
    if "k8s" in master:
        return "k8s"
    return None


def spark_defaults_file(environ: Mapping[str, str]) -> Path | None:
    """The spark-defaults.conf spark-submit would load: $SPARK_CONF_DIR, else $SPARK_HOME/conf
    (Spark's Utils.getDefaultPropertiesFile; bin/load-spark-env.sh derives SPARK_CONF_DIR the same
    way). A pip-installed spark-submit finds SPARK_HOME as the pyspark package directory."""
    conf_dir = environ.get("SPARK_CONF_DIR")
    if not conf_dir:
        home = environ.get("SPARK_HOME")
        if not home:
            spec = importlib.util.find_spec("pyspark")
            if spec is None or not spec.submodule_search_locations:
                return None
            home = list(spec.submodule_search_locations)[0]
        conf_dir = os.path.join(home, "conf")
    path = Path(conf_dir) / "spark-defaults.conf"
    return path if path.is_file() else None


def read_properties(path: Path) -> dict[str, str]:
    """The properties of a Spark properties file as spark-submit reads them (Java `Properties.load`,
    then values trimmed as Spark's Utils.getPropertiesFromFile does): `#`/`!` comments, a key ended by
    the first unescaped `=`, `:` or blank, backslash continuations and escapes."""
    out: dict[str, str] = {}
    logical: list[str] = []
    # The empty line after the last ends a continuation the file ends in, as the end of input does for Java.
    for raw in [*path.read_text(encoding="utf-8").splitlines(), ""]:
        line = raw.lstrip(" \t\f")
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:  # an odd number of backslashes continues the line
            logical.append(line[:-1])
            continue
        key, value = _split_property("".join([*logical, line]))
        logical = []
        out[key] = value.strip()
    return out


def _split_property(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line) and line[i] not in "=: \t\f":
        i += 2 if line[i] == "\\" else 1
    key, rest = line[:i], line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


def _unescape(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        c = m.group(1)
        if c.startswith("u"):
            return chr(int(c[1:], 16))
        return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(c, c)
    # \u escapes are UTF-16 units: a pair of surrogates is one character.
    return _ESCAPED.sub(one, text).encode("utf-16", "surrogatepass").decode("utf-16")


_ESCAPED = re.compile(r"\\(u[0-9a-fA-F]{4}|.)")


def _escape(text: str, *, key: bool) -> str:
    """Java `Properties.load` escaping, so any secret survives byte for byte."""
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch in "\n\r\t\f":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}[ch])
        elif ch in "=:#!" or (ch == " " and (key or i == 0)):
            out.append("\\" + ch)
        elif not (0x20 <= ord(ch) < 0x7F):
            out.extend(f"\\u{unit:04x}" for unit in _utf16_units(ch))
        else:
            out.append(ch)
    return "".join(out)


def _utf16_units(ch: str) -> list[int]:
    data = ch.encode("utf-16-be")
    return [int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2)]


def write_properties_file(path: Path, properties: Mapping[str, str], *, base: Path | None) -> Path:
    """Create `path` with mode 0600 (O_EXCL: never reuse a file someone else made) holding `base`'s
    lines followed by `properties`."""
    head = base.read_text(encoding="utf-8") if base is not None else ""
    lines = [f"{_escape(k, key=True)}={_escape(v, key=False)}" for k, v in properties.items()]
    # The blank line ends a trailing backslash continuation in `base` before our first key.
    body = (head + "\n\n" if head else "") + "\n".join(lines) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(body)
    return path


@contextmanager
def scoped_environ(values: Mapping[str, str]) -> Iterator[None]:
    """Set `values` in this process's environment for the block, then restore it.

    spark-submit inherits the task process's environment on every master (the hook adds env_vars on
    top for local masters and YARN, and nothing for Kubernetes), so this is the one channel to a
    client-mode driver that is neither argv nor a file. The task runs in its own process.
    """
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, old in saved.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old

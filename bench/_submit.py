"""spark-submit as the DAG's operator starts a job on a local master, for the benchmarks that time
jobs as the DAG runs them: its Spark settings, its environment and its JVM start-up settings
(plugins/statekeeper_airflow), taken from the checkout being measured."""
from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


_PLUGINS: dict[Path, _Plugin] = {}
# The plugin's modules whose names the benchmarks use: submission settings, connections, the operators. A checkout
# from before the operator module was split holds all of them in operators.py.
_PLUGIN_MODULES = ("submission", "connections", "operators")


class _Plugin:
    """A checkout's plugin modules as one namespace: a name is looked up in each, in _PLUGIN_MODULES' order."""

    def __init__(self, modules: list[object]) -> None:
        self._modules = modules

    def __getattr__(self, name: str) -> object:
        for module in self._modules:
            if hasattr(module, name):
                return getattr(module, name)
        raise AttributeError(name)


def _import_plugin() -> _Plugin:
    import importlib

    modules = []
    for name in _PLUGIN_MODULES:
        try:
            modules.append(importlib.import_module(f"statekeeper_airflow.{name}"))
        except ModuleNotFoundError as exc:
            if exc.name != f"statekeeper_airflow.{name}":
                raise
    return _Plugin(modules)


def _operators(checkout: Path) -> _Plugin:
    """The operator's modules of `checkout`: its library zip, Spark settings, connections and JVM start-up.

    The first checkout asked for is imported as any module (its paths stay on sys.path). A second one (a
    before/after run has two) is imported beside it with its own copy of the library: from the module
    cache it would be the first checkout's operator, whose zip holds the first checkout's library, and
    the "before" jobs would run the "after" code."""
    key = checkout.resolve()
    if key in _PLUGINS:
        return _PLUGINS[key]
    if not _PLUGINS:
        for path in (str(key / "include"), str(key / "plugins")):
            if path not in sys.path:
                sys.path.insert(0, path)
        plugin = _import_plugin()
    else:
        saved = {name: sys.modules.pop(name) for name in list(sys.modules) if _is_library(name)}
        path = list(sys.path)
        sys.path[:0] = [str(key / "include"), str(key / "plugins")]
        try:
            plugin = _import_plugin()
        finally:
            for name in [name for name in sys.modules if _is_library(name)]:
                del sys.modules[name]
            sys.modules.update(saved)
            sys.path[:] = path
    _PLUGINS[key] = plugin
    return plugin


def _is_library(module: str) -> bool:
    return module.split(".")[0] in ("statekeeper", "statekeeper_airflow")


def library_zip(checkout: Path, dest: Path) -> Path:
    """The --py-files zip of the checkout's library, made by the operator's own function."""
    plugin = _operators(checkout)
    make = plugin.library_zip if hasattr(plugin, "library_zip") else plugin._library_zip   # before the split: private
    return Path(make(str(dest)))


def connection_env(checkout: Path, conn_type: str, login: str | None, password: str | None,
                   extra: dict[str, object]) -> dict[str, str]:
    """The storage variables the checkout's operator gives a job for an Airflow connection with these fields: its
    own mapping, so the names set are the ones that checkout's jobs read."""
    return _operators(checkout).storage_env_from_connection(conn_type, login, password, extra)


def dag_env(checkout: Path = REPO, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the operator gives spark-submit on a local master."""
    env = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "PYTHONPATH": str(checkout / "include"), "PATH": os.environ.get("PATH", ""),
           "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONDONTWRITEBYTECODE": "1",
           **{k: v for k, v in os.environ.items() if k in ("JAVA_HOME", "STATEKEEPER_CACHE", "HOME")}}
    return {**env, **(extra or {})}


def _base_conf(operators, checkout: Path) -> dict[str, str]:
    if hasattr(operators, "job_conf"):
        conf = dict(operators.job_conf())
        if hasattr(operators, "jvm_parts_conf"):
            # Delta's jars, extension and catalog, as the operator adds them to every submission.
            conf.update(operators.jvm_parts_conf(conf))
        return conf
    log4j = checkout / "spark_jobs" / "log4j2.properties"  # checkouts from before job_conf()
    return {"spark.ui.showConsoleProgress": "false", "spark.sql.session.timeZone": "UTC",
            "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j}",
            "spark.executor.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j}",
            "spark.ui.killEnabled": "false"}


@contextmanager
def dag_conf(checkout: Path = REPO, env: dict[str, str] | None = None) -> Iterator[dict[str, str]]:
    """The operator's Spark settings for a local master. On leaving the block, the JVM's
    class-data-sharing archive (written at exit by the first run) is published as the operator
    publishes it; call inside the block only the one spark-submit it is for."""
    operators = _operators(checkout)
    base = _base_conf(operators, checkout)
    if not hasattr(operators, "local_master_conf"):
        yield {**operators.LOCAL_DRIVER_CONF, **base}
        return
    conf = operators.local_master_conf(base, env or dag_env(checkout))
    conf, jvm = conf if isinstance(conf, tuple) else (conf, None)
    try:
        yield conf
        if jvm is not None:
            jvm.publish()
    finally:
        if jvm is not None:
            jvm.discard()

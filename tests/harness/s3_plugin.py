"""Flink's own S3 filesystem plugin (`flink-s3-fs-hadoop`) for the harness's Flink, so Flink writes and reads
checkpoints on the test S3 server itself.

`apache-flink-libraries` ships no `flink-s3-fs-*` jar: the plugin comes from Maven Central through `mvn` (the
ordinary Maven client, its local repository under the Statekeeper cache, as statekeeper.launch.jars fetches), ONCE per Flink version, into
`<cache>/flink/<version>/plugins/s3-fs-hadoop/` beside the Flink jars `flink.flink_lib` downloads. Every jar's
sha256 is pinned in `s3-plugins.sha256` beside this module; a jar that does not match is refused
(`PluginChecksumError`), never loaded.

Which plugin and version (see tests/harness/README.md, "Flink on S3"): the hadoop one (31 MB against presto's
97 MB; presto logs a spurious "Could not properly discard completed checkpoint ... Directory ... is not empty" for
every subsumed checkpoint on SeaweedFS, hadoop does not). The plugin of the Flink version that writes where Maven
Central serves it, else the nearest served patch release of the same minor (Flink keeps the plugin interface of a
minor line stable; 1.20.3 and 2.0.2 are not served: 1.20.1 and 2.0.0 were tried against them and write, restore
and subsume alike).

A harness JVM loads it as a Flink distribution does: `FLINK_PLUGINS_DIR` names the plugins root, and the JVM calls
`FileSystem.initialize(conf, PluginUtils.createPluginManagerFromRootFolder(conf))` (S3Plugins.java; a MiniCluster
does not do it by itself). The endpoint and keys reach the JVM in its environment, never on its argv.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.harness._fs import cache_root, file_lock
from tests.harness.flink import HarnessSetupError, flink_lib

PLUGIN = "flink-s3-fs-hadoop"
PLUGIN_DIR = "s3-fs-hadoop"   # Flink loads each plugins/<name>/ in a class loader of its own
PINS = Path(__file__).resolve().parent / "s3-plugins.sha256"
# Flink version -> the plugin version Maven Central serves for it (the same, or the nearest patch of the minor).
PLUGIN_VERSIONS = {"1.20.3": "1.20.1", "2.0.2": "2.0.0", "2.3.0": "2.3.0"}

# Environment variables the harness JVM reads (S3Plugins.java): the endpoint and keys stay off its argv.
ENV_ENDPOINT = "STATEKEEPER_FLINK_S3_ENDPOINT"
ENV_ACCESS_KEY = "STATEKEEPER_FLINK_S3_ACCESS_KEY"
ENV_SECRET_KEY = "STATEKEEPER_FLINK_S3_SECRET_KEY"


class PluginChecksumError(HarnessSetupError):
    """A fetched plugin jar is not the one pinned in s3-plugins.sha256."""


@dataclass(frozen=True)
class S3Endpoint:
    """Where a harness JVM's `s3://` paths go: an S3 server on loopback, path-style."""
    endpoint: str
    access_key: str
    secret_key: str

    def environment(self, version: str) -> dict[str, str]:
        """The JVM's environment additions: the plugins root of `version` and the connection."""
        return {"FLINK_PLUGINS_DIR": str(plugins_root(version)), ENV_ENDPOINT: self.endpoint,
                ENV_ACCESS_KEY: self.access_key, ENV_SECRET_KEY: self.secret_key}


def pinned() -> dict[str, str]:
    """Jar file name -> pinned sha256."""
    pins = {}
    for line in PINS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, name = line.split()
            pins[name] = digest
    return pins


def plugin_version(version: str) -> str:
    try:
        return PLUGIN_VERSIONS[version]
    except KeyError:
        raise HarnessSetupError(f"no {PLUGIN} version chosen for Flink {version}: add it to "
                                f"tests/harness/s3_plugin.py PLUGIN_VERSIONS and its sha256 to {PINS.name}") from None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_jar(path: Path) -> None:
    """Raise PluginChecksumError unless `path` has its pinned sha256."""
    expected = pinned().get(path.name)
    if expected is None:
        raise PluginChecksumError(f"{path.name} has no pinned sha256 in {PINS}: add one before using it")
    actual = _sha256(path)
    if actual != expected:
        raise PluginChecksumError(f"{path} has sha256 {actual}, pinned {expected} in {PINS}: remove it and "
                                  f"fetch it again; if Maven Central changed the artifact, check it before re-pinning")


def plugins_root(version: str) -> Path:
    """`<cache>/flink/<version>/plugins`, holding `s3-fs-hadoop/<jar>`, fetched and verified once."""
    flink_lib(version)
    root = cache_root() / "flink" / version / "plugins"
    jar_name = f"{PLUGIN}-{plugin_version(version)}.jar"
    jar = root / PLUGIN_DIR / jar_name
    if jar.is_file():
        return root
    with file_lock(cache_root() / "flink" / f"{version}.plugins.lock"):
        if not jar.is_file():
            fetched = _mvn_fetch(plugin_version(version))
            verify_jar(fetched)
            jar.parent.mkdir(parents=True, exist_ok=True)
            staging = jar.with_name(f".{jar_name}.{os.getpid()}.tmp")
            shutil.copyfile(fetched, staging)
            os.replace(staging, jar)
    return root


def _mvn_fetch(plugin_version: str) -> Path:
    """The plugin jar in the cache's Maven repository, resolved by `mvn` if it is not there yet (the fetcher the
    product's JVM parts use: statekeeper.launch.jars)."""
    from statekeeper.launch.jars import MissingJarsError, fetch_artifact

    try:
        return fetch_artifact("org.apache.flink", PLUGIN, plugin_version)
    except MissingJarsError as exc:
        raise HarnessSetupError(str(exc)) from exc

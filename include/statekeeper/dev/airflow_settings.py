"""Import an Astro-format `airflow_settings.yaml` (connections, variables, pools) into Airflow.

Airflow itself has no loader for this file (only the Astro CLI reads it), so the project ships one.
The conversion is pure (YAML -> Airflow's own import formats); the import step shells out to the
`airflow connections|variables|pools import` commands so it works against any metadata database
the CLI is configured for. String values may reference the environment as `${VAR}` or
`${VAR:-default}` (defaults may nest), so one file serves the demo, the tests and a real deployment.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from statekeeper.errors import StatekeeperError

_CONNECTION_KEYS = {
    "conn_id": None,
    "conn_type": "conn_type",
    "conn_host": "host",
    "conn_schema": "schema",
    "conn_login": "login",
    "conn_password": "password",
    "conn_port": "port",
    "conn_extra": "extra",
    "conn_description": "description",
}


class SettingsError(StatekeeperError):
    """airflow_settings.yaml is malformed or names an unset variable."""


@dataclass(frozen=True)
class AirflowSettings:
    connections: dict[str, dict[str, Any]] = field(default_factory=dict)
    variables: dict[str, str] = field(default_factory=dict)
    pools: dict[str, dict[str, Any]] = field(default_factory=dict)


def expand(value: str, env: Mapping[str, str], *, where: str = "") -> str:
    """Expand `${VAR}` and `${VAR:-default}`; an unset VAR without default is an error, not ''."""
    out: list[str] = []
    i = 0
    while i < len(value):
        start = value.find("${", i)
        if start < 0:
            out.append(value[i:])
            break
        out.append(value[i:start])
        depth, j = 1, start + 2
        while j < len(value) and depth:
            if value.startswith("${", j):
                depth += 1
                j += 2
                continue
            if value[j] == "}":
                depth -= 1
            j += 1
        if depth:
            raise SettingsError(f"{where}: unterminated '${{' in {value!r}")
        body = value[start + 2 : j - 1]
        name, sep, default = body.partition(":-")
        if not name.replace("_", "").isalnum():
            raise SettingsError(f"{where}: bad variable reference '${{{body}}}'")
        if env.get(name):
            out.append(env[name])
        elif sep:
            out.append(expand(default, env, where=where))
        else:
            raise SettingsError(
                f"{where}: environment variable {name} is not set and has no default; "
                f"export it or write ${{{name}:-default}}"
            )
        i = j
    return "".join(out)


def _expand_tree(node: Any, env: Mapping[str, str], where: str) -> Any:
    if isinstance(node, str):
        return expand(node, env, where=where)
    if isinstance(node, dict):
        return {k: _expand_tree(v, env, f"{where}.{k}") for k, v in node.items()}
    if isinstance(node, list):
        return [_expand_tree(v, env, f"{where}[{i}]") for i, v in enumerate(node)]
    return node


def parse_settings(text: str, env: Mapping[str, str] | None = None, *, source: str = "airflow_settings.yaml") -> AirflowSettings:
    env = os.environ if env is None else env
    doc = yaml.safe_load(text) or {}
    if not isinstance(doc, dict) or not isinstance(doc.get("airflow", {}), dict):
        raise SettingsError(f"{source}: expected a mapping with a top-level 'airflow' key")
    section = doc.get("airflow") or {}
    unknown = set(section) - {"connections", "variables", "pools"}
    if unknown:
        raise SettingsError(f"{source}: unknown keys under 'airflow': {sorted(unknown)}")
    return AirflowSettings(_connections(section.get("connections") or [], env, source),
                           _variables(section.get("variables") or [], env, source),
                           _pools(section.get("pools") or [], source))


def _connections(entries: list[Any], env: Mapping[str, str], source: str) -> dict[str, dict[str, Any]]:
    connections: dict[str, dict[str, Any]] = {}
    for i, raw in enumerate(entries):
        where = f"{source}: airflow.connections[{i}]"
        if not isinstance(raw, dict) or not raw.get("conn_id") or not raw.get("conn_type"):
            raise SettingsError(f"{where}: each connection needs conn_id and conn_type")
        bad = set(raw) - set(_CONNECTION_KEYS)
        if bad:
            raise SettingsError(f"{where}: unknown keys {sorted(bad)} (allowed: {sorted(_CONNECTION_KEYS)})")
        raw = _expand_tree(raw, env, where)
        conn: dict[str, Any] = {}
        for key, target in _CONNECTION_KEYS.items():
            if target is None or raw.get(key) in (None, ""):
                continue
            value = raw[key]
            if target == "extra":
                value = json.dumps(value) if isinstance(value, dict) else str(value)
            elif target == "port":
                value = int(value)
            conn[target] = value
        if raw["conn_id"] in connections:
            raise SettingsError(f"{where}: duplicate conn_id {raw['conn_id']!r}")
        connections[raw["conn_id"]] = conn
    return connections


def _variables(entries: list[Any], env: Mapping[str, str], source: str) -> dict[str, str]:
    variables: dict[str, str] = {}
    for i, raw in enumerate(entries):
        where = f"{source}: airflow.variables[{i}]"
        if not isinstance(raw, dict) or not raw.get("variable_name"):
            raise SettingsError(f"{where}: each variable needs variable_name and variable_value")
        variables[raw["variable_name"]] = expand(str(raw.get("variable_value", "")), env, where=where)
    return variables


def _pools(entries: list[Any], source: str) -> dict[str, dict[str, Any]]:
    pools: dict[str, dict[str, Any]] = {}
    for i, raw in enumerate(entries):
        where = f"{source}: airflow.pools[{i}]"
        if not isinstance(raw, dict) or not raw.get("pool_name") or "pool_slot" not in raw:
            raise SettingsError(f"{where}: each pool needs pool_name and pool_slot")
        slots = int(raw["pool_slot"])
        if slots < 1:
            raise SettingsError(f"{where}: pool_slot must be >= 1, got {slots}")
        pools[raw["pool_name"]] = {
            "slots": slots,
            "description": str(raw.get("pool_description", "")),
            "include_deferred": False,
        }
    return pools


def load_settings(path: str | os.PathLike, env: Mapping[str, str] | None = None) -> AirflowSettings:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise SettingsError(f"cannot read {p}: {e.strerror}") from e
    return parse_settings(text, env, source=str(p))


def write_import_files(settings: AirflowSettings, directory: str | os.PathLike) -> dict[str, Path]:
    """Write Airflow's native import files; also usable as DAG.test(conn_file_path=..., variable_file_path=...)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    files = {
        "connections": d / "connections.json",
        "variables": d / "variables.json",
        "pools": d / "pools.json",
    }
    files["connections"].write_text(json.dumps(settings.connections, indent=2))
    files["variables"].write_text(json.dumps(settings.variables, indent=2))
    files["pools"].write_text(json.dumps(settings.pools, indent=2))
    for f in files.values():
        os.chmod(f, 0o600)  # connection files may hold secrets
    return files


def import_into_airflow(settings: AirflowSettings, airflow_bin: str = "airflow", env: Mapping[str, str] | None = None) -> None:
    with tempfile.TemporaryDirectory(prefix="statekeeper-settings-") as tmp:
        files = write_import_files(settings, tmp)
        commands = [
            [airflow_bin, "connections", "import", "--overwrite", str(files["connections"])],
            [airflow_bin, "variables", "import", "--action-on-existing-key", "overwrite", str(files["variables"])],
            [airflow_bin, "pools", "import", str(files["pools"])],
        ]
        for cmd in commands:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(env) if env else None)
            if proc.returncode != 0:
                raise SettingsError(
                    f"'{' '.join(cmd[:3])}' failed with exit code {proc.returncode}: "
                    f"{(proc.stderr or proc.stdout).strip()[-2000:]}"
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="python -m statekeeper.dev.airflow_settings",
        description="Import connections, variables and pools from an Astro-format airflow_settings.yaml.",
    )
    parser.add_argument("file", nargs="?", default="airflow_settings.yaml")
    parser.add_argument("--airflow", default=str(Path(sys.executable).with_name("airflow")),
                        help="the airflow CLI to import with (default: the one beside this Python)")
    parser.add_argument("--print", action="store_true", dest="print_only",
                        help="print what would be imported (passwords masked) and import nothing")
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.file)
        if args.print_only:
            shown = {k: {**v, **({"password": "***"} if "password" in v else {})} for k, v in settings.connections.items()}
            print(json.dumps({"connections": shown, "variables": settings.variables, "pools": settings.pools}, indent=2))
            return 0
        import_into_airflow(settings, args.airflow)
    except SettingsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"imported {len(settings.connections)} connections, {len(settings.variables)} variables, "
          f"{len(settings.pools)} pools from {args.file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

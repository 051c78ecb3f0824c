"""Environment for the embedded Airflow (SQLite, LocalExecutor, loopback only).

One definition serves `make demo`, `make airflow-ui` and the tests, so what the tests prove is what
a user runs.

`make airflow-ui` runs the four Airflow components itself instead of `airflow standalone`: Airflow
3.3's log servers (scheduler and triggerer, ports 8793/8794) bind every interface with no setting for
their host, and standalone cannot pass `--skip-serve-logs`. On one machine the API server reads task
logs from the shared log folder, so they are not needed. The Airflow home is private (0700, files
0600): it holds the admin password, the Fernet key, airflow.cfg's secret keys and the metadata DB.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[3]


def _fernet_key(home: Path) -> str:
    """One Fernet key per Airflow home, shared by every process that uses it.

    Without it, whichever process first writes airflow.cfg generates a key that processes which
    imported Airflow earlier never see, and connections they read back fail to decrypt.
    """
    path = home / "fernet.key"
    if not path.exists():
        from cryptography.fernet import Fernet

        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(Fernet.generate_key())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    return path.read_text().strip()


def local_airflow_env(airflow_home: str | os.PathLike, *, project_root: Path = PROJECT_ROOT,
                      api_port: int = 8080, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment variables for an Airflow rooted at `airflow_home` that serves this project's DAGs."""
    home = Path(airflow_home).resolve()
    venv_bin = str(Path(sys.executable).parent)
    env = dict(os.environ if base is None else base)
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(project_root / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(project_root / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__FERNET_KEY": _fernet_key(home),
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        # Standalone defaults to 32 worker processes; two cores want two.
        "AIRFLOW__CORE__PARALLELISM": "2",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(api_port),
        # Task workers reach the API server here; the default assumes port 8080.
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api_port}/execution/",
        # Only the default of a DAG that does not say: the DR DAGs' is_paused_upon_creation=True keeps them paused.
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_HOST": "127.0.0.1",
        # Airflow chmods new task-log folders/files to these (defaults 0o775/0o664) whatever the umask.
        "AIRFLOW__LOGGING__FILE_TASK_HANDLER_NEW_FOLDER_PERMISSIONS": "0o700",
        "AIRFLOW__LOGGING__FILE_TASK_HANDLER_NEW_FILE_PERMISSIONS": "0o600",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "STATEKEEPER_HOME": str(project_root),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(project_root / "include"), env.get("PYTHONPATH", "")])),
        # `airflow standalone` runs bare `airflow`; the venv must be first on PATH.
        "PATH": os.pathsep.join([venv_bin, env.get("PATH", "")]),
        "GX_ANALYTICS_ENABLED": "false",
        "NO_PROXY": "*",
    })
    return env


def airflow_bin() -> str:
    return str(Path(sys.executable).with_name("airflow"))


PRIVATE_UMASK = 0o077

# What `airflow standalone` runs, minus the log servers (see the module docstring).
COMPONENTS: tuple[tuple[str, ...], ...] = (
    ("api-server",),
    ("scheduler", "--skip-serve-logs"),
    ("dag-processor",),
    ("triggerer", "--skip-serve-logs"),
)


def make_private(airflow_home: str | os.PathLike) -> None:
    """chmod the Airflow home to 0700 and everything in it to 0600/0700 (homes made before this
    was enforced, or files a tool created with its own mode)."""
    home = Path(airflow_home)
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(home, 0o700)
    for root, dirs, files in os.walk(home):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o700)
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, 0o600)


def prepare(airflow_home: str | os.PathLike, env: dict[str, str]) -> bool:
    """Migrate the SQLite metadata DB and import airflow_settings.yaml (both idempotent). Skipped (False)
    when this home's database was prepared by the same Airflow version with the same settings (a stamp
    of both): the migration and the three imports cost ~16 s on 2 cores, and `make demo` a second time
    would pay them for nothing. Edit airflow_settings.yaml, or upgrade Airflow, and the next start
    imports again."""
    import hashlib
    import json
    from dataclasses import asdict
    from importlib.metadata import version

    from statekeeper.dev.airflow_settings import import_into_airflow, load_settings

    home = Path(airflow_home)
    settings = load_settings(PROJECT_ROOT / "airflow_settings.yaml", env)
    digest = hashlib.sha256(json.dumps([version("apache-airflow"), asdict(settings)], sort_keys=True,
                                       default=str).encode()).hexdigest()
    stamp = home / ".statekeeper-prepared"
    if (home / "airflow.db").is_file() and stamp.is_file() and stamp.read_text().strip() == digest:
        return False
    make_private(airflow_home)
    proc = subprocess.run([airflow_bin(), "db", "migrate"], env=env, capture_output=True, text=True,
                          umask=PRIVATE_UMASK)
    if proc.returncode != 0:
        raise RuntimeError(f"airflow db migrate failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    import_into_airflow(settings, airflow_bin(), env)
    make_private(airflow_home)
    stamp.write_text(digest + "\n")
    stamp.chmod(0o600)
    return True


class _Stop(Exception):
    """SIGTERM: stop the components like Ctrl-C does."""


def serve(env: dict[str, str], *, grace_seconds: float = 30.0,
          components: tuple[tuple[str, ...], ...] = COMPONENTS, program: str | None = None) -> int:
    """Run `components` (`airflow <args>`; `program` instead of airflow) until Ctrl-C/SIGTERM or until one of
    them exits; then stop the others, each with everything it started."""
    def on_term(signum: int, frame: object) -> None:
        raise _Stop()

    signal.signal(signal.SIGTERM, on_term)
    # A process group per component: stopping one stops what it started too. The scheduler and the API server
    # fork workers; a component killed after the grace period left those running, orphaned.
    procs = [subprocess.Popen([program or airflow_bin(), *args], env=env, umask=PRIVATE_UMASK, process_group=0)
             for args in components]
    code = 0
    try:
        while all(p.poll() is None for p in procs):
            time.sleep(0.5)
        failed = [(" ".join(a), p.returncode) for a, p in zip(components, procs) if p.returncode is not None]
        print(f"airflow component exited: {failed}; stopping the others", file=sys.stderr, flush=True)
        code = 1
    except (KeyboardInterrupt, _Stop):
        pass
    finally:
        _stop_groups(procs, grace_seconds)
    return code


def _stop_groups(procs: list[subprocess.Popen], grace_seconds: float) -> None:
    """SIGTERM to each component's process group; SIGKILL to the groups with a process left after the grace."""
    for p in procs:
        _signal_group(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline:
        for p in procs:
            p.poll()
        if not any(_group_alive(p.pid) for p in procs):
            break
        time.sleep(0.2)
    for p in procs:
        _signal_group(p.pid, signal.SIGKILL)
        p.wait()


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


def _group_alive(pgid: int) -> bool:
    """Whether any process is left in the group (a zombie leader not yet reaped counts)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def main(argv: list[str] | None = None) -> int:
    """`make airflow-ui`: the Airflow UI on http://127.0.0.1:8080 with this project's DAGs."""
    import argparse

    parser = argparse.ArgumentParser(allow_abbrev=False, prog="python -m statekeeper.dev.airflow_local",
                                     description=main.__doc__)
    parser.add_argument("--home", default=str(PROJECT_ROOT / ".statekeeper" / "airflow"),
                        help="AIRFLOW_HOME (default: .statekeeper/airflow in the project)")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    # Everything this process and the components create in the home is private to this user.
    os.umask(PRIVATE_UMASK)
    env = local_airflow_env(args.home, api_port=args.port)
    prepare(args.home, env)
    print(f"Airflow UI: http://127.0.0.1:{args.port}  (user admin; password in "
          f"{Path(args.home) / 'simple_auth_manager_passwords.json.generated'}). Ctrl-C stops it.", flush=True)
    return serve(env)


if __name__ == "__main__":
    sys.exit(main())

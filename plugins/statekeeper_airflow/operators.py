"""SparkSubmitOperator specialised for Statekeeper's Spark jobs.

What it adds over the provider's operator, and why:
* fails closed when the Spark connection is missing (the provider silently falls back to YARN);
* resolves the storage connection at run time into environment variables for spark-submit, so
  credentials never appear on a command line, in rendered templates or in the DAG file; on YARN and
  Kubernetes, where the provider would turn env_vars into `--conf` arguments, they travel in a
  private properties file instead (see submit_env);
* keeps a local-master driver on loopback (RPC, block manager and UI) and turns off the Spark UI's
  kill links;
* runs the venv's own spark-submit and Python so driver and executors import the same library,
  and ships `include/statekeeper` as a zip in --py-files for real clusters;
* lets a manual run override the Spark master without editing the connection;
* maps the jobs' shared exit codes (statekeeper.entrypoint) onto Airflow's semantics: by default 1
  (done but needs attention, e.g. an unrestorable newest checkpoint) and 2 (configuration error)
  fail the task without retries, because a retry cannot change the answer; 3 (internal failure) is
  retried. `final_exit_codes` changes the set per task (the index retries its 1, a partial listing,
  which is often transient);
* returns the job's result (its --result-json) so it lands in XCom and the UI shows counts.

Exit codes and the result file reach the operator only when the driver runs beside it (local
masters and client deploy mode, the defaults); in cluster deploy mode spark-submit reports the
submission, not the job, and every failure is retried.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from airflow.exceptions import AirflowException, AirflowFailException
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseHook
from airflow.sdk.log import mask_secret

from .submit_env import (DRIVER_ENV_PREFIX, cluster_kind, connection_master, is_local_master, scoped_environ,
                         spark_defaults_file, write_properties_file)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SPARK_JOBS = PROJECT_ROOT / "spark_jobs"
LIBRARY = PROJECT_ROOT / "include"
LOG4J = SPARK_JOBS / "log4j2.properties"

# statekeeper.entrypoint's exit codes; repeated here because the operator must not import the library
# (Airflow workers parse DAGs without it on the path).
EXIT_ATTENTION = 1
EXIT_USAGE = 2
NO_RETRY = {
    EXIT_ATTENTION: "the job finished but found something that needs attention (see its summary above)",
    EXIT_USAGE: "a usage or configuration error (see the job's log above); fix the parameters or connections",
}


# A local driver needs no inbound connections from other hosts: keep its RPC server and block manager
# on loopback (the UI follows SPARK_LOCAL_IP, see LOCAL_DRIVER_ENV).
LOCAL_DRIVER_CONF = {
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
}
# Spark's WebUI binds to $SPARK_LOCAL_IP, else 0.0.0.0 (it has no conf key for its host).
LOCAL_DRIVER_ENV = {"SPARK_LOCAL_IP": "127.0.0.1"}


class StatekeeperConfigError(Exception):
    """A connection or parameter the Statekeeper task needs is missing or malformed."""


@dataclass
class Submission:
    """What one execute() prepared for spark-submit; everything under `tmp_dir` is removed afterwards."""

    tmp_dir: Path
    result_file: Path
    master: str
    # Storage variables for the spark-submit process environment (never argv).
    process_env: dict[str, str] = field(default_factory=dict)
    # The 0600 properties file carrying them to a cluster-mode driver (YARN/Kubernetes only).
    properties_file: Path | None = None


def storage_env_from_connection(conn_type: str, login: str | None, password: str | None,
                                extra: dict[str, Any]) -> dict[str, str]:
    """Map an Airflow connection onto the environment variables statekeeper.storage reads."""
    if conn_type not in ("aws", "s3"):
        raise StatekeeperConfigError(
            f"storage connection has type {conn_type!r}; Statekeeper reads S3 storage from an 'aws' "
            "connection (login = access key id, password = secret key, extra: endpoint_url, region_name, "
            "addressing_style). Leave storage_conn_id empty for local or NFS paths."
        )
    env: dict[str, str] = {}
    if login:
        env["AWS_ACCESS_KEY_ID"] = login
    if password:
        env["AWS_SECRET_ACCESS_KEY"] = password
    if extra.get("aws_session_token"):
        env["AWS_SESSION_TOKEN"] = str(extra["aws_session_token"])
    region = extra.get("region_name") or extra.get("region")
    if region:
        env["AWS_REGION"] = env["AWS_DEFAULT_REGION"] = str(region)
    endpoint = extra.get("endpoint_url") or (extra.get("service_config", {}).get("s3", {}) or {}).get("endpoint_url")
    if endpoint:
        env["STATEKEEPER_S3_ENDPOINT"] = str(endpoint)
    style = extra.get("addressing_style") or (extra.get("s3_config", {}) or {}).get("addressing_style")
    if style:
        if style not in ("path", "virtual"):
            raise StatekeeperConfigError(f"addressing_style must be 'path' or 'virtual', got {style!r}")
        env["STATEKEEPER_S3_PATH_STYLE"] = "true" if style == "path" else "false"
    return env


def _library_zip(dest_dir: str) -> str:
    """Zip include/statekeeper so cluster executors import the same code as the driver."""
    path = os.path.join(dest_dir, "statekeeper.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for file in (LIBRARY / "statekeeper").rglob("*"):
            if file.is_file() and "__pycache__" not in file.parts:
                zf.write(file, file.relative_to(LIBRARY))
    return path


class StatekeeperSparkSubmitOperator(SparkSubmitOperator):
    """Submit `spark_jobs/<job>.py` with Statekeeper's runtime wiring.

    :param job: the entry point's name in spark_jobs/ (e.g. "index_checkpoints").
    :param job_args: templated list of arguments for the entry point.
    :param spark_conn_id: templated; the Spark connection (its host is the master).
    :param storage_conn_id: templated; an 'aws' connection for s3:// roots/warehouse, '' for local paths.
    :param spark_master: templated; overrides the Spark connection's master when non-empty.
    :param final_exit_codes: the job's exit codes that fail the task for good (no retry).
    """

    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields, "spark_conn_id", "storage_conn_id", "spark_master", "job_args",
    )

    def __init__(self, *, job: str, job_args: list[str] | None = None, spark_conn_id: str = "spark_local",
                 storage_conn_id: str = "", spark_master: str = "",
                 final_exit_codes: Sequence[int] = (EXIT_ATTENTION, EXIT_USAGE), **kwargs: Any) -> None:
        unknown = set(final_exit_codes) - set(NO_RETRY)
        if unknown:
            raise StatekeeperConfigError(f"final_exit_codes may hold {sorted(NO_RETRY)}, not {sorted(unknown)}")
        application = SPARK_JOBS / f"{job}.py"
        if not application.is_file():
            raise StatekeeperConfigError(f"no Spark job {application}; expected one of "
                                         f"{sorted(p.stem for p in SPARK_JOBS.glob('*.py'))}")
        kwargs.setdefault("name", f"statekeeper-{job}")
        kwargs.setdefault("spark_binary", str(Path(sys.executable).with_name("spark-submit")))
        conf = {
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.session.timeZone": "UTC",
            "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J}",
            "spark.executor.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J}",
            # Anyone who reaches the UI (no authentication by default) could kill the job's stages.
            "spark.ui.killEnabled": "false",
            **(kwargs.pop("conf", None) or {}),
        }
        super().__init__(application=str(application), conf=conf, **kwargs)
        self.job = job
        self.spark_conn_id = spark_conn_id
        self.job_args = list(job_args or [])
        self.storage_conn_id = storage_conn_id
        self.spark_master = spark_master
        self.final_exit_codes = tuple(final_exit_codes)

    def _get_hook(self) -> SparkSubmitHook:
        hook = super()._get_hook()
        if self.spark_master:
            hook._connection["master"] = self.spark_master
        return hook

    def execute(self, context: Any) -> dict[str, Any] | None:
        with self.prepared_submission() as sub:
            self.log.info("submitting %s with args %s", self.job, json.dumps(self.application_args))
            try:
                super().execute(context)
            except AirflowException as exc:
                code = self._returncode()
                if code in self.final_exit_codes:
                    raise AirflowFailException(
                        f"{self.job} exited {code}: {NO_RETRY[code]}. Not retried. {_result_line(sub.result_file)}"
                    ) from exc
                raise
            return _read_result(sub.result_file)

    @contextmanager
    def prepared_submission(self) -> Iterator[Submission]:
        """Resolve the connections and set env_vars, conf, properties_file, py_files and
        application_args for the provider's hook; inside the block the storage variables are in this
        process's environment. Everything written is removed when the block ends."""
        # The provider's conn_id is not templated; ours is, so a manual run can pick the cluster.
        self._conn_id = self.spark_conn_id
        try:
            spark_conn = BaseHook.get_connection(self._conn_id)
        except Exception as e:  # the provider would silently default to YARN
            raise StatekeeperConfigError(
                f"Spark connection {self._conn_id!r} is not defined; import airflow_settings.yaml "
                "(python -m statekeeper.airflow_settings) or create it in the UI"
            ) from e
        # The hook decides argv vs environment from the connection's master (an override only
        # replaces the master afterwards), the driver's location follows the effective master.
        conn_master = connection_master(spark_conn.conn_type, spark_conn.host, spark_conn.port)
        master = self.spark_master or conn_master
        env = {
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(LIBRARY), os.environ.get("PYTHONPATH", "")])),
            "PATH": os.environ.get("PATH", ""),
            **{k: v for k, v in os.environ.items() if k in ("JAVA_HOME", "STATEKEEPER_CACHE", "HOME")},
        }
        if is_local_master(master):
            env.update(LOCAL_DRIVER_ENV)
            self.conf = {**LOCAL_DRIVER_CONF, **(self.conf or {})}
        storage_env: dict[str, str] = {}
        if self.storage_conn_id:
            conn = BaseHook.get_connection(self.storage_conn_id)
            extra = conn.extra_dejson if conn.extra else {}
            storage_env = storage_env_from_connection(conn.conn_type, conn.login, conn.password, extra)
            for key in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
                if key in storage_env:
                    mask_secret(storage_env[key])
        on_argv = cluster_kind(conn_master) is not None or cluster_kind(master) is not None
        if not on_argv:
            env.update(storage_env)  # local/standalone masters: the hook puts env_vars in Popen's env
        user_env = dict(self.env_vars or {})
        self.env_vars = {**env, **user_env}
        tmp = Path(tempfile.mkdtemp(prefix="statekeeper-submit-"))  # mode 0700
        sub = Submission(tmp_dir=tmp, result_file=tmp / "result.json", master=master,
                         process_env=storage_env if on_argv else {})
        user_properties = self.properties_file
        try:
            kind = cluster_kind(master)
            if on_argv and storage_env and kind is not None:
                base = Path(user_properties) if user_properties else spark_defaults_file({**os.environ, **user_env})
                sub.properties_file = write_properties_file(
                    tmp / "spark-submit.properties",
                    {DRIVER_ENV_PREFIX[kind] + k: v for k, v in storage_env.items()}, base=base)
                self.properties_file = str(sub.properties_file)
            self.application_args = [str(a) for a in self.job_args] + ["--result-json", str(sub.result_file)]
            self.py_files = _library_zip(str(tmp))
            with scoped_environ(sub.process_env):
                yield sub
        finally:
            self.properties_file = user_properties
            shutil.rmtree(tmp, ignore_errors=True)

    def _returncode(self) -> int | None:
        process = getattr(self._hook, "_submit_sp", None) if self._hook else None
        return process.returncode if process is not None else None


def _read_result(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):  # cluster deploy mode: the driver wrote it elsewhere
        return None


def _result_line(path: Path) -> str:
    result = _read_result(path)
    if not result:
        return ""
    brief = {k: result[k] for k in ("status", "error", "jobs_unrestorable") if result.get(k) is not None}
    if result.get("unrestorable"):
        brief["newest_not_restorable"] = [u.get("newest_uri") for u in result["unrestorable"][:10]]
    return "Result: " + json.dumps(brief, default=str)

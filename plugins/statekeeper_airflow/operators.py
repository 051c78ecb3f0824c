"""SparkSubmitOperator specialised for Statekeeper's Spark jobs.

What it adds over the provider's operator, and why:
* fails closed when the Spark connection is missing (the provider silently falls back to YARN);
* resolves the storage connection at run time into environment variables for spark-submit, so
  credentials never appear on a command line, in rendered templates or in the DAG file; on YARN and
  Kubernetes, where the provider would turn env_vars into `--conf` arguments, they travel in a
  private properties file instead (see submit_env). A second connection, `target_storage_conn_id`
  (the disaster-recovery store copy_to_dr writes to), travels the same way under STATEKEEPER_DR_
  names (STATEKEEPER_DR_AWS_ACCESS_KEY_ID, STATEKEEPER_DR_S3_ENDPOINT, ...: what
  StorageConfig.target_from_env reads);
* keeps a local-master driver on loopback (RPC, block manager and UI) and turns off the Spark UI's
  kill links;
* runs the venv's own spark-submit and Python so driver and executors import the same library,
  and ships `include/statekeeper` as a zip in --py-files for real clusters;
* lets a manual run override the Spark master without editing the connection;
* maps the jobs' exit codes onto Airflow's semantics. The codes, what each means for each job and
  which of them a retry can change come from statekeeper.registry (stdlib only, so DAG parsing
  needs no Spark): by default a job's `JobSpec.final_exit_codes` (e.g. validate's 1, an unrestorable
  newest checkpoint, and every job's 2, a configuration error) fail the task without retries,
  because a retry cannot change the answer; the others (3, internal failure; the index's 1, a
  partial listing, which is often transient) are retried. `final_exit_codes` overrides the set per
  task;
* returns the job's result (its --result-json) so it lands in XCom and the UI shows counts.

Exit codes and the result file reach the operator only when the driver runs beside it (local
masters and client deploy mode, the defaults); in cluster deploy mode spark-submit reports the
submission, not the job, and every failure is retried.
"""
from __future__ import annotations

import importlib.util
import json
import logging
import marshal
import os
import re
import shutil
import sys
import tempfile
import uuid
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlparse

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseHook, BaseOperator, Connection
from airflow.sdk.exceptions import AirflowException, AirflowFailException
from airflow.sdk.log import mask_secret
from statekeeper import registry
from statekeeper import storage_env as env_names
# Absolute, not relative: Airflow's plugin manager also loads this file as a top-level module.
from statekeeper.jvm_startup import (ARCHIVE_MAP_OPTION, ARCHIVE_WRITE_OPTION, JvmStartup, local_heap_conf,
                                     local_network, local_startup, with_java_options, without_options)
from statekeeper.launch.jars import spark_conf as jvm_parts_conf
from statekeeper.pyspark_daemon import LOCAL_WORKER_CONF
from statekeeper.tables.spark import is_local_master
from statekeeper.warm_driver.client import Declined, DriverClient
from statekeeper.warm_driver.protocol import DriverGone, fingerprint, library_digest, run_key, socket_path
from statekeeper_airflow.submit_env import (DRIVER_ENV_PREFIX, cluster_kind, connection_master, read_properties,
                                            scoped_environ, spark_defaults_file, write_properties_file)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SPARK_JOBS = PROJECT_ROOT / "spark_jobs"
LIBRARY = PROJECT_ROOT / "include"
LOG4J = SPARK_JOBS / "log4j2.properties"
# A DAG run's shared driver (statekeeper.warm_driver), started by its setup task.
DRIVER_APPLICATION = SPARK_JOBS / "spark_driver.py"
# Java options that name one submission's own files (its class archive), not the driver's settings.
SUBMISSION_JAVA_OPTIONS = (ARCHIVE_WRITE_OPTION, ARCHIVE_MAP_OPTION)

# The provider's SparkSubmitHook.submit() reports a failed spark-submit only as
# AirflowException("Cannot execute: <cmd>. Error code is: <N>.[ Kubernetes ...][\nLast spark-submit output: ...]").
SPARK_SUBMIT_TAIL = "\nLast spark-submit output:"
SPARK_SUBMIT_CODE = re.compile(r"Error code is: (-?\d+)")

# The target store's variables carry this prefix (statekeeper.storage_env.prefixed_env_name spells
# them: STATEKEEPER_S3_ENDPOINT -> STATEKEEPER_DR_S3_ENDPOINT, AWS_REGION -> STATEKEEPER_DR_AWS_REGION).
# Every name below comes from statekeeper.storage_env, which StorageConfig reads with: stdlib only, so
# DAG parsing still imports nothing but it and the registry.
DR_ENV_PREFIX = env_names.DR_PREFIX
# Variables whose values are secrets (masked in task logs), without any prefix.
SECRET_ENV = env_names.SECRET_NAMES
# Connection types storage_env_from_connection maps, and what each reaches.
STORAGE_CONN_TYPES = {
    "aws": "s3:// (and S3-compatible endpoints)", "s3": "s3://",
    "google_cloud_platform": "gs://",
    "wasb": "abfss:// / wasbs:// (Azure Blob storage)", "adls": "abfss:// (Azure Data Lake Storage Gen2)",
}


def local_master_conf(conf: dict[str, str], environ: dict[str, str] | None = None, *,
                      deployment: dict[str, str] | None = None,
                      driver_memory: str | None = None) -> tuple[dict[str, str], JvmStartup]:
    """`conf` (the task's, which wins) completed with what a driver on a local master needs: its RPC server and
    block manager on loopback and the UI's kill links off unless the task or the deployment chose otherwise
    (statekeeper.jvm_startup.local_network; its `env`, the UI's address, goes into the driver's environment), a
    heap sized to the machine (statekeeper.jvm_startup.local_driver_memory) unless the task (`driver_memory`, its
    conf) or the deployment (`deployment`: its properties file or spark-defaults.conf; SPARK_DRIVER_MEMORY in
    `environ`, which spark-submit reads after both) chose one, and the JVM start-up settings of
    statekeeper.jvm_startup (whose archive the caller publishes after the JVM exited)."""
    # Local workers inherit PYTHONPATH with the library (_driver_env): they import PySpark's bytecode.
    out = {**LOCAL_WORKER_CONF, **local_network(conf, environ, deployment=deployment).conf, **conf}
    if not driver_memory:
        out.update(local_heap_conf(out, environ, deployment=deployment))
    startup = local_startup(out, environ)
    if startup.options:
        out["spark.driver.extraJavaOptions"] = with_java_options(out, startup.options)
    return out, startup


def job_conf() -> dict[str, str]:
    """The Spark settings every Statekeeper submission carries (the benchmarks submit with them too)."""
    return {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J}",
        "spark.executor.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J}",
        # Anyone who reaches the UI (no authentication by default) could kill the job's stages.
        "spark.ui.killEnabled": "false",
    }


JAVA_OPTION_KEYS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


def with_deployment_java_options(conf: dict[str, str], defaults: dict[str, str]) -> dict[str, str]:
    """`conf` whose Java options, where they are still job_conf()'s own, come after the deployment's
    (`defaults`: what spark-submit would load from the properties file or spark-defaults.conf).
    A `--conf` replaces the file's value of the same key, so without this every submission would
    silently drop a cluster's own extraJavaOptions (agents, heap dumps, trust stores); a task that
    sets its own Java options keeps exactly those, as with plain spark-submit."""
    ours = job_conf()
    out = dict(conf)
    for key in JAVA_OPTION_KEYS:
        site = defaults.get(key, "").strip()
        if site and out.get(key) == ours[key]:
            out[key] = f"{site} {ours[key]}"
    return out


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
    # A local driver's start-up settings; the class-data-sharing archive its JVM writes at exit.
    jvm: JvmStartup | None = None


def storage_env_from_connection(conn_type: str, login: str | None, password: str | None,
                                extra: dict[str, Any], *, prefix: str = "", host: str | None = None) -> dict[str, str]:
    """Map an Airflow connection onto the environment variables statekeeper.storage reads; with a
    `prefix` (DR_ENV_PREFIX), the target store's names (AWS_REGION -> STATEKEEPER_DR_AWS_REGION,
    STATEKEEPER_S3_ENDPOINT -> STATEKEEPER_DR_S3_ENDPOINT).

    Types: 'aws' (login = access key id, password = secret key; extra endpoint_url, region_name,
    addressing_style), 'google_cloud_platform' (extra key_path or keyfile_dict, project; for an emulator
    endpoint and anonymous), 'wasb' (login = account name, password = account key; extra shared_access_key,
    sas_token, connection_string, endpoint) and 'adls' (host = account name, extra account_key, sas_token,
    connection_string, endpoint; a service principal needs azure-identity and is refused)."""
    if conn_type == "google_cloud_platform":
        env = _gcs_env(extra)
    elif conn_type in ("wasb", "adls"):
        env = _azure_env(conn_type, login, password, extra, host)
    elif conn_type in ("aws", "s3"):
        env = _s3_env(login, password, extra)
    else:
        param = "target_storage_conn_id" if prefix else "storage_conn_id"
        kinds = ", ".join(f"'{k}' ({v})" for k, v in STORAGE_CONN_TYPES.items())
        raise StatekeeperConfigError(
            f"{'target ' if prefix else ''}storage connection has type {conn_type!r}; Statekeeper reads storage "
            f"settings from connections of type {kinds}. Leave {param} empty for local or NFS paths."
        )
    return {env_names.prefixed_env_name(k, prefix): v for k, v in env.items()}


def _extra(extra: dict[str, Any], *names: str) -> Any:
    """The first non-empty extra among `names`, also in the old `extra__<type>__<name>` spelling."""
    for name in names:
        for key, value in extra.items():
            if (key == name or key.endswith("__" + name)) and value not in (None, ""):
                return value
    return None


def _gcs_env(extra: dict[str, Any]) -> dict[str, str]:
    env: dict[str, str] = {}
    key_path = _extra(extra, "key_path")
    keyfile = _extra(extra, "keyfile_dict")
    if key_path and keyfile:
        raise StatekeeperConfigError("google_cloud_platform connection has both key_path and keyfile_dict; keep one")
    if key_path:
        env[env_names.GCS_CREDENTIALS_FILE] = str(key_path)
    if keyfile:
        env[env_names.GCS_CREDENTIALS_JSON] = keyfile if isinstance(keyfile, str) else json.dumps(keyfile)
    if _extra(extra, "key_secret_name") or _extra(extra, "credential_config_file"):
        raise StatekeeperConfigError("google_cloud_platform connection: Secret Manager keys and workload identity "
                                     "federation files are not supported; give key_path or keyfile_dict")
    project = _extra(extra, "project", "project_id")
    if project:
        env[env_names.GCS_PROJECT] = str(project)
    endpoint = _extra(extra, "endpoint", "api_endpoint")
    if endpoint:
        env[env_names.GCS_ENDPOINT] = str(endpoint)
    anonymous = _extra(extra, "anonymous")
    if anonymous is not None:
        env[env_names.GCS_ANONYMOUS] = str(anonymous).lower()
    return env


def _azure_env(conn_type: str, login: str | None, password: str | None, extra: dict[str, Any],
               host: str | None) -> dict[str, str]:
    env: dict[str, str] = {}
    parsed: dict[str, str] = {}
    conn_string = _extra(extra, "connection_string")
    if conn_string:
        for part in str(conn_string).split(";"):
            name, sep, value = part.partition("=")
            if sep:
                parsed[name.strip().lower()] = value.strip()
    if conn_type == "adls":
        if _extra(extra, "tenant_id") or _extra(extra, "client_secret_auth_config"):
            raise StatekeeperConfigError(
                "adls connection uses a service principal (tenant_id): Azure AD sign-in needs azure-identity, "
                "which Statekeeper does not ship; give the account key (extra account_key) or a SAS token")
        account = host or _extra(extra, "account_name") or parsed.get("accountname")
        key = _extra(extra, "account_key", "shared_access_key") or parsed.get("accountkey")
    else:
        host_account = None
        if host and "://" in host:   # the wasb connection's Account URL field
            host_account = (urlparse(host).hostname or "").split(".", 1)[0] or None
        account = login or _extra(extra, "account_name") or parsed.get("accountname") or host_account
        key = _extra(extra, "shared_access_key", "account_key") or password or parsed.get("accountkey")
    sas = _extra(extra, "sas_token") or parsed.get("sharedaccesssignature")
    endpoint = _extra(extra, "endpoint", "blob_endpoint") or parsed.get("blobendpoint")
    if key and sas:
        raise StatekeeperConfigError(f"{conn_type} connection has both an account key and a SAS token; keep one")
    if not (key or sas):
        raise StatekeeperConfigError(
            f"{conn_type} connection has neither an account key nor a SAS token; Statekeeper authorizes Azure "
            "storage with one of them (Azure AD sign-in needs azure-identity, which it does not ship)")
    if account:
        env[env_names.AZURE_ACCOUNT_NAME] = str(account)
    if key:
        env[env_names.AZURE_ACCOUNT_KEY] = str(key)
    if sas:
        env[env_names.AZURE_SAS_TOKEN] = str(sas)
    if endpoint:
        env[env_names.AZURE_BLOB_ENDPOINT] = str(endpoint)
    return env


def _s3_env(login: str | None, password: str | None, extra: dict[str, Any]) -> dict[str, str]:
    env: dict[str, str] = {}
    if login:
        env[env_names.AWS_ACCESS_KEY_ID] = login
    if password:
        env[env_names.AWS_SECRET_ACCESS_KEY] = password
    if extra.get("aws_session_token"):
        env[env_names.AWS_SESSION_TOKEN] = str(extra["aws_session_token"])
    region = extra.get("region_name") or extra.get("region")
    if region:
        env[env_names.AWS_REGION] = env[env_names.AWS_DEFAULT_REGION] = str(region)
    endpoint = extra.get("endpoint_url") or (extra.get("service_config", {}).get("s3", {}) or {}).get("endpoint_url")
    if endpoint:
        env[env_names.S3_ENDPOINT] = str(endpoint)
    style = extra.get("addressing_style") or (extra.get("s3_config", {}) or {}).get("addressing_style")
    if style:
        if style not in ("path", "virtual"):
            raise StatekeeperConfigError(f"addressing_style must be 'path' or 'virtual', got {style!r}")
        env[env_names.S3_PATH_STYLE] = "true" if style == "path" else "false"
    return env


def _library_zip(dest_dir: str) -> str:
    """Zip include/statekeeper so cluster executors import the same code as the driver.

    Each module goes in twice: its source (tracebacks, importlib.resources) and its bytecode beside it,
    which zipimport takes first. Python never writes bytecode into a zip, so without it the driver and
    every forked Python worker compiled each module it imported, in every job: in a DR run on the sample
    store, ~0.5 s of the driver's CPU and ~1.3 s of its workers'. Compiling all of them here costs ~0.3 s.
    The bytecode is hash-based and unchecked: it was compiled from the source next to it in the same
    zip, so there is nothing to check; an interpreter of another version rejects its magic number and
    zipimport compiles the source as before."""
    path = os.path.join(dest_dir, "statekeeper.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for file in (LIBRARY / "statekeeper").rglob("*"):
            if file.is_file() and "__pycache__" not in file.parts:
                arcname = file.relative_to(LIBRARY).as_posix()
                zf.write(file, arcname)
                if file.suffix == ".py":
                    zf.writestr(arcname + "c", _bytecode(file.read_bytes(), f"{path}/{arcname}"))
    return path


def _bytecode(source: bytes, filename: str) -> bytes:
    """An unchecked hash-based .pyc of `source` (PEP 552): magic, flags, source hash, marshalled code."""
    code = compile(source, filename, "exec", dont_inherit=True)
    flags = 0b01    # hash-based; check_source (0b10) unset
    return (importlib.util.MAGIC_NUMBER + flags.to_bytes(4, "little") + importlib.util.source_hash(source)
            + marshal.dumps(code))


class _StatekeeperSubmit(SparkSubmitOperator):
    """What every Statekeeper submission shares: the Spark connection (refused when missing), a master
    override, the storage connections resolved at run time into the driver's environment, and the
    settings a local driver needs (see the module docstring)."""

    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields, "spark_conn_id", "storage_conn_id", "target_storage_conn_id",
        "spark_master", "job_args",
    )

    def __init__(self, *, application: Path, job_args: list[str] | None = None, spark_conn_id: str = "spark_local",
                 storage_conn_id: str = "", target_storage_conn_id: str = "", spark_master: str = "",
                 **kwargs: Any) -> None:
        kwargs.setdefault("spark_binary", str(Path(sys.executable).with_name("spark-submit")))
        conf = {**job_conf(), **(kwargs.pop("conf", None) or {})}
        super().__init__(application=str(application), conf=conf, **kwargs)
        self.spark_conn_id = spark_conn_id
        self.job_args = list(job_args or [])
        self.storage_conn_id = storage_conn_id
        self.target_storage_conn_id = target_storage_conn_id
        self.spark_master = spark_master

    def driver_settings(self, command: Sequence[str]) -> dict[str, Any]:
        """What a DAG run's shared driver must have been started with for this task's job to run in it
        (statekeeper.warm_driver): `command` (driver_submit_command of the task's hook) up to the application
        and without what names this submission alone, the driver's environment (the storage connections'
        variables among it), the Python and the library's code. Inside prepared_submission()."""
        return {"command": driver_command(command, SUBMISSION_JAVA_OPTIONS, drop=("--name", "--py-files")),
                "env": dict(self.env_vars or {}), "python": sys.executable,
                "library": library_digest(LIBRARY / "statekeeper")}

    def _get_hook(self) -> SparkSubmitHook:
        if not self.spark_master:
            return super()._get_hook()
        # The hook has no parameter for the master: it reads it from the Spark connection when it is
        # built. So the override is a connection: a copy of the Spark connection whose host is the
        # master (the provider's documented form, conn_type 'spark' with the URL as host), under a
        # one-off id, in an AIRFLOW_CONN_* variable (Airflow's documented environment-variable
        # connections, which every worker's secrets chain reads) while the provider builds the hook.
        # This relies only on public surfaces (the conn id and the connection format); it survives
        # changes to how the hook stores what it resolved, which writing into hook._connection did not.
        # The variable is gone before spark-submit starts, so the process never inherits it.
        conn = BaseHook.get_connection(self._conn_id)
        override_id = f"statekeeper_master_{uuid.uuid4().hex}"
        override = Connection(conn_id=override_id, conn_type="spark", host=self.spark_master,
                              description=f"{conn.conn_id} with master {self.spark_master}",
                              login=conn.login, password=conn.password, schema=conn.schema, extra=conn.extra)
        conn_id = self._conn_id
        self._conn_id = override_id
        try:
            with scoped_environ({f"AIRFLOW_CONN_{override_id.upper()}": override.as_json()}):
                return super()._get_hook()
        finally:
            self._conn_id = conn_id

    def _spark_connection(self) -> Connection:
        """The task's Spark connection; refused when it is missing (the provider would silently default to YARN)."""
        # The provider's conn_id is not templated; ours is, so a manual run can pick the cluster.
        self._conn_id = self.spark_conn_id
        try:
            return BaseHook.get_connection(self._conn_id)
        except Exception as e:
            raise StatekeeperConfigError(
                f"Spark connection {self._conn_id!r} is not defined; import airflow_settings.yaml "
                "(python -m statekeeper.airflow_settings) or create it in the UI"
            ) from e

    @contextmanager
    def prepared_submission(self) -> Iterator[Submission]:
        """Resolve the connections and set env_vars, conf, properties_file and application_args for the
        provider's hook (py_files: `_spark_submit`, only when the task submits); inside the block the storage
        variables are in this process's environment. Everything written is removed when the block ends."""
        spark_conn = self._spark_connection()
        # The task's own settings, put back when the block ends: an operator executed again in one process (a
        # retry, dag.test) would otherwise start from the last submission's conf, with its JVM options and the
        # temporary paths they name.
        own = (self.conf, self.env_vars, self.properties_file, self.application_args, self.py_files)
        # The hook decides argv vs environment from the effective master (an override is the master
        # of the connection it is built with, see _get_hook); the storage variables also stay out of
        # env_vars when only the connection's master is a cluster one (the process environment
        # reaches a client-mode driver just as well). The driver's location follows the effective master.
        conn_master = connection_master(spark_conn.conn_type, spark_conn.host, spark_conn.port)
        master = self.spark_master or conn_master
        env = _driver_env()
        # What spark-submit would load besides our --conf: the task's properties file, else spark-defaults.conf.
        user_properties = self.properties_file
        defaults_file = (Path(user_properties) if user_properties
                         else spark_defaults_file({**os.environ, **(self.env_vars or {})}))
        if defaults_file is not None and not defaults_file.is_file():
            raise StatekeeperConfigError(f"properties_file {defaults_file} does not exist")
        defaults = read_properties(defaults_file) if defaults_file is not None else {}
        conf, jvm = with_deployment_java_options(self.conf or {}, defaults), None
        # Delta Lake's jars (the table engine) and S3A, added to the deployment's own jars and extensions.
        conf = {**conf, **jvm_parts_conf({**defaults, **conf})}
        if is_local_master(master):
            environ = {**os.environ, **(self.env_vars or {})}
            env.update(local_network(conf, environ, deployment=defaults).env)
            conf, jvm = local_master_conf(conf, environ, deployment=defaults,
                                          driver_memory=getattr(self, "_driver_memory", None))
        # The source store's variables and the target store's (prefixed): both take every path below.
        storage_env = {**_connection_env(self.storage_conn_id),
                       **_connection_env(self.target_storage_conn_id, prefix=DR_ENV_PREFIX)}
        on_argv = cluster_kind(conn_master) is not None or cluster_kind(master) is not None
        if not on_argv:
            env.update(storage_env)  # local/standalone masters: the hook puts env_vars in Popen's env
        user_env = dict(self.env_vars or {})
        tmp = Path(tempfile.mkdtemp(prefix="statekeeper-submit-"))  # mode 0700
        sub = Submission(tmp_dir=tmp, result_file=tmp / "result.json", master=master,
                         process_env=storage_env if on_argv else {}, jvm=jvm)
        try:
            self.conf, self.env_vars = conf, {**env, **user_env}
            kind = cluster_kind(master)
            if on_argv and storage_env and kind is not None:
                base = defaults_file
                sub.properties_file = write_properties_file(
                    tmp / "spark-submit.properties",
                    {DRIVER_ENV_PREFIX[kind] + k: v for k, v in storage_env.items()}, base=base)
                self.properties_file = str(sub.properties_file)
            self.application_args = [str(a) for a in self.job_args] + ["--result-json", str(sub.result_file)]
            with scoped_environ(sub.process_env):
                yield sub
        finally:
            self.conf, self.env_vars, self.properties_file, self.application_args, self.py_files = own
            shutil.rmtree(tmp, ignore_errors=True)
            if jvm is not None:
                jvm.discard()



class StatekeeperSparkSubmitOperator(_StatekeeperSubmit):
    """Submit `spark_jobs/<job>.py` with Statekeeper's runtime wiring.

    :param job: a job of statekeeper.registry: its entry point's name in spark_jobs/ (e.g.
        "index_checkpoints") or its short name ("index").
    :param job_args: templated list of arguments for the entry point.
    :param spark_conn_id: templated; the Spark connection (its host is the master).
    :param storage_conn_id: templated; the object store's connection ('aws' for s3://, 'google_cloud_platform'
        for gs://, 'wasb' or 'adls' for Azure; see storage_env_from_connection), '' for local paths.
    :param target_storage_conn_id: templated; such a connection for a second store the job writes to
        (copy_to_dr's disaster-recovery targets), passed as STATEKEEPER_DR_* variables exactly the way
        storage_conn_id's are passed; '' for none (the job then reaches the targets with the storage
        connection's settings).
    :param spark_master: templated; overrides the Spark connection's master when non-empty.
    :param final_exit_codes: the job's exit codes that fail the task for good (no retry); default: the
        registry's `JobSpec.final_exit_codes` for the job.
    :param enabled: templated; renders to true/false. False skips the task (nothing is submitted) with
        `skip_reason` in the log: steps a deployment opts in to (compaction) or that run on some days only.
    :param metrics: templated; set on a DAG's last step (statekeeper_airflow.dag_params.metrics_push): when its
        job has ended, whatever its exit, the run's figures are pushed to the Pushgateway (and through
        OpenTelemetry) as statekeeper_airflow.metrics_push says; that never changes the task's outcome.
    """

    template_fields: Sequence[str] = (*_StatekeeperSubmit.template_fields, "enabled", "metrics")

    def __init__(self, *, job: str, final_exit_codes: Sequence[int] | None = None, enabled: bool | str = True,
                 skip_reason: str = "", metrics: dict[str, Any] | None = None, **kwargs: Any) -> None:
        try:
            spec = registry.job(job)
        except KeyError as e:
            raise StatekeeperConfigError(f"{e.args[0]}; spark_jobs/ has "
                                         f"{sorted(p.stem for p in SPARK_JOBS.glob('*.py'))}") from None
        if final_exit_codes is None:
            final_exit_codes = spec.final_exit_codes
        failing = sorted(int(c) for c in spec.exit_codes if c != registry.ExitCode.OK)
        unknown = set(final_exit_codes) - set(failing)
        if unknown:
            raise StatekeeperConfigError(f"final_exit_codes of {spec.entry_point} may hold {failing}, "
                                         f"not {sorted(unknown)}")
        application = SPARK_JOBS / f"{spec.entry_point}.py"
        if not application.is_file():
            raise StatekeeperConfigError(f"no Spark job {application}; expected one of "
                                         f"{sorted(p.stem for p in SPARK_JOBS.glob('*.py'))}")
        kwargs.setdefault("name", f"statekeeper-{job}")
        super().__init__(application=application, **kwargs)
        self.job = job
        self.spec = spec
        self.final_exit_codes = tuple(int(c) for c in final_exit_codes)
        self.enabled = enabled
        self.skip_reason = skip_reason
        self.metrics = metrics

    def execute(self, context: Any) -> dict[str, Any] | None:
        if not _truthy(self.enabled):
            from airflow.sdk.exceptions import AirflowSkipException

            raise AirflowSkipException(f"{self.task_id} is off for this run: {self.skip_reason or 'enabled is false'}")
        try:
            return self._submit_job(context)
        finally:
            if self.metrics:
                from statekeeper_airflow.metrics_push import push_run_figures

                push_run_figures(self.metrics, self.dag_id, self.log)

    def _submit_job(self, context: Any) -> dict[str, Any] | None:
        with self.prepared_submission() as sub:
            code = self._run_in_run_driver(context, sub)
            if code is None:
                self._spark_submit(context, sub)
            elif code != registry.ExitCode.OK:
                self._failed(code, sub, f"in the DAG run's Spark driver: {self.spec.meaning(code)}")
            result = _read_result(sub.result_file)
            if self.spec.name == registry.REPORT.name and result and result.get("report_uri"):
                self.log.info("report written to %s; in the Airflow UI: Browse > Statekeeper (%s)",
                              result["report_uri"], report_page_url())
            return result

    def _spark_submit(self, context: Any, sub: Submission) -> None:
        self.log.info("submitting %s with args %s", self.job, json.dumps(self.application_args))
        # Built here, not for a task the run's shared driver takes: that driver imports the checkout's
        # library (it outlives any task's files), so the zip and its ~0.3 s of compiling would be for nothing.
        self.py_files = _library_zip(str(sub.tmp_dir))
        try:
            super().execute(context)
        except AirflowException as exc:
            code = spark_submit_exit_code(exc)
            if code is not None and code >= 0 and sub.jvm is not None:
                sub.jvm.publish()  # the JVM exited (with a job's status), so its archive is whole
            if code in self.final_exit_codes:
                self._failed(code, sub, self.spec.meaning(code), exc)
            raise
        if sub.jvm is not None:
            sub.jvm.publish()

    def _failed(self, code: int, sub: Submission, what: str, cause: BaseException | None = None) -> None:
        """Fail the task for job exit `code`: for good when the code is final (a retry cannot change it)."""
        if code in self.final_exit_codes:
            raise AirflowFailException(f"{self.job} exited {code}: {what}. Not retried. {_result_line(sub.result_file)}"
                                       ) from cause
        raise AirflowException(f"{self.job} exited {code}: {what}. {_result_line(sub.result_file)}") from cause

    def _run_in_run_driver(self, context: Any, sub: Submission) -> int | None:
        """The job's exit code from the DAG run's shared driver (statekeeper.warm_driver), or None when
        there is none to take it (none started, a cluster master, other settings, busy): then nothing
        ran and the task submits its own spark-submit."""
        ti = context.get("ti")
        if ti is None or not is_local_master(sub.master):   # no DAG run (a bare execute): nothing to share
            return None
        try:
            path = socket_path(run_key(ti.dag_id, ti.run_id))
        except OSError as exc:
            self.log.warning("no shared Spark driver: %s", exc)
            return None
        if not path.exists():
            return None
        self._driver_client = DriverClient(path)
        try:
            settings = self.driver_settings(driver_submit_command(self._get_hook()))
            outcome = self._driver_client.run(fingerprint(settings), self.spec.entry_point,
                                              list(self.application_args), lambda line: self.log.info("%s", line))
        except DriverGone as exc:
            raise AirflowException(f"{exc}. A retry submits its own spark-submit.") from exc
        finally:
            self._driver_client = None
        if isinstance(outcome, Declined):
            self.log.info("the DAG run's Spark driver did not take %s (%s): submitting its own spark-submit",
                          self.job, outcome.reason)
            return None
        self.log.info("%s ran in the DAG run's Spark driver (%s) and exited %d", self.job, path, outcome)
        return outcome

    def on_kill(self) -> None:
        client = getattr(self, "_driver_client", None)
        if client is not None:   # the job runs in the run's driver: it ends with the connection, as if killed
            client.close()
            return
        super().on_kill()


def driver_submit_command(hook: SparkSubmitHook) -> list[str]:
    """The spark-submit command `hook` would run for the shared driver, without the hook's log line of it
    (a task that runs its job in the driver would otherwise log a spark-submit it never ran)."""
    own = hook.__dict__.get("_log")
    hook._log = _QUIET
    try:
        return hook._build_spark_submit_command(str(DRIVER_APPLICATION))
    finally:
        hook._log = own


_QUIET = logging.getLogger("statekeeper_airflow.driver_command")
_QUIET.setLevel(logging.WARNING)


def driver_command(command: Sequence[str], java_options: Sequence[str], drop: Sequence[str] = ()) -> list[str]:
    """A spark-submit `command` of the shared driver up to its application, without the options in `drop`
    (and their values) and without the Java options starting with one of `java_options`."""
    out: list[str] = []
    args = iter(command)
    for arg in args:
        if arg == str(DRIVER_APPLICATION):
            break
        if arg in drop:
            next(args, None)
            continue
        key, sep, value = arg.partition("=")
        out.append(f"{key}={without_options(value, java_options)}" if sep and key in JAVA_OPTION_KEYS
                   else arg)
    return out


def with_driver_java_option(command: Sequence[str], option: str) -> list[str]:
    """A spark-submit `command` (up to its application) whose driver's Java options end with `option`."""
    key = "spark.driver.extraJavaOptions"
    out = list(command)
    for i, arg in enumerate(out):
        if i and out[i - 1] == "--conf" and arg.startswith(f"{key}="):
            out[i] = f"{key}={with_java_options({key: arg[len(key) + 1:]}, option)}"
            return out
    return [*out, "--conf", f"{key}={option}"]


def _driver_env() -> dict[str, str]:
    """What spark-submit's driver and executors need of this process's environment: the venv's Python
    (same library on both sides), the library on the path, Java, the caches."""
    return {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(LIBRARY), os.environ.get("PYTHONPATH", "")])),
        "PATH": os.environ.get("PATH", ""),
        **{k: v for k, v in os.environ.items() if k in ("JAVA_HOME", "STATEKEEPER_CACHE", "HOME")},
    }


def _connection_env(conn_id: str, *, prefix: str = "") -> dict[str, str]:
    """The storage variables of connection `conn_id` ({} for ''), names prefixed by `prefix`; its
    secrets are masked in the task log from here on."""
    if not conn_id:
        return {}
    conn = BaseHook.get_connection(conn_id)
    extra = conn.extra_dejson if conn.extra else {}
    env = storage_env_from_connection(conn.conn_type, conn.login, conn.password, extra, prefix=prefix,
                                      host=conn.host)
    for key in secret_env_names(prefix):
        if key in env:
            mask_secret(env[key])
    return env


def secret_env_names(prefix: str = "") -> list[str]:
    """SECRET_ENV as a store with variable prefix `prefix` spells them."""
    return [env_names.prefixed_env_name(key, prefix) for key in SECRET_ENV]


def report_page_url() -> str:
    """Where the Airflow UI shows the latest report (statekeeper_airflow.report_page)."""
    from airflow.configuration import conf

    base = (conf.get("api", "base_url", fallback="") or "").rstrip("/")
    return f"{base}/plugin/statekeeper" if base else "/plugin/statekeeper"


class RunOutcomeOperator(BaseOperator):
    """A leaf that fails when any upstream task failed, so the run ends failed.

    The `report` task runs after every step whatever happened (trigger rule all_done: the report of a
    failed run is the one people need) and would otherwise be the only leaf: Airflow sets a run's state
    from its leaves, so a successful report would mark a run whose validation failed as successful.
    Skipped when nothing failed."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trigger_rule", "one_failed")
        kwargs.setdefault("retries", 0)
        kwargs.setdefault("doc_md", "Fails when any task before it failed, so the run's state is not the report's; "
                                    "skipped otherwise.")
        super().__init__(**kwargs)

    def execute(self, context: Any) -> None:
        raise AirflowFailException("an upstream task failed (see the run's grid and that task's log); the report "
                                   "task still wrote this run's report")


def spark_submit_exit_code(exc: BaseException) -> int | None:
    """spark-submit's exit code from the exception the provider's hook raised, None if it is not
    about a spark-submit exit.

    The hook keeps the process (and so its return code) only in a private attribute, which a
    provider upgrade may rename; the exception it raises is its one public report of the exit, and
    its message carries the code. The command precedes the code and the process's last output lines
    follow it, so the last match before that output is the hook's own. Should the format ever
    change, the code is None and the task is retried (never failed for good by mistake);
    tests/orchestration/test_operator_exit_codes.py runs a real failing spark-submit through the hook to catch that.
    """
    head = str(exc).split(SPARK_SUBMIT_TAIL, 1)[0]
    codes = SPARK_SUBMIT_CODE.findall(head)
    return int(codes[-1]) if codes else None


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


def _truthy(value: bool | str) -> bool:
    """A rendered `enabled`: booleans, and the strings true/false/1/0/yes/no/on/off/'' (case-insensitive)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off", "", "none"):
        return False
    raise AirflowFailException(f"enabled must render to true or false, got {value!r}")

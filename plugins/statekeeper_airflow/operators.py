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

import json
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Sequence

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseHook, BaseOperator, Connection
from airflow.sdk.exceptions import AirflowException, AirflowFailException
from statekeeper import registry
# Absolute, not relative: Airflow's plugin manager also loads this file as a top-level module.
from statekeeper.launch.jars import spark_conf as jvm_parts_conf
from statekeeper.launch.jvm_startup import local_network
from statekeeper.launch.session import is_local_master
from statekeeper.launch.warm_driver.client import Declined, DriverClient
from statekeeper.launch.warm_driver.protocol import DriverGone, fingerprint, library_digest, run_key, socket_path
from statekeeper_airflow.connections import DR_ENV_PREFIX, StatekeeperConfigError, connection_env
from statekeeper_airflow.submission import (LIBRARY, SPARK_JOBS, SUBMISSION_JAVA_OPTIONS, Submission,
                                            driver_command, driver_env, driver_submit_command, job_conf, library_zip,
                                            local_master_conf, spark_submit_exit_code, with_deployment_java_options)
from statekeeper_airflow.submit_env import (DRIVER_ENV_PREFIX, cluster_kind, connection_master, read_properties,
                                            scoped_environ, spark_defaults_file, write_properties_file)



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
        (statekeeper.launch.warm_driver): `command` (driver_submit_command of the task's hook) up to the application
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
                "(python -m statekeeper.dev.airflow_settings) or create it in the UI"
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
        env = driver_env()
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
        storage_env = {**connection_env(self.storage_conn_id),
                       **connection_env(self.target_storage_conn_id, prefix=DR_ENV_PREFIX)}
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
        self.py_files = library_zip(str(sub.tmp_dir))
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
        """The job's exit code from the DAG run's shared driver (statekeeper.launch.warm_driver), or None when
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

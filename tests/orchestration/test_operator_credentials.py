"""Storage credentials stay out of argv, mappings and reprs.

* `StorageConfig.to_mapping()` masks secrets unless asked for them, and a masked mapping cannot be
  mistaken for real credentials;
* with a YARN or Kubernetes Spark connection the operator hands the credentials to spark-submit in a
  private properties file (mode 0600, removed afterwards), never as `--conf` arguments; the command
  is the one the provider's SparkSubmitHook builds, and for YARN the one a real spark-submit ran;
* the target store's connection (`target_storage_conn_id`, copy_to_dr's DR store) travels the same
  ways under STATEKEEPER_DR_* names, the names StorageConfig.target_from_env reads: in the
  spark-submit process's environment on a local master, in the properties file on a cluster one;
  never on argv, masked in the task log, and it does not leak into the source's AWS_* variables.
"""
from __future__ import annotations

import copy
import json
import os
import stat
import uuid
from pathlib import Path
from typing import Any

import pytest

from statekeeper.storage import StorageConfig
from statekeeper.storage.errors import StorageConfigError
from tests.orchestration.support import plugin_module

# moto's dummy credentials, distinctive enough to find in any text.
KEY_ID = "AKIAMOTOTESTKEY0001"
SECRET = "moto/secret+Key=ForArgvTest"
TOKEN = "moto-session-token-ForArgvTest"
# The DR store's.
DR_KEY_ID = "AKIADRSTORETESTKEY02"
DR_SECRET = "dr/secret+Key=ForTargetTest"
DR_TOKEN = "dr-session-token-ForTargetTest"
DR_CONN = {
    "conn_type": "aws", "login": DR_KEY_ID, "password": DR_SECRET,
    "extra": {"endpoint_url": "http://127.0.0.1:19", "region_name": "eu-west-1", "addressing_style": "path",
              "aws_session_token": DR_TOKEN},
}
ALL_SECRETS = (KEY_ID, SECRET, TOKEN, DR_KEY_ID, DR_SECRET, DR_TOKEN)


# -- StorageConfig.to_mapping ---------------------------------------------------------------------

def test_mapping_and_repr_mask_secrets_by_default():
    cfg = StorageConfig(endpoint="http://127.0.0.1:1", access_key_id=KEY_ID, secret_access_key=SECRET,
                        session_token=TOKEN)
    mapping = cfg.to_mapping()
    assert mapping["secret_access_key"] == "***" and mapping["session_token"] == "***"
    assert mapping["access_key_id"] == KEY_ID and mapping["endpoint"] == "http://127.0.0.1:1"
    for text in (json.dumps(mapping), repr(cfg), str(cfg)):
        assert SECRET not in text and TOKEN not in text
    # The explicit opt-in still round-trips for the places that must ship the keys.
    full = cfg.to_mapping(include_secrets=True)
    assert full["secret_access_key"] == SECRET and full["session_token"] == TOKEN
    assert StorageConfig.from_mapping(full) == cfg


def test_masked_mapping_is_not_taken_for_credentials():
    cfg = StorageConfig(endpoint="http://127.0.0.1:1", access_key_id=KEY_ID, secret_access_key=SECRET)
    with pytest.raises(StorageConfigError, match="include_secrets=True"):
        StorageConfig.from_mapping(cfg.to_mapping())


# -- the operator on YARN and Kubernetes ----------------------------------------------------------

PREFIX = {"sk_yarn": "spark.yarn.appMasterEnv.", "sk_k8s": "spark.kubernetes.driverEnv."}


def _operator_class():
    return plugin_module("operators").StatekeeperSparkSubmitOperator


@pytest.fixture
def cluster_connections(monkeypatch, tmp_path):
    """Spark connections for YARN and Kubernetes, an 'aws' storage connection, and a cluster's
    spark-defaults.conf that must survive the switch to --properties-file."""
    pytest.importorskip("airflow.providers.apache.spark")
    from airflow.providers.apache.spark.hooks import spark_submit

    monkeypatch.setenv("AIRFLOW_CONN_SK_YARN", json.dumps({"conn_type": "spark", "host": "yarn"}))
    monkeypatch.setenv("AIRFLOW_CONN_SK_K8S", json.dumps({"conn_type": "spark",
                                                          "host": "k8s://https://127.0.0.1:6443"}))
    monkeypatch.setenv("AIRFLOW_CONN_SK_S3", json.dumps({
        "conn_type": "aws", "login": KEY_ID, "password": SECRET,
        "extra": {"endpoint_url": "http://127.0.0.1:9", "region_name": "us-east-1", "aws_session_token": TOKEN},
    }))
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("spark.statekeeper.probe  from-defaults\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    # The provider refuses a k8s:// master unless the cncf-kubernetes provider is installed (it is not
    # here); building the command never calls that client, it only checks that it was importable.
    if getattr(spark_submit, "kube_client", None) is None:
        monkeypatch.setattr(spark_submit, "kube_client", object(), raising=False)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return conf_dir


@pytest.mark.airflow
@pytest.mark.parametrize("spark_conn_id", ["sk_yarn", "sk_k8s"])
def test_cluster_submit_command_has_no_credentials(cluster_connections, spark_conn_id):
    op = _operator_class()(task_id=f"t_{uuid.uuid4().hex[:6]}", job="index_checkpoints",
                           spark_conn_id=spark_conn_id, storage_conn_id="sk_s3")
    with op.prepared_submission() as sub:
        # The provider has no public command builder; this is the method its submit() runs.
        argv = op._get_hook()._build_spark_submit_command(op.application)
        props = sub.properties_file
        assert props is not None
        mode = stat.S_IMODE(props.stat().st_mode)
        dir_mode = stat.S_IMODE(props.parent.stat().st_mode)
        text = props.read_text()
        # A client-mode driver is spark-submit's child: it reads them from the environment.
        seen_env = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")}
    joined = "\n".join(argv)
    assert "TieredStopAtLevel" not in joined  # cluster drivers keep the JVM's default compilers
    for value in (KEY_ID, SECRET, TOKEN):
        assert value not in joined, f"credential on the spark-submit command line: {argv}"
    assert argv[argv.index("--properties-file") + 1] == str(props)
    assert mode == 0o600 and dir_mode == 0o700
    prefix = PREFIX[spark_conn_id]
    lines = text.splitlines()
    assert f"{prefix}AWS_ACCESS_KEY_ID={KEY_ID}" in lines
    assert f"{prefix}AWS_SECRET_ACCESS_KEY={SECRET.replace('=', chr(92) + '=')}" in lines
    assert f"{prefix}AWS_SESSION_TOKEN={TOKEN}" in lines
    assert "spark.statekeeper.probe  from-defaults" in lines  # spark-defaults.conf kept
    assert seen_env == {"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_SESSION_TOKEN": TOKEN}
    # Afterwards: file and directory gone, environment restored.
    assert not props.exists() and not props.parent.exists()
    assert "AWS_SECRET_ACCESS_KEY" not in os.environ and op.properties_file is None


@pytest.mark.airflow
def test_yarn_execute_runs_spark_submit_without_credentials_in_argv(cluster_connections):
    """A real spark-submit for YARN (it stops early: no Hadoop configuration here)."""
    from airflow.exceptions import AirflowException

    op = _operator_class()(task_id="t_yarn_exec", job="index_checkpoints", spark_conn_id="sk_yarn",
                           storage_conn_id="sk_s3", job_args=["--roots", "file:///nonexistent"])
    with pytest.raises(AirflowException):
        op.execute({})
    argv = op._hook._submit_sp.args  # the argv the process really had
    assert all(v not in " ".join(argv) for v in (KEY_ID, SECRET, TOKEN)), argv
    props = Path(argv[argv.index("--properties-file") + 1])
    assert not props.exists() and not props.parent.exists()
    assert "AWS_SECRET_ACCESS_KEY" not in os.environ


@pytest.mark.spark
def test_spark_submit_loads_the_written_file_and_the_defaults(cluster_connections, tmp_path):
    """What Spark 4.2 itself reads from the file (its --verbose listing redacts the secret)."""
    import subprocess
    import sys

    submit_env = plugin_module("submit_env")
    spark_defaults_file, write_properties_file = submit_env.spark_defaults_file, submit_env.write_properties_file

    props = write_properties_file(tmp_path / "p.properties",
                                  {"spark.yarn.appMasterEnv.AWS_SECRET_ACCESS_KEY": SECRET},
                                  base=spark_defaults_file(os.environ))
    probe = tmp_path / "probe.py"
    probe.write_text("print('probe ran')\n")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    proc = subprocess.run([str(Path(sys.executable).with_name("spark-submit")), "--verbose", "--master", "local[1]",
                           "--properties-file", str(props), str(probe)],
                          env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "(spark.statekeeper.probe,from-defaults)" in out
    assert "(spark.yarn.appMasterEnv.AWS_SECRET_ACCESS_KEY,*********(redacted))" in out
    assert SECRET not in out


# -- the target store's connection (STATEKEEPER_DR_*) ---------------------------------------------

def test_target_connection_maps_onto_what_the_job_reads():
    """Every name prefixed, and StorageConfig.target_from_env (what copy_to_dr calls) reads them back."""
    connections = plugin_module("connections")
    from statekeeper.storage.config import DR_PREFIX

    assert connections.DR_ENV_PREFIX == DR_PREFIX
    env = connections.storage_env_from_connection("aws", DR_KEY_ID, DR_SECRET, DR_CONN["extra"], prefix=DR_PREFIX)
    assert env == {
        "STATEKEEPER_DR_AWS_ACCESS_KEY_ID": DR_KEY_ID,
        "STATEKEEPER_DR_AWS_SECRET_ACCESS_KEY": DR_SECRET,
        "STATEKEEPER_DR_AWS_SESSION_TOKEN": DR_TOKEN,
        "STATEKEEPER_DR_AWS_REGION": "eu-west-1",
        "STATEKEEPER_DR_AWS_DEFAULT_REGION": "eu-west-1",
        "STATEKEEPER_DR_S3_ENDPOINT": "http://127.0.0.1:19",
        "STATEKEEPER_DR_S3_PATH_STYLE": "true",
    }
    assert StorageConfig.target_from_env(env) == StorageConfig(
        endpoint="http://127.0.0.1:19", region="eu-west-1", access_key_id=DR_KEY_ID, secret_access_key=DR_SECRET,
        session_token=DR_TOKEN, path_style=True)
    # The source's settings are not the target's, and vice versa.
    assert StorageConfig.from_env(env) == StorageConfig()
    assert StorageConfig.target_from_env({"AWS_SECRET_ACCESS_KEY": SECRET, "AWS_ACCESS_KEY_ID": KEY_ID}) is None
    with pytest.raises(connections.StatekeeperConfigError, match="target_storage_conn_id empty"):
        connections.storage_env_from_connection("postgres", "u", "p", {}, prefix=DR_PREFIX)


@pytest.fixture
def dr_connection(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SK_DR", json.dumps(DR_CONN))
    for name in list(os.environ):
        if name.startswith("STATEKEEPER_DR_"):
            monkeypatch.delenv(name)


@pytest.mark.airflow
@pytest.mark.parametrize("spark_conn_id", ["sk_yarn", "sk_k8s"])
def test_cluster_submit_carries_the_target_connection_in_the_properties_file(cluster_connections, dr_connection,
                                                                             spark_conn_id):
    op = _operator_class()(task_id=f"t_{uuid.uuid4().hex[:6]}", job="copy_to_dr", spark_conn_id=spark_conn_id,
                           storage_conn_id="sk_s3", target_storage_conn_id="sk_dr")
    with op.prepared_submission() as sub:
        argv = op._get_hook()._build_spark_submit_command(op.application)
        props = sub.properties_file
        lines = props.read_text().splitlines()
        mode = stat.S_IMODE(props.stat().st_mode)
        seen_env = {k: v for k, v in os.environ.items() if k.startswith("STATEKEEPER_DR_")}
    joined = "\n".join(argv)
    for value in ALL_SECRETS:
        assert value not in joined, f"credential on the spark-submit command line: {argv}"
    assert "STATEKEEPER_DR_" not in joined
    assert mode == 0o600
    prefix = PREFIX[spark_conn_id]
    assert f"{prefix}STATEKEEPER_DR_AWS_ACCESS_KEY_ID={DR_KEY_ID}" in lines
    assert f"{prefix}STATEKEEPER_DR_AWS_SECRET_ACCESS_KEY={DR_SECRET.replace('=', chr(92) + '=')}" in lines
    assert f"{prefix}STATEKEEPER_DR_AWS_SESSION_TOKEN={DR_TOKEN}" in lines
    assert f"{prefix}STATEKEEPER_DR_S3_ENDPOINT=http\\://127.0.0.1\\:19" in lines
    assert f"{prefix}AWS_ACCESS_KEY_ID={KEY_ID}" in lines  # the source's, unprefixed, beside them
    # A client-mode driver reads them from spark-submit's environment.
    assert seen_env["STATEKEEPER_DR_AWS_SECRET_ACCESS_KEY"] == DR_SECRET
    assert seen_env["STATEKEEPER_DR_AWS_ACCESS_KEY_ID"] == DR_KEY_ID
    assert not props.exists() and not any(k.startswith("STATEKEEPER_DR_") for k in os.environ)


@pytest.fixture
def recording_spark_submit(tmp_path, monkeypatch):
    """A local Spark connection and a spark-submit stand-in that records its argv and environment."""
    pytest.importorskip("airflow.providers.apache.spark")
    monkeypatch.setenv("AIRFLOW_CONN_SK_DR_LOCAL", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    record = tmp_path / "record"
    record.mkdir()
    script = tmp_path / "spark-submit"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{record}/argv"\nenv > "{record}/env"\nexit 0\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), record


def _local_operator(binary: str, source: str) -> Any:
    """A copy_to_dr task on the local Spark connection, submitting through the recording spark-submit."""
    op = _operator_class()(task_id=f"t_{uuid.uuid4().hex[:6]}", job="copy_to_dr", spark_conn_id="sk_dr_local",
                           spark_binary=binary, storage_conn_id=source, target_storage_conn_id="sk_dr",
                           job_args=["--warehouse", "/nonexistent"])
    assert "target_storage_conn_id" in op.template_fields
    return op


def _submit_locally(binary: str, record: Path, source: str) -> tuple[str, dict[str, str]]:
    """Execute a local copy_to_dr task through the recording spark-submit: (argv as one argument a line, the
    environment it ran with)."""
    _local_operator(binary, source).execute({})
    env = dict(line.split("=", 1) for line in (record / "env").read_text().splitlines() if "=" in line)
    return (record / "argv").read_text(), env


def _driver_java_options(argv: str) -> str:
    return next(a for a in argv.splitlines() if a.startswith("spark.driver.extraJavaOptions="))


@pytest.mark.airflow
@pytest.mark.parametrize("source", ["", "sk_s3"])
def test_local_submit_gets_the_target_connection_in_its_environment(cluster_connections, dr_connection,
                                                                    recording_spark_submit, source):
    """What the spark-submit process really received, through the provider's hook, on a local master."""
    from airflow.sdk.log import redact

    before = dict(os.environ)
    argv, env = _submit_locally(*recording_spark_submit, source)
    for value in ALL_SECRETS:
        assert value not in argv, argv
    assert "--properties-file" not in argv
    # A local driver is a short-lived JVM: C1 only, next to the log4j setting the task always carries.
    java = _driver_java_options(argv)
    assert "-Dlog4j2.configurationFile=file:" in java and "-XX:TieredStopAtLevel=1" in java, java
    assert env["STATEKEEPER_DR_AWS_ACCESS_KEY_ID"] == DR_KEY_ID
    assert env["STATEKEEPER_DR_AWS_SECRET_ACCESS_KEY"] == DR_SECRET
    assert env["STATEKEEPER_DR_AWS_SESSION_TOKEN"] == DR_TOKEN
    assert env["STATEKEEPER_DR_S3_ENDPOINT"] == "http://127.0.0.1:19"
    assert env["STATEKEEPER_DR_AWS_REGION"] == "eu-west-1"
    if source:
        assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) == (KEY_ID, SECRET)
        assert env["STATEKEEPER_S3_ENDPOINT"] == "http://127.0.0.1:9"
    else:  # the DR credentials never become the source's
        assert not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} & set(env)
    # Masked in anything the task logs from now on.
    masked = redact(f"secret {DR_SECRET} token {DR_TOKEN}")
    assert DR_SECRET not in masked and DR_TOKEN not in masked
    assert dict(os.environ) == before


@pytest.mark.airflow
def test_local_submit_writes_the_class_archive_only_without_a_configuration_directory(
        cluster_connections, dr_connection, recording_spark_submit, tmp_path, monkeypatch):
    """A local driver's class-data-sharing archive (statekeeper.launch.jvm_startup), in a cache of the test's own: whether
    an archive exists must not depend on which tests ran before."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("STATEKEEPER_CACHE", str(cache))
    # SPARK_CONF_DIR holds a spark-defaults.conf (cluster_connections), which the JDK refuses to dump an archive
    # over, and the empty cache has none to map: neither option.
    java = _driver_java_options(_submit_locally(*recording_spark_submit, "")[0])
    assert "-XX:SharedArchiveFile=" not in java and "-XX:ArchiveClassesAtExit=" not in java, java
    # Without a configuration directory the first local driver writes the archive into the cache at exit.
    monkeypatch.delenv("SPARK_CONF_DIR")
    java = _driver_java_options(_submit_locally(*recording_spark_submit, "")[0])
    assert f"-XX:ArchiveClassesAtExit={cache / 'jvm'}/" in java, java


@pytest.mark.airflow
def test_an_operator_executed_again_submits_as_the_first_time(cluster_connections, dr_connection,
                                                               recording_spark_submit, tmp_path, monkeypatch):
    """A retry or dag.test executes the same operator object again in one process. The second submission must not
    start from what the first wrote into the task: its conf carried the first driver's JVM options, whose archive
    path was a temporary name of the first submission."""
    monkeypatch.setenv("STATEKEEPER_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SPARK_CONF_DIR")   # so that a local driver is given an archive to write
    binary, record = recording_spark_submit
    op = _local_operator(binary, "sk_s3")
    own = (copy.deepcopy(op.conf), copy.deepcopy(op.env_vars), op.properties_file, copy.deepcopy(op.application_args),
           op.py_files)
    seen = []
    for _ in range(2):
        op.execute({})
        seen.append(_driver_java_options((record / "argv").read_text()))
        # the library zip is built when the task submits (not beforehand), and shipped
        assert "--py-files" in (record / "argv").read_text() and "statekeeper.zip" in (record / "argv").read_text()
        assert (op.conf, op.env_vars, op.properties_file, op.application_args, op.py_files) == own
    for java in seen:
        assert java.count("-XX:ArchiveClassesAtExit=") == 1 and java.count("-XX:TieredStopAtLevel=1") == 1, java


@pytest.mark.airflow
def test_a_local_driver_gets_a_heap_sized_to_the_machine_unless_one_was_chosen(cluster_connections, dr_connection,
                                                                               recording_spark_submit, tmp_path,
                                                                               monkeypatch):
    """Spark's 1 GiB default made a local GC plan at a million objects spill its kept frames (statekeeper.launch.jvm_startup):
    a local driver gets local_driver_memory. The task's driver_memory or conf, or the deployment's spark-defaults.conf
    or SPARK_DRIVER_MEMORY, decide instead, as they would for plain spark-submit (a --conf would silently replace
    the file's value)."""
    from statekeeper.launch.jvm_startup import local_driver_memory, machine_memory

    binary, record = recording_spark_submit
    monkeypatch.delenv("SPARK_DRIVER_MEMORY", raising=False)

    def submitted(**kwargs: Any) -> list[str]:
        _operator_class()(task_id=f"t_{uuid.uuid4().hex[:6]}", job="copy_to_dr", spark_conn_id="sk_dr_local",
                          spark_binary=binary, job_args=["--warehouse", "/nonexistent"], **kwargs).execute({})
        return (record / "argv").read_text().splitlines()

    def heaps(argv: list[str]) -> list[str]:
        return [a for a in argv if a.startswith("spark.driver.memory=")]

    expected = local_driver_memory(machine_memory())
    argv = submitted()
    assert expected is not None and heaps(argv) == [f"spark.driver.memory={expected}"]
    assert "spark.buffer.pageSize=16m" in argv   # the pages Spark chose for its 1 GiB default, not 64 MiB ones
    argv = submitted(driver_memory="3g")
    assert heaps(argv) == [] and argv[argv.index("--driver-memory") + 1] == "3g"
    assert heaps(submitted(conf={"spark.driver.memory": "2g"})) == ["spark.driver.memory=2g"]
    monkeypatch.setenv("SPARK_DRIVER_MEMORY", "4g")   # spark-submit's last resort, a --conf would override it
    assert heaps(submitted()) == []
    monkeypatch.delenv("SPARK_DRIVER_MEMORY")
    (cluster_connections / "spark-defaults.conf").write_text("spark.driver.memory 5g\n")
    assert heaps(submitted()) == []


@pytest.mark.airflow
def test_a_local_driver_stays_on_loopback_unless_the_deployment_chose_its_address(cluster_connections, dr_connection,
                                                                                 recording_spark_submit, monkeypatch):
    """The rule a job started by hand follows too (statekeeper.launch.jvm_startup.local_network): RPC server and block
    manager on 127.0.0.1, the UI too (SPARK_LOCAL_IP in the driver's environment), kill links off; an address the
    deployment's spark-defaults.conf or the environment chose stays (a --conf would silently replace the file's)."""
    binary, record = recording_spark_submit
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    monkeypatch.delenv("SPARK_LOCAL_HOSTNAME", raising=False)

    def submitted(**kwargs: Any) -> tuple[list[str], dict[str, str]]:
        _operator_class()(task_id=f"t_{uuid.uuid4().hex[:6]}", job="copy_to_dr", spark_conn_id="sk_dr_local",
                          spark_binary=binary, job_args=["--warehouse", "/nonexistent"], **kwargs).execute({})
        env = dict(line.split("=", 1) for line in (record / "env").read_text().splitlines() if "=" in line)
        return (record / "argv").read_text().splitlines(), env

    def addresses(argv: list[str]) -> list[str]:
        return sorted(a for a in argv if a.startswith(("spark.driver.bindAddress=", "spark.driver.host=")))

    argv, env = submitted()
    assert addresses(argv) == ["spark.driver.bindAddress=127.0.0.1", "spark.driver.host=127.0.0.1"]
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1" and "spark.ui.killEnabled=false" in argv
    (cluster_connections / "spark-defaults.conf").write_text("spark.driver.host driver.example\n")
    argv, env = submitted()
    assert addresses(argv) == [] and env["SPARK_LOCAL_IP"] == "127.0.0.1"
    (cluster_connections / "spark-defaults.conf").write_text("")
    argv, env = submitted(env_vars={"SPARK_LOCAL_IP": "10.1.2.3"})
    assert addresses(argv) == [] and env["SPARK_LOCAL_IP"] == "10.1.2.3"


# -- the deployment's own Java options ------------------------------------------------------------

@pytest.mark.unit
def test_properties_are_read_as_spark_submit_reads_them(tmp_path):
    """Java `Properties.load` as Spark uses it: each separator, comments, continuations, escapes; and back what
    write_properties_file wrote, byte for byte."""
    submit_env = plugin_module("submit_env")
    conf = tmp_path / "spark-defaults.conf"
    conf.write_text("# a comment\n! another\n\n"
                    "spark.driver.extraJavaOptions   -Da=1 -Db=2  \n"
                    "spark.executor.extraJavaOptions=-Dc=3\n"
                    "spark.x.colon : value with spaces\n"
                    "spark.x.continued = one \\\n    two\n"
                    "spark.x.escaped = a\\=b\\u00e9\\\\\n"
                    "spark.x.last = ends \\")
    assert submit_env.read_properties(conf) == {
        "spark.driver.extraJavaOptions": "-Da=1 -Db=2", "spark.executor.extraJavaOptions": "-Dc=3",
        "spark.x.colon": "value with spaces", "spark.x.continued": "one two", "spark.x.escaped": "a=b\u00e9\\",
        "spark.x.last": "ends"}
    written = {"spark.yarn.appMasterEnv.SECRET": "a=b:c #!\\ \u00e9\u4e2d\U0001f600\n", "k ey": "v"}
    path = submit_env.write_properties_file(tmp_path / "p.properties", written, base=conf)
    read = submit_env.read_properties(path)
    assert {k: read[k] for k in written} == {"spark.yarn.appMasterEnv.SECRET": "a=b:c #!\\ \u00e9\u4e2d\U0001f600",
                                             "k ey": "v"}  # Spark trims values, as read here
    assert read["spark.executor.extraJavaOptions"] == "-Dc=3"


@pytest.mark.airflow
def test_a_deployments_java_options_stay_in_front_of_the_jobs(cluster_connections, dr_connection,
                                                              recording_spark_submit, tmp_path, monkeypatch):
    """Every job passes its log4j setting as `--conf spark.{driver,executor}.extraJavaOptions`, which replaces the
    same key of spark-defaults.conf: the operator keeps the deployment's options (a trust store, an agent) in front of
    its own. A task that sets extraJavaOptions in its own conf gets exactly those, as with spark-submit."""
    binary, record = recording_spark_submit
    conf_dir = tmp_path / "site-conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        "spark.driver.extraJavaOptions  -Djavax.net.ssl.trustStore=/etc/site.jks\n"
        "spark.executor.extraJavaOptions=-javaagent:/opt/site-agent.jar\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    argv = _submit_locally(binary, record, "")[0]
    driver = _driver_java_options(argv).split("=", 1)[1]
    executor = next(a for a in argv.splitlines() if a.startswith("spark.executor.extraJavaOptions=")).split("=", 1)[1]
    assert driver.startswith("-Djavax.net.ssl.trustStore=/etc/site.jks -Dlog4j2.configurationFile=file:"), driver
    assert "-XX:TieredStopAtLevel=1" in driver, driver
    assert executor.startswith("-javaagent:/opt/site-agent.jar -Dlog4j2.configurationFile=file:"), executor

    own = _operator_class()(task_id=f"t_{uuid.uuid4().hex[:6]}", job="copy_to_dr", spark_conn_id="sk_dr_local",
                            spark_binary=binary, conf={"spark.executor.extraJavaOptions": "-Dmine=1"},
                            job_args=["--warehouse", "/nonexistent"])
    own.execute({})
    argv = (record / "argv").read_text()
    assert "spark.executor.extraJavaOptions=-Dmine=1" in argv.splitlines()
    assert "site.jks" in _driver_java_options(argv)  # the key it left alone still carries the site's

    # A task's own properties file replaces spark-defaults.conf for spark-submit, and here.
    props = tmp_path / "task.properties"
    props.write_text("spark.driver.extraJavaOptions -Dfrom.task.file=1\n")
    task = _operator_class()(task_id=f"t_{uuid.uuid4().hex[:6]}", job="copy_to_dr", spark_conn_id="sk_dr_local",
                             spark_binary=binary, properties_file=str(props), job_args=["--warehouse", "/nonexistent"])
    task.execute({})
    driver = _driver_java_options((record / "argv").read_text()).split("=", 1)[1]
    assert driver.startswith("-Dfrom.task.file=1 -Dlog4j2") and "site.jks" not in driver, driver

    # A properties file that is not there is the task's configuration error, named, before spark-submit runs.
    (record / "argv").unlink()
    missing = _operator_class()(task_id=f"t_{uuid.uuid4().hex[:6]}", job="copy_to_dr", spark_conn_id="sk_dr_local",
                                spark_binary=binary, properties_file=str(tmp_path / "gone.properties"),
                                job_args=["--warehouse", "/nonexistent"])
    with pytest.raises(plugin_module("operators").StatekeeperConfigError,
                       match="gone.properties does not exist"):
        missing.execute({})
    assert not (record / "argv").exists()

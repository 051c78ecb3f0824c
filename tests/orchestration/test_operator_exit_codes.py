"""The operator's exit-code handling, through its public execute() and the provider's real hook.

spark-submit is replaced by a tiny shell script (the operator's `spark_binary`) that records its
argv and environment and exits with a chosen code, so the provider's SparkSubmitHook really runs a
process, sees it fail and raises what it raises on a failed spark-submit. Nothing of the operator
or the hook is mocked: a provider upgrade that changes how a failed submit is reported fails here.

* codes in the job's `final_exit_codes` (statekeeper.jobs.registry) fail the task for good
  (AirflowFailException, naming the registry's meaning of the code);
* every other failing code raises a plain, retryable AirflowException;
* a manual run's `spark_master` replaces the connection's master on the command line.
"""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from statekeeper.jobs import registry
from tests.orchestration.support import plugin_module

pytestmark = pytest.mark.airflow
# Printed by the fake spark-submit: its output lands in the hook's message after the real code.
DECOY = "Error code is: 0."


def _operator_module():
    return plugin_module("operators")


@pytest.fixture
def fake_spark_submit(tmp_path, monkeypatch):
    """A Spark connection on a local master and a factory of spark-submit stand-ins: make(code)
    returns (binary, record) where the run leaves its argv and environment in `record`."""
    pytest.importorskip("airflow.providers.apache.spark")
    monkeypatch.setenv("AIRFLOW_CONN_SK_EXIT_LOCAL", json.dumps({"conn_type": "spark", "host": "local[1]"}))

    def make(code: int) -> tuple[str, Path]:
        record = tmp_path / f"record-{code}"
        record.mkdir()
        script = tmp_path / f"spark-submit-{code}"
        script.write_text(
            "#!/bin/sh\n"
            f'printf "%s\\n" "$@" > "{record}/argv"\n'
            f'env > "{record}/env"\n'
            f'echo "{DECOY}"\n'
            f"exit {code}\n"
        )
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        return str(script), record

    return make


def _operator(spec: registry.JobSpec, binary: str, **kwargs):
    return _operator_module().StatekeeperSparkSubmitOperator(
        task_id=f"t_{spec.name}", job=spec.entry_point, spark_conn_id="sk_exit_local", spark_binary=binary,
        job_args=["--warehouse", "/nonexistent"], **kwargs)


CASES = [(spec, code) for spec in registry.JOBS for code in (1, 2, 3, 7)]


@pytest.mark.parametrize(("spec", "code"), CASES, ids=[f"{s.name}-{c}" for s, c in CASES])
def test_failing_submit_is_final_or_retried_per_registry(fake_spark_submit, spec, code):
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    binary, record = fake_spark_submit(code)
    op = _operator(spec, binary)
    assert op.final_exit_codes == spec.final_exit_codes
    with pytest.raises(AirflowException) as caught:
        op.execute({})
    assert (record / "argv").is_file(), "the fake spark-submit did not run"
    message = str(caught.value)
    if code in spec.final_exit_codes:
        assert caught.type is AirflowFailException
        assert message.startswith(f"{spec.entry_point} exited {code}: {spec.meaning(code)}. Not retried.")
        # The hook's own report stays attached for the log.
        assert f"Error code is: {code}." in str(caught.value.__cause__)
    else:
        assert caught.type is AirflowException, caught.type  # retried
        assert f"Error code is: {code}." in message
        assert DECOY in message  # the process's output follows the code and is not mistaken for it


def test_final_exit_codes_override(fake_spark_submit):
    """A task may make the index's exit 1 final; the message is still the registry's meaning."""
    from airflow.sdk.exceptions import AirflowFailException

    binary, _ = fake_spark_submit(1)
    op = _operator(registry.INDEX, binary, final_exit_codes=(1, 2))
    with pytest.raises(AirflowFailException, match=r"index_checkpoints exited 1: partial: "):
        op.execute({})


def test_exit_zero_returns_the_result(fake_spark_submit):
    binary, _ = fake_spark_submit(0)
    assert _operator(registry.VALIDATE, binary).execute({}) is None  # the fake writes no --result-json


@pytest.mark.parametrize("override", ["", "local[3]"])
def test_spark_master_override_reaches_spark_submit(fake_spark_submit, override):
    binary, record = fake_spark_submit(0)
    before = dict(os.environ)
    _operator(registry.CHAINS, binary, spark_master=override).execute({})
    argv = (record / "argv").read_text().splitlines()
    assert argv[argv.index("--master") + 1] == (override or "local[1]")
    # The one-off connection carrying the override exists only while the hook is built.
    env = (record / "env").read_text()
    assert "AIRFLOW_CONN_STATEKEEPER_MASTER" not in env
    assert dict(os.environ) == before


def test_registry_validates_job_and_final_codes():
    operators = _operator_module()
    with pytest.raises(operators.StatekeeperConfigError, match="no Statekeeper job named 'reindex'"):
        operators.StatekeeperSparkSubmitOperator(task_id="t_bad_job", job="reindex")
    for codes in ((0,), (9,), (1,)):  # OK, outside every contract, not in chains' contract
        with pytest.raises(operators.StatekeeperConfigError, match="final_exit_codes of compute_chains"):
            operators.StatekeeperSparkSubmitOperator(task_id="t_bad_codes", job="compute_chains",
                                                     final_exit_codes=codes)
    op = operators.StatekeeperSparkSubmitOperator(task_id="t_short", job="validate")
    assert Path(op.application).name == "validate_checkpoints.py"
    assert op.final_exit_codes == (1, 2)


@pytest.mark.parametrize(("message", "code"), [
    ("Cannot execute: spark-submit --master local[1] app.py. Error code is: 2.", 2),
    ("Cannot execute: spark-submit app.py. Error code is: -9.\nLast spark-submit output:\nError code is: 1.", -9),
    ("Cannot execute: spark-submit app.py --x 'Error code is: 1.'. Error code is: 3.", 3),
    ("Cannot execute: spark-submit app.py. Error code is: 0. Kubernetes spark exit code is: 1", 0),
    ("No driver id is known: something went wrong when executing the spark submit command", None),
])
def test_spark_submit_exit_code_from_message(message, code):
    from airflow.sdk.exceptions import AirflowException

    assert plugin_module("submission").spark_submit_exit_code(AirflowException(message)) == code

#!/usr/bin/env python
"""One Spark driver for a whole DAG run (thin entry point; statekeeper.launch.warm_driver).

Started under spark-submit by a DAG run's setup task, with the settings every task of the run submits
with; each task then runs its job in it instead of a spark-submit of its own, and the run's teardown
stops it (or it exits after --idle-timeout seconds without a job):

    spark-submit spark_jobs/spark_driver.py --socket "$DIR/<run>.sock" --fingerprint <digest>

Not a job: it writes no table of its own. Exit status 0 when stopped or idle, 143 when a task went
away while its job ran (the job is stopped with the driver, as a killed spark-submit's would be)."""
try:
    from statekeeper.launch.warm_driver.server import main
except ImportError as _exc:  # spark-submit with a Python that lacks the library
    raise SystemExit(f"cannot import statekeeper ({_exc}): run `make setup` (installs it into .venv), or ship it "
                     "with --py-files statekeeper.zip (the Airflow operator does)") from _exc

if __name__ == "__main__":
    raise SystemExit(main())

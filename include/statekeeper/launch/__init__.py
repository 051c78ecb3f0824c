"""Everything that starts a job: the entry point every `spark_jobs/` script runs (`entrypoint`), the session it runs
in (`session`, `codegen`), the JVM parts it needs (`jars`), its JVM's start-up settings (`jvm_startup`), the Python
its Spark workers import (`pyspark_path`, `pyspark_daemon`), and a DAG run's shared driver (`warm_driver`).

Nothing here is imported at package import: the Airflow plugin takes `session.is_local_master`,
`jvm_startup`'s settings and the warm driver's client while DAGs are parsed, so each module keeps its own imports
light (pyspark, pyarrow, storage and tables only inside the functions that start Spark).
"""

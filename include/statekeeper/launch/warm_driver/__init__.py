"""One Spark driver for a whole DAG run: the JVM starts once and every task's job runs in it, warm.

A spark-submit per task pays a new JVM, Spark's start-up and the first Spark jobs' JIT every time
(about 12 s on 2 cores, more than most steps' own work on a small store). A DAG run's setup task
starts this driver under spark-submit, with the settings every task of the run would submit with; each
task then sends its entry point and arguments over a private Unix socket, streams the job's log lines
into its own task log and gets the job's exit code, exactly as from its own spark-submit. The
run's teardown task stops it; so does an idle timeout, should the teardown never run.

It only ever speeds a task up, never changes what it does:
* a task whose settings differ from the driver's (master, Spark conf, storage connections, library
  code: `protocol.fingerprint`) is refused and submits its own spark-submit, as does a task that finds
  no driver, a driver busy with another task, or a non-local master;
* a task that ends while its job runs (killed, timed out, marked failed) takes the driver with it, as
  it would take its own spark-submit: the driver exits at once and later tasks submit their own;
* jobs run one at a time in the driver's main thread, through the same `entrypoint.run` as under
  spark-submit, in the one Spark session (the way the tests have always run several jobs).

`protocol` (standard library) holds the socket layout and the messages, `client` the task's side,
`server` the driver's (which imports pyspark).
"""

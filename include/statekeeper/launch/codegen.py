"""Whether a run's Spark driver compiles the code it evaluates outside tasks, or interprets it.

Spark compiles with Janino the projections, predicates and orderings it evaluates on the driver (those
of collecting a result, of a local relation, of building a broadcast side) on their first use. Every
step the DAG submits is a fresh JVM, too young to have compiled Janino itself, so on a small store that
compiling is a large share of a step. Interpreting it, interleaved on the sample store (~160 objects,
local[2], `python -m bench pipeline_floor --against`): chains 12.0 -> 11.0 s, GC plan 11.2 -> 9.4 s,
14-16% less CPU. Tasks keep their compiled code either way: Spark reads the key only outside tasks.

On a large store it costs: what the driver evaluates grows with the store (broadcast sides, collected
plans). `python -m bench scale`, interpreted against compiled: at 100,000 objects chains 14.5/17.9 s,
validation 28.5/32.3 s, GC 16.0/14.4 s; at a million validation 90/69 s and GC 83/38 s. So the store's
size decides, as its newest index run counted the objects it listed. (Interpreting the tasks' plans as
well, `spark.sql.codegen.wholeStage=false`, gained nothing on the sample store.) A deployment that set
the key keeps its choice, and a cluster keeps Spark's default. Spark lists the key as internal, meant
for its own tests, which run both ways; a Spark without it ignores the setting.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from statekeeper.launch.session import deployment_conf, on_local_master

FACTORY_MODE = "spark.sql.codegen.factoryMode"
INTERPRETED = "NO_CODEGEN"
# Interpreting won at 100,000 objects for two steps of three and lost for GC; it lost far more at a million.
INTERPRETED_BELOW_OBJECTS = 50_000


def driver_interprets(conf: Mapping[str, str], store_objects: int | None) -> bool | None:
    """Interpret (True), compile as Spark does by default (False), or leave the session alone (None), for
    a run over a store of `store_objects` objects (None: the run reads no index, so its size is unknown).
    `conf` is what the deployment set (spark-submit, spark-defaults.conf, the session's builder)."""
    if FACTORY_MODE in conf or not on_local_master(conf):
        return None
    return store_objects is not None and store_objects < INTERPRETED_BELOW_OBJECTS


def fit_codegen(spark: Any, store_objects: int | None) -> bool | None:
    """Set the session for a run (driver_interprets) and say what was set. Spark's default is restored
    rather than left as an earlier run in a shared session (the warm driver, a notebook) chose it."""
    interprets = driver_interprets(deployment_conf(spark), store_objects)
    if interprets:
        spark.conf.set(FACTORY_MODE, INTERPRETED)
    elif interprets is False:
        spark.conf.unset(FACTORY_MODE)
    return interprets

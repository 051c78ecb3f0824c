"""Reference chains across jobs (FLINK-24149): which directories each snapshot's files live in,
who keeps each job directory / savepoint alive, and the lineage of restores.

    statekeeper.layout.locate       pure: the target (directory) and relation of a referenced file
    statekeeper.chains.graph        pure: transitive lineage (reference implementation)
    statekeeper.chains.spark_graph  the same as Spark DataFrame transformations
    statekeeper.chains.job          ComputeChains builder -> ChainsResult (writes dependencies, pins)
    statekeeper.chains.explain      read side for `statekeeper explain` (deltalake, no Spark)
"""
from statekeeper.chains.errors import ChainDepthError, ChainsError
from statekeeper.chains.tables import CHAINS_RUNS, DEPENDENCIES, PINS

__all__ = ["CHAINS_RUNS", "DEPENDENCIES", "PINS", "ChainDepthError", "ChainsError"]

"""Reference chains across jobs (FLINK-24149): which directories each snapshot's files live in,
who keeps each job directory / savepoint alive, and the lineage of restores.

    statekeeper.chains.graph        pure: transitive lineage (reference implementation)
    statekeeper.chains.spark_graph  the same as Spark DataFrame transformations
    statekeeper.chains.job          ComputeChains builder -> ChainsResult (writes dependencies, pins)

`statekeeper explain`, which reads these tables without Spark, is statekeeper.inspect.explain. Where a referenced
file lives is statekeeper.layout.locate; the tables are specified in
statekeeper.tables.catalog.chains.
"""

"""Flink's checkpoint/savepoint directory layout, shared by the index, chains and validation.

    statekeeper.layout.classify  pure: the layout class of an object below its root, and of a root's child directory
    statekeeper.layout.locate    pure: the target (owning directory) and relation of a referenced file
    statekeeper.layout.spark_locate  the same over Spark DataFrames: file uses and direct edges
"""

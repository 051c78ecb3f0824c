"""Tests of statekeeper.validate (pure checks, the Spark job, real-Flink damage cases)."""

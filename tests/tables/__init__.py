"""Tests of statekeeper.tables (Delta table IO with and without Spark)."""

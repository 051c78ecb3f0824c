"""Tests of statekeeper.chains (reference chains: pure rules, the Spark graph, the job)."""

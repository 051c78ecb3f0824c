"""Tests of statekeeper.jobs: the registry, the builder base and the contract every job shares."""

"""Tests of statekeeper.index (layout classification, planning, the index job) and its entry point."""

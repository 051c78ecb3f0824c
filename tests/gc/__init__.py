"""Tests of statekeeper.gc."""

"""Tests of statekeeper.storage (FileIO, roots, storage config) and statekeeper.uri."""

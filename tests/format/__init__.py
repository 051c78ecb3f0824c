"""Tests of statekeeper.format (the `_metadata` codec) and the `statekeeper inspect` command."""

"""Tests of the real-Flink test harness itself (tests/harness)."""

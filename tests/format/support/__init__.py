"""Helpers for codec tests: hand-built models covering every record kind, and a Java
serialization writer for CheckpointProperties trailers (real trailers come from the harness)."""

"""Flink's own reading of `_metadata` files (the codec's ground truth), via the Java Oracle."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from tests.harness.runner import HarnessRunError, run_java, tail


def run_oracle(version: str, metadata_paths: list[Path], heap: str = "1g", timeout: float = 600,
               jvm_opts: tuple[str, ...] = ()) -> list[dict]:
    """One dict per file, in order (schema in tests/harness/README.md).

    Files are loaded with `Checkpoints.loadCheckpointMetadata` of Flink `version` in ONE JVM; a file
    Flink cannot load yields `{"path": ..., "error": "<exception class>: <message>"}`. `heap` sizes
    the JVM for huge files; `jvm_opts` are appended last (they win), e.g.
    `("-XX:TieredStopAtLevel=4",)` for full JIT when benchmarking Flink's reader.
    """
    paths = [str(Path(p).absolute()) for p in metadata_paths]
    if not paths:
        return []
    with tempfile.TemporaryDirectory(prefix="statekeeper-oracle-") as work:
        listing = Path(work) / "paths.txt"
        output = Path(work) / "oracle.jsonl"
        listing.write_text("\n".join(paths) + "\n")
        run = run_java(version, "Oracle", [str(listing), str(output)], timeout=timeout,
                       jvm_opts=(f"-Xmx{heap}", *jvm_opts))
        results = [json.loads(line) for line in output.read_text().splitlines()] if output.exists() else []
    if run.returncode != 0 or len(results) != len(paths):
        raise HarnessRunError(f"oracle (Flink {version}) exited {run.returncode} with {len(results)}/"
                              f"{len(paths)} results:\n{tail(run.output)}")
    return results


def named_paths(reading: dict) -> list[str]:
    """Every path one reading of `run_oracle` names, as Flink spells it: file handles, referenced files and
    managed directories. Inline handles name none: the file name they keep is a label Flink never opens."""
    named = [h["path"] for h in reading["handles"] if h["path"]] + [f["path"] for f in reading["referenced_files"]]
    return named + [d for h in reading["handles"] for d in h["managed_dirs"] or ()]

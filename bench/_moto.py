"""`EnforcingMotoServer`: the benchmarks' S3 endpoint (bench/_moto_server.py says why it is not SeaweedFS): moto with
the preconditions S3 enforces and moto ignores enforced, its DeleteObjects made as cheap as S3's, and, with
`seed=True`, a hook that creates objects inside the server without a request each. Benchmarks only."""
from __future__ import annotations

import json
import os
import sys
import urllib.request
from pathlib import Path

from tests.plugins.s3 import MotoServer

_REPO = Path(__file__).resolve().parents[1]


class EnforcingMotoServer(MotoServer):
    name = "moto_server (bench)"

    def __init__(self, log_path: Path, *, seed: bool = False) -> None:
        self.seed = seed
        super().__init__(log_path)

    def _argv_env(self) -> tuple[list[str], dict[str, str]]:
        argv, env = super()._argv_env()
        env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(_REPO), os.environ.get("PYTHONPATH", "")])),
                   STATEKEEPER_MOTO_SEED="1" if self.seed else "0")
        return [sys.executable, "-m", "bench._moto_server", *argv[3:]], env

    def seed_objects(self, bucket: str, objects: list[tuple[str, int]]) -> None:
        """Create objects of these keys and sizes inside the server (one started with `seed=True`): ordinary moto
        objects (ETags, sizes, listings as if PUT), with distinct contents."""
        if not self.seed:
            raise RuntimeError("seed_objects needs a server started with seed=True")
        for start in range(0, len(objects), 20_000):
            body = json.dumps({"bucket": bucket, "objects": objects[start:start + 20_000]}).encode()
            request = urllib.request.Request(f"{self.endpoint}/_statekeeper/seed", data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=600) as resp:
                if resp.status != 200:
                    raise RuntimeError(f"seeding {bucket} failed: {resp.status}")

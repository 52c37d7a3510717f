"""A real OTLP receiver on loopback for the telemetry tests: Arize Phoenix (HTTP and gRPC), installed by
scripts/setup.sh in .venv-otlp; spans are read back through its REST API."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

from lab_support import free_port

PHOENIX = Path(__file__).resolve().parents[1] / ".venv-otlp" / "bin" / "phoenix"


class Receiver:
    def __init__(self, http_port: int, grpc_port: int):
        self.http = f"http://127.0.0.1:{http_port}"
        self.grpc = f"http://127.0.0.1:{grpc_port}"

    def spans(self, project: str, expect: int, timeout: float = 60.0) -> list[dict[str, Any]]:
        """The project's spans once at least ``expect`` have arrived (ingestion is asynchronous)."""
        deadline = time.monotonic() + timeout
        found: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.http}/v1/projects/{project}/spans?limit=1000", timeout=10) as r:
                    found = json.load(r)["data"]
            except urllib.error.HTTPError as exc:
                if exc.code != 404:  # the project appears with its first span
                    raise
            if len(found) >= expect:
                return found
            time.sleep(0.2)
        raise AssertionError(f"{len(found)} spans in {project!r} after {timeout}s, expected {expect}: "
                             f"{[s['name'] for s in found]}")


@contextlib.contextmanager
def running_receiver(workdir: Path) -> Iterator[Receiver]:
    assert PHOENIX.exists(), "the OTLP receiver is missing: run scripts/setup.sh (it installs .venv-otlp)"
    http_port, grpc_port = free_port(), free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(workdir), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_PORT": str(http_port), "PHOENIX_GRPC_PORT": str(grpc_port), "PHOENIX_TELEMETRY_ENABLED": "false"}
    log = open(workdir / "phoenix.log", "w")
    proc = subprocess.Popen([str(PHOENIX), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/healthz", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("the OTLP receiver did not start: "
                                         + (workdir / "phoenix.log").read_text()[-2000:]) from None
                time.sleep(0.25)
        yield Receiver(http_port, grpc_port)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()

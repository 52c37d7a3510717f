"""LiteLLM's proxy, a real third-party OpenAI-compatible server, on 127.0.0.1 for the provider tests.

It runs from its own venv (``.venv-litellm``, made by ``scripts/setup.sh --litellm``; ``AGIO_LITELLM`` names another
``litellm`` executable) and fully offline: its one model points at a closed loopback port, and every
request carries LiteLLM's mock parameters (``mock_response``, ``mock_tool_calls``, ``mock_delay``) in
``extra_body``, so the proxy answers itself. Its cost map is read from the package, not fetched.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MASTER_KEY = "sk-agio-litellm-master-0123456789"
MODEL = "mock-gpt"

CONFIG = f"""\
model_list:
  - model_name: {MODEL}
    litellm_params:
      model: openai/{MODEL}
      api_key: upstream-never-called
      api_base: http://127.0.0.1:9/v1
general_settings:
  master_key: {MASTER_KEY}
"""


def litellm_executable() -> Path:
    path = Path(os.environ.get("AGIO_LITELLM") or ROOT / ".venv-litellm" / "bin" / "litellm")
    if not path.exists():
        raise RuntimeError(f"LiteLLM's proxy is not installed at {path}: run scripts/setup.sh "
                           "--litellm (it makes .venv-litellm from tests/requirements-litellm.txt)")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiteLLMProxy:
    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.port = _free_port()
        self.log = workdir / "litellm.log"
        self.process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout: float = 180.0) -> LiteLLMProxy:
        config = self.workdir / "litellm.yaml"
        config.write_text(CONFIG)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LITELLM_", "DATABASE_"))}
        env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_TELEMETRY="False", NO_PROXY="*",
                   HOME=str(self.workdir))
        self.process = subprocess.Popen(
            [str(litellm_executable()), "--config", str(config), "--host", "127.0.0.1", "--port", str(self.port),
             "--num_workers", "1"], cwd=self.workdir, env=env, stdout=self.log.open("wb"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"LiteLLM's proxy exited ({self.process.returncode}):\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health/liveliness", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"LiteLLM's proxy did not come up in {timeout:g}s:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:  # uvicorn's graceful stop waits for clients' keep-alive connections to close: not for long
                self.process.wait(3)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

"""The Jupyter server extension: kernel websockets with Nagle's algorithm off, installed with the package
and loaded by a real JupyterLab, whose kernels still run code through it. (What it saves is measured by
bench/kernel_relay.py.)"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request
import uuid

import pytest
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from agio_notebook_server import NoDelay, _load_jupyter_server_extension, without_nagle
from lab_support import running_lab, server_log


class Connection:
    """A connection class as jupyter_server's: ``connect`` on a handler whose websocket is open."""

    def __init__(self, handler):
        self.websocket_handler = handler

    def connect(self):
        return ("connected", list(self.websocket_handler.calls))


class Handler:
    def __init__(self, open_: bool = True):
        self.ws_connection = object() if open_ else None
        self.calls: list[bool] = []

    def set_nodelay(self, value: bool) -> None:
        self.calls.append(value)


def test_the_connection_turns_nagle_off_before_it_connects():
    connection = without_nagle(Connection)(Handler())
    assert connection.connect() == ("connected", [True])
    assert issubclass(without_nagle(Connection), Connection) and without_nagle(without_nagle(Connection)) is without_nagle(Connection)
    closed = without_nagle(Connection)(Handler(open_=False))  # no websocket (yet): nothing to set
    assert closed.connect() == ("connected", [])


def test_loading_keeps_the_servers_own_connection_class():
    class Log:
        def debug(self, *args): pass

    class App:
        log = Log()
        kernel_websocket_connection_class = Connection

        class web_app:
            settings: dict = {}

    _load_jupyter_server_extension(App)
    chosen = App.web_app.settings["kernel_websocket_connection_class"]
    assert issubclass(chosen, NoDelay) and issubclass(chosen, Connection)
    _load_jupyter_server_extension(App)  # loaded twice: still one layer
    assert App.web_app.settings["kernel_websocket_connection_class"] is chosen


@pytest.fixture
def lab_env(kernelspec_dir, tmp_path):
    env = {**os.environ, "AGIO_STORE": str(tmp_path / "store")}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL"):
        env.pop(name, None)
    return tmp_path, env


async def execute(base: str, token: str, code: str) -> list[dict]:
    """Run ``code`` in a new kernel through the kernel websocket; the iopub messages up to idle."""
    request = urllib.request.Request(f"{base}/api/kernels?token={token}", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
    kernel_id = json.loads(urllib.request.urlopen(request, timeout=60).read())["id"]
    url = base.replace("http", "ws", 1) + f"/api/kernels/{kernel_id}/channels?token={token}"
    ws = await websocket_connect(HTTPRequest(url, request_timeout=60))
    msg_id = uuid.uuid4().hex
    ws.write_message(json.dumps({
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "test", "session": uuid.uuid4().hex,
                   "version": "5.3", "date": ""},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                    "allow_stdin": False}}))
    seen = []
    while True:
        message = json.loads(await ws.read_message())
        if message.get("parent_header", {}).get("msg_id") != msg_id or message["channel"] != "iopub":
            continue
        seen.append(message)
        if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
            ws.close()
            return seen


def test_a_real_lab_loads_it_from_the_installed_config_and_its_kernels_run_through_it(lab_env):
    root, env = lab_env
    with running_lab(root, env) as (base, token):
        outputs = asyncio.run(execute(base, token, "print('through', 6 * 7)"))
    assert [m["content"]["text"] for m in outputs if m["msg_type"] == "stream"] == ["through 42\n"]
    log = server_log(root).read_text()
    assert "agio_notebook_server | extension was successfully loaded" in log, log[-3000:]

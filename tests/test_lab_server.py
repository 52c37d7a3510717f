"""The Jupyter server extension: kernel websockets with Nagle's algorithm off, installed with the package
and loaded by a real JupyterLab, whose kernels still run code through it. (What it saves is measured by
bench/kernel_relay.py.)"""

from __future__ import annotations

import asyncio

from agio_notebook_server import NoDelay, _load_jupyter_server_extension, without_nagle
from lab_support import kernel_iopub, running_lab, server_log


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


async def execute(base: str, token: str, code: str) -> list[dict]:
    return [message async for _, message in kernel_iopub(base, token, code)]


def test_a_real_lab_loads_it_from_the_installed_config_and_its_kernels_run_through_it(lab_env):
    root, env = lab_env
    with running_lab(root, env) as (base, token):
        outputs = asyncio.run(execute(base, token, "print('through', 6 * 7)"))
    assert "".join(m["content"]["text"] for m in outputs if m["msg_type"] == "stream") == "through 42\n"
    log = server_log(root).read_text()
    assert "agio_notebook_server | extension was successfully loaded" in log, log[-3000:]

"""The Jupyter server side of agio-notebook: kernel messages reach the browser without Nagle's delay;
the Runs panel reads the store (``agio_notebook_server.runs``, a second extension point); a notebook
saved while a run or batch goes on keeps its snapshot, not a widget (``agio_notebook_server.snapshots``).

Tornado leaves Nagle's algorithm on for websockets (``WebSocketHandler.set_nodelay``), and jupyter_server
does not turn it off for kernel websockets. A burst of small kernel messages (a run's live view, then a
step-mode pause) then has its later packets held back until the browser acknowledges the first, which
the browser's TCP stack delays by up to 40 ms on Linux. This server extension turns Nagle off for every
kernel websocket, over whatever connection class the server is configured with.

Its own top-level package, so the server does not import the engine (``agio_notebook``) to load it.
Enabled by ``jupyter-config/jupyter_server_config.d/agio_notebook_server.json``, installed with the package.
"""

from __future__ import annotations

from functools import cache
from typing import Any


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "agio_notebook_server"}, {"module": "agio_notebook_server.runs"},
            {"module": "agio_notebook_server.snapshots"}]


class NoDelay:
    """Mixed into the kernel websocket's connection class: Nagle off as the kernel connection opens."""

    websocket_handler: Any

    def connect(self) -> Any:
        handler = getattr(self, "websocket_handler", None)
        if handler is not None and getattr(handler, "ws_connection", None) is not None:
            handler.set_nodelay(True)
        return super().connect()  # type: ignore[misc]


@cache
def without_nagle(base: type) -> type:
    """``base`` (a kernel websocket connection class) with Nagle's algorithm off."""
    if issubclass(base, NoDelay):
        return base
    return type(f"NoDelay{base.__name__}", (NoDelay, base), {"__module__": __name__})


def _load_jupyter_server_extension(serverapp: Any) -> None:
    settings = serverapp.web_app.settings
    base = settings.get("kernel_websocket_connection_class") or serverapp.kernel_websocket_connection_class
    settings["kernel_websocket_connection_class"] = without_nagle(base)
    serverapp.log.debug("agio_notebook_server: kernel websockets send without Nagle's delay")

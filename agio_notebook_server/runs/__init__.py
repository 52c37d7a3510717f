"""The Runs panel's side of the server: read-only REST over the store and a push channel for updates.

Loaded by the server with the package's other extension point (``agio_notebook_server``). Loading it
registers routes, and has the store's worker thread open the store (importing the engine, ``agio_notebook``)
while the server starts, so the panel's first page is ready when it is asked (``store.py``); the server's
own thread imports no engine.
"""

from __future__ import annotations

from typing import Any

from .changes import ChangeFeed
from .handlers import routes
from .store import PanelStore


def _load_jupyter_server_extension(serverapp: Any) -> None:
    store = PanelStore(serverapp.root_dir)
    web_app = serverapp.web_app
    web_app.add_handlers(".*$", routes(web_app.settings["base_url"], store, ChangeFeed(store)))
    store.warm()
    serverapp.log.debug("agio_notebook_server.runs: the Runs panel reads the store at %s", store.where)

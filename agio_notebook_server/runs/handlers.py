"""The panel's endpoints under ``<base_url>/agio/api/``: read-only REST, and a websocket for updates.

    GET store                 which store, and who reads it
    GET runs?agent=&status=&notebook=&user=&text=&session_id=&limit=&cursor=    a page of runs, newest first
    GET facets                the values each filter can take
    GET runs/<id>             a run's transcript (the saved cell output's MIME data)
    GET diff?a=<run>&b=<run>  two runs side by side
    GET tree/<session>        a session's runs, retries and forks
    GET progress              the class dashboard (a teacher's role on a classroom store)
    WS  updates               {"type": "changed" | "store", ...} as the store changes (changes.py)

Every answer is JSON; a failure is ``{"message": one line}`` with a 4xx or 5xx status. A store that does not
exist yet is ``state: none`` from ``store`` (with the line that says how one comes to be) and a 404 elsewhere.
Reading is authorised as reading the server's files is (``contents``): the store lives among them.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized, ws_authenticated
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from tornado import web, websocket

from . import views
from .changes import ChangeFeed
from .store import PanelError, PanelStore


class ViewHandler(APIHandler):
    """Runs one view on the store's worker thread, with the path's parts and the query's arguments it names,
    and writes its answer (and the damage it met) as JSON."""

    auth_resource = "contents"

    def initialize(self, store: PanelStore, view: Callable[..., dict[str, Any]], query: tuple[str, ...] = ()) -> None:
        self.store, self.view, self.query = store, view, query

    @web.authenticated
    @authorized
    async def get(self, *path: str) -> None:
        params = {name: self.get_argument(name, "") for name in self.query}
        try:
            data, damage = await self.store.call(lambda: self.view(self.store, *path, **params))
        except PanelError as exc:
            self.set_status(exc.status)
            self.finish(json.dumps({"message": str(exc), "where": self.store.where}))
            return
        if damage:
            data["damage"] = damage
        self.finish(json.dumps(data, default=str))


class UpdatesSocket(JupyterHandler, websocket.WebSocketHandler):
    """Pushes the feed's messages to one panel; the state it is in comes first."""

    def initialize(self, feed: ChangeFeed) -> None:
        self.feed = feed

    async def pre_get(self) -> None:
        user = self.current_user
        if not await ensure_async(self.authorizer.is_authorized(self, user, "read", "contents")):
            raise web.HTTPError(403)

    @ws_authenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        await ensure_async(self.pre_get())
        res = super().get(*args, **kwargs)
        if res is not None:
            await res

    def open(self, *args: Any, **kwargs: Any) -> None:
        self.write_message(json.dumps(self.feed.state))
        self.feed.subscribe(self._send)

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self.write_message(json.dumps(message))
        except websocket.WebSocketClosedError:
            self.feed.unsubscribe(self._send)

    def on_message(self, message: Any) -> None:
        """The panel says nothing; a message is ignored."""

    def on_close(self) -> None:
        self.feed.unsubscribe(self._send)


def routes(base: str, store: PanelStore, feed: ChangeFeed) -> list[tuple[str, type, dict[str, Any]]]:
    api = base.rstrip("/") + "/agio/api"

    def view(fn: Callable[..., dict[str, Any]], *query: str) -> dict[str, Any]:
        return {"store": store, "view": fn, "query": query}

    return [(f"{api}/store", ViewHandler, view(views.status)),
            (f"{api}/runs", ViewHandler, view(views.runs_page, *views.FILTERS, "limit", "cursor")),
            (f"{api}/facets", ViewHandler, view(views.facets)),
            (f"{api}/runs/([^/]+)", ViewHandler, view(views.transcript)),
            (f"{api}/diff", ViewHandler, view(views.diff, "a", "b")),
            (f"{api}/tree/([^/]+)", ViewHandler, view(views.tree)),
            (f"{api}/progress", ViewHandler, view(views.progress)),
            (f"{api}/updates", UpdatesSocket, {"feed": feed})]

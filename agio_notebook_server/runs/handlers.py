"""The panel's endpoints under ``<base_url>/agio/api/``: read-only REST, and a websocket for updates.

    GET store                 which store, and who reads it
    GET runs?agent=&status=&notebook=&user=&text=&session_id=&limit=&cursor=    a page of runs, newest first
    GET facets                the values each filter can take
    GET runs/<id>             a run's transcript (the saved cell output's MIME data)
    GET diff?a=<run>&b=<run>  two runs side by side
    GET tree/<session>        a session's runs, retries and forks
    GET progress              the class dashboard (a teacher's role on a classroom store)
    WS  updates               {"type": "changed" | "store", ...} as the store changes (changes.py)

Every answer is JSON; a failure is ``{"message": one line}`` with a 4xx or 5xx status, and a store that
does not exist yet is a 404 with the line that says how one comes to be.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import ws_authenticated
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from tornado import web, websocket

from . import views
from .changes import ChangeFeed
from .store import PanelError, PanelStore


class _Endpoint(APIHandler):
    """Runs one view on the store's worker thread and writes its answer (and the damage it met)."""

    def initialize(self, store: PanelStore) -> None:
        self.store = store

    async def answer(self, view: Callable[..., dict[str, Any]], *args: Any) -> None:
        try:
            data, damage = await self.store.call(view, self.store, *args)
        except PanelError as exc:
            self.set_status(exc.status)
            self.finish(json.dumps({"message": str(exc), "where": self.store.where}))
            return
        if damage:
            data["damage"] = damage
        self.finish(json.dumps(data, default=str))


class StoreHandler(_Endpoint):
    @web.authenticated
    async def get(self) -> None:
        await self.answer(views.status)


class RunsHandler(_Endpoint):
    @web.authenticated
    async def get(self) -> None:
        params = {k: self.get_argument(k, "") for k in (*views.FILTERS, "limit", "cursor")}
        await self.answer(views.runs_page, params)


class FacetsHandler(_Endpoint):
    @web.authenticated
    async def get(self) -> None:
        await self.answer(views.facets)


class RunHandler(_Endpoint):
    @web.authenticated
    async def get(self, run_id: str) -> None:
        await self.answer(views.transcript, run_id)


class DiffHandler(_Endpoint):
    @web.authenticated
    async def get(self) -> None:
        await self.answer(views.diff, self.get_argument("a", ""), self.get_argument("b", ""))


class TreeHandler(_Endpoint):
    @web.authenticated
    async def get(self, session_id: str) -> None:
        await self.answer(views.tree, session_id)


class ProgressHandler(_Endpoint):
    @web.authenticated
    async def get(self) -> None:
        await self.answer(views.progress)


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
    given = {"store": store}
    return [(f"{api}/store", StoreHandler, given), (f"{api}/runs", RunsHandler, given),
            (f"{api}/facets", FacetsHandler, given), (f"{api}/runs/([^/]+)", RunHandler, given),
            (f"{api}/diff", DiffHandler, given), (f"{api}/tree/([^/]+)", TreeHandler, given),
            (f"{api}/progress", ProgressHandler, given), (f"{api}/updates", UpdatesSocket, {"feed": feed})]

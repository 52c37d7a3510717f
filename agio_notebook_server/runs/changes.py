"""The panel's push channel: what changed in the store, told to every open panel within moments.

One feed per server follows the store while any panel listens: PostgreSQL's ``LISTEN agio_changes`` (the
store's triggers announce every change to runs, steps and named journals), or the files of a TinyDB or SQLite
store (``watchfiles``: inotify, or polling where the file system has none). Messages:

    {"type": "changed", "runs": null | [], "journals": [names]}   null: runs may have changed, []: none did
    {"type": "store", "state": "ok" | "none" | "down", "message": one line}

A database that goes away (restarted during a class) is said once (``down``), retried with a growing
pause, and on its return the panels hear ``ok`` and ``changed`` (what they missed is read again).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Any, Callable

from .store import PanelStore

log = logging.getLogger(__name__)

GATHER = 0.1  # seconds: changes arriving together are told together (a class of thirty commits 150 times a second)
IDLE = 0.5  # seconds between looks for a store that does not exist yet
RETRY = (0.2, 0.5, 1.0, 2.0)  # pauses before connecting again to a database that went away

Listener = Callable[[dict[str, Any]], None]


class ChangeFeed:
    def __init__(self, store: PanelStore):
        self.store = store
        self._listeners: set[Listener] = set()
        self._task: asyncio.Task[None] | None = None
        self.state: dict[str, Any] = {"type": "store", "state": "ok"}

    def subscribe(self, listener: Listener) -> None:
        self._listeners.add(listener)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._follow())

    def unsubscribe(self, listener: Listener) -> None:
        self._listeners.discard(listener)
        if not self._listeners and self._task is not None:
            self._task.cancel()
            self._task = None

    async def close(self) -> None:
        self._listeners.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    def _tell(self, message: dict[str, Any]) -> None:
        for listener in list(self._listeners):
            try:
                listener(message)
            except Exception:  # noqa: BLE001 - one closed socket must not stop the others hearing
                log.debug("agio panel listener failed", exc_info=True)

    def _set_state(self, state: str, message: str | None = None) -> None:
        changed = self.state.get("state") != state  # said once: a database down for a minute is not 60 lines
        self.state = {"type": "store", "state": state, **({"message": message} if message else {})}
        if changed:
            self._tell(self.state)

    async def _follow(self) -> None:
        try:
            if self.store.kind == "postgres":
                await self._follow_database()
            else:
                await self._follow_files()
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a feed that stops is logged; the panel still reads on demand
            log.exception("agio panel: the change feed stopped")

    # -- TinyDB and SQLite: the files ------------------------------------------------------------
    async def _follow_files(self) -> None:
        from watchfiles import awatch

        while True:
            if not self.store.exists():
                self._set_state("none", self.store.none_yet())
                await asyncio.sleep(IDLE)
                continue
            if self.state["state"] != "ok":
                self._set_state("ok")
                self._tell({"type": "changed", "runs": None, "journals": []})
            path = self.store.path
            assert path is not None
            if self.store.kind == "sqlite":  # the database and its write-ahead log, in their directory
                names = {path.name, path.name + "-wal"}
                watched, recursive = path.parent, False
                keep = lambda _change, name: name.rsplit("/", 1)[-1] in names  # noqa: E731
            else:  # every journal of the store: session files, the run index, memory, progress...
                watched, recursive = path, True
                keep = lambda _change, name: name.endswith(".jsonl")  # noqa: E731
            stop = asyncio.Event()
            gone = asyncio.get_running_loop().create_task(self._until_gone(stop))
            caught_up = False
            try:
                async for changes in awatch(watched, watch_filter=keep, recursive=recursive, debounce=int(GATHER * 1000),
                                            step=20, stop_event=stop, rust_timeout=300, yield_on_timeout=True):
                    if not changes:  # the watch runs now: what was written before it began is read once
                        if not caught_up:
                            caught_up = True
                            self._tell({"type": "changed", "runs": None, "journals": []})
                        continue
                    named = [_journal_name(path, name) for _, name in changes] if self.store.kind == "tinydb" else [None]
                    self._tell({"type": "changed", "runs": None if None in named else [],
                                "journals": sorted({n for n in named if n is not None})})
            finally:
                gone.cancel()

    async def _until_gone(self, stop: asyncio.Event) -> None:
        while self.store.exists():
            await asyncio.sleep(IDLE)
        stop.set()

    # -- PostgreSQL: LISTEN ------------------------------------------------------------------------
    async def _follow_database(self) -> None:
        import psycopg

        from agio_notebook.core import scrub
        from agio_notebook.core.redact import url_secrets
        from agio_notebook.storage.postgres_repo import NOTIFY_CHANNEL

        url = self.store.target or ""
        attempt = 0
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(url, autocommit=True, connect_timeout=5) as conn:
                    await conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    attempt = 0
                    if self.state["state"] != "ok":
                        self._set_state("ok")
                        self._tell({"type": "changed", "runs": None, "journals": []})  # what was missed
                    await self._relay(conn)
            except psycopg.Error as exc:
                detail = scrub(" ".join(str(exc).split()), url_secrets(url))
                self._set_state("down", f"the store's database at {self.store.where} cannot be reached ({detail}); "
                                        "trying again")
                await asyncio.sleep(RETRY[min(attempt, len(RETRY) - 1)])
                attempt += 1

    async def _relay(self, conn: Any) -> None:
        while True:
            first = [n.payload async for n in conn.notifies(timeout=30.0, stop_after=1)]
            if not first:
                await conn.execute("SELECT 1")  # a quiet connection: make sure it is still there
                continue
            payloads = first + [n.payload async for n in conn.notifies(timeout=GATHER)]
            journals = sorted({p[len("journal:"):] for p in payloads if p.startswith("journal:")})
            self._tell({"type": "changed", "runs": None if "runs" in payloads else [], "journals": journals})


def _journal_name(root: Any, name: str) -> str | None:
    """The named journal a changed file of a TinyDB store is (None: a session file or the run index)."""
    try:
        rel = Path(name).relative_to(root)
    except ValueError:
        return None
    if rel.parts[0] in ("sessions", "index.jsonl") or rel.name.startswith("."):
        return None
    return rel.with_suffix("").as_posix()

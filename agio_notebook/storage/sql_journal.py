"""Named journals in a SQL store: the same small interface as a journal file of the TinyDB store.

Systems that keep records of their own beside the sessions (memory, execution records) ask the
repository for ``journal(name, keys)`` and get, on any backend, an object with ``tables`` (table ->
key -> doc, kept current by ``refresh``), ``append(records, deletes)`` (durable when it returns),
``on_change`` and ``close``.  Here a journal is the rows of ``agio_journal`` with its name; every
change gets a version number, so ``refresh`` reads only what changed since it last looked.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterable, Protocol, Sequence

import orjson

Doc = dict[str, Any]
KeyFn = Callable[[Doc], str]

TABLES = (
    "CREATE TABLE IF NOT EXISTS agio_journal (name TEXT NOT NULL, tbl TEXT NOT NULL, key TEXT NOT NULL, "
    "doc TEXT, version BIGINT NOT NULL, PRIMARY KEY (name, tbl, key))",
    "CREATE INDEX IF NOT EXISTS agio_journal_version ON agio_journal (name, version)",
)


class JournalRows(Protocol):
    """What a journal needs of its SQL store (``SQLRepository`` provides it)."""

    def _query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...
    def _append_journal(self, name: str, rows: list[tuple[str, str, str | None]]) -> None: ...


class SQLJournal:
    def __init__(self, repository: JournalRows, name: str, keys: dict[str, KeyFn]):
        self.repository = repository
        self.name = name
        self.keys = keys
        self.tables: dict[str, dict[str, Doc]] = {}
        self.on_change: Callable[[str, str, Doc | None], None] | None = None
        self.lock = threading.RLock()
        self.lines = 0
        self._version = 0

    def refresh(self, **_: Any) -> bool:
        """Apply the changes made since the last look (by this process or another); True if any."""
        rows = self.repository._query("SELECT tbl, key, doc, version FROM agio_journal WHERE name = ? AND version > ?"
                                      f"{self.repository.journal_scope} ORDER BY version", (self.name, self._version))
        for table, key, doc, version in rows:
            if doc is None:
                self.tables.get(table, {}).pop(key, None)
                parsed = None
            else:
                parsed = orjson.loads(doc)
                self.tables.setdefault(table, {})[key] = parsed
            if self.on_change is not None:
                self.on_change(table, key, parsed)
            self._version = max(self._version, int(version))
        return bool(rows)

    def append(self, records: Iterable[tuple[str, Doc]], deletes: Iterable[tuple[str, str]] = ()) -> None:
        """Upserts ``(table, doc)`` and deletes ``(table, key)`` in one transaction."""
        rows: list[tuple[str, str, str | None]] = []
        for table, doc in records:
            key = self.keys[table](doc) if table in self.keys else str(doc.get("id"))
            rows.append((table, key, orjson.dumps(doc).decode()))
        rows += [(table, key, None) for table, key in deletes]
        if not rows:
            return
        with self.lock:
            self.repository._append_journal(self.name, rows)
            self.lines += len(rows)
            self.refresh()

    def compact(self) -> bool:
        return True

    def close(self) -> None:
        """Nothing to release: the repository owns the connection."""

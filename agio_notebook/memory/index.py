"""The lexical index: SQLite FTS5 ranked with ``bm25()``, a derived file beside the memory journal.

FTS5 updates its inverted index incrementally, so adding a record is one small insert and a query
never rebuilds anything. The file is derived data: when it is missing, or disagrees with the
journal (another kernel wrote, a crash came between the two writes), :meth:`LexicalIndex.sync`
re-indexes exactly the records whose ``updated_at`` differ, and drops those no longer stored.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from pathlib import Path
from typing import Iterable

_WORD = re.compile(r"\w+", re.UNICODE)
# very common words match most records and only slow the ranking down; BM25 gives them ~0 weight anyway
STOPWORDS = frozenset("""a an and are as at be but by can do does for from had has have how i if in into is it
its me my no not of on or our so than that the their them then there these they this to was we were what
when where which who why will with you your""".split())


def query_terms(text: str, limit: int = 32) -> list[str]:
    """The words of a query worth matching, lower-cased, each once, in order."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if len(word) > 1 and word not in STOPWORDS:
            seen.setdefault(word, None)
    return list(seen)[:limit]


class LexicalIndex:
    """One FTS5 table of (kind, scope, body) keyed by record id; thread-safe."""

    def __init__(self, path: Path | str):
        self.path = str(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=OFF")  # derived data: a crash costs a re-sync, nothing more
        self._db.executescript("""
            CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(body, kind UNINDEXED, scope UNINDEXED,
                                                               tokenize='porter unicode61');
            CREATE TABLE IF NOT EXISTS ref (id TEXT PRIMARY KEY, rid INTEGER NOT NULL, updated REAL NOT NULL);
        """)

    def upsert(self, rows: Iterable[tuple[str, str, str, str, float]]) -> None:
        """Index ``(id, kind, scope, body, updated_at)`` rows, replacing earlier versions."""
        with self._lock:
            db = self._db
            db.execute("BEGIN")
            try:
                for rid_key, kind, scope, body, updated in rows:
                    old = db.execute("SELECT rid, updated FROM ref WHERE id=?", (rid_key,)).fetchone()
                    if old is not None:
                        if old[1] == updated:
                            continue  # same content (e.g. only the usage count moved)
                        db.execute("DELETE FROM docs WHERE rowid=?", (old[0],))
                    cur = db.execute("INSERT INTO docs(body, kind, scope) VALUES (?,?,?)", (body, kind, scope))
                    db.execute("INSERT OR REPLACE INTO ref(id, rid, updated) VALUES (?,?,?)",
                               (rid_key, cur.lastrowid, updated))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def delete(self, ids: Iterable[str]) -> None:
        with self._lock:
            db = self._db
            db.execute("BEGIN")
            for key in ids:
                old = db.execute("SELECT rid FROM ref WHERE id=?", (key,)).fetchone()
                if old is not None:
                    db.execute("DELETE FROM docs WHERE rowid=?", (old[0],))
                    db.execute("DELETE FROM ref WHERE id=?", (key,))
            db.execute("COMMIT")

    def versions(self) -> dict[str, float]:
        with self._lock:
            return dict(self._db.execute("SELECT id, updated FROM ref"))

    def search(self, text: str, kind: str, scopes: tuple[str, ...], k: int) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, score)`` of ``kind`` in ``scopes``; higher score is better."""
        terms = query_terms(text)
        if not terms or k <= 0:
            return []
        match = " OR ".join(f'"{t}"' for t in terms)
        marks = ",".join("?" * len(scopes))
        sql = (f"SELECT ref.id, bm25(docs) AS s FROM docs JOIN ref ON ref.rid = docs.rowid "
               f"WHERE docs MATCH ? AND docs.kind = ? AND docs.scope IN ({marks}) ORDER BY s LIMIT ?")
        with self._lock:
            rows = self._db.execute(sql, (match, kind, *scopes, k)).fetchall()
        return [(rid, -score) for rid, score in rows]  # bm25() is lower-is-better

    def close(self) -> None:
        with self._lock:
            self._db.close()

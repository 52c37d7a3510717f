"""The lexical index: BM25 by Tantivy (a Rust search library), a derived index beside the memory journal.

Tantivy keeps its index in segments and answers a top-k query without scoring every match (block-max
WAND), so retrieval stays fast as memory grows; SQLite FTS5's ``bm25()`` scores every matching row
and was ~30x over budget at 100k records. Updates are incremental: changed records are queued and
written as one small segment (delete by key, add) before the next query, under Tantivy's writer lock,
held only for that write so several kernels can share the store.

``versions.sqlite`` beside the index records which version (``updated_at``) of each record is
indexed. The index is derived data: when it is missing or disagrees with the journal (another kernel
appended, a crash between the two writes), :meth:`MemoryStore.sync_index` re-queues exactly the
records whose version differs.
"""

from __future__ import annotations

import math
import re
import sqlite3
import threading
import time
import warnings
from pathlib import Path
from typing import Iterable

import tantivy

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# very common words match most records and only slow the ranking down; BM25 gives them ~0 weight anyway
STOPWORDS = frozenset("""a an and are as at be but by can do does for from had has have how i if in into is it
its me my no not of on or our so than that the their them then there these they this to was we were what
when where which who why will with you your""".split())
_WRITER_HEAP = 15_000_000
_LOCK_WAIT_S = 10.0


def query_terms(text: str, limit: int = 32) -> list[str]:
    """The words of a query worth matching, lower-cased, each once, in order."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if len(word) > 1 and word not in STOPWORDS:
            seen.setdefault(word, None)
    return list(seen)[:limit]


def _analyzer() -> tantivy.TextAnalyzer:
    """Tantivy's ``en_stem`` chain (the body field's tokenizer), to read texts as the index reads them."""
    return (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).filter(tantivy.Filter.remove_long(40))
            .filter(tantivy.Filter.lowercase()).filter(tantivy.Filter.stemmer("english")).build())


def _schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("key", stored=True, tokenizer_name="raw")
    sb.add_text_field("filter", stored=False, tokenizer_name="raw")  # "<kind>|<scope>"
    sb.add_text_field("body", stored=False, tokenizer_name="en_stem")
    return sb.build()


Row = tuple[str, str, str, str, float]  # id, kind, scope, body, updated_at


class LexicalIndex:
    """Records keyed by id, searchable by kind and scope; thread-safe."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self.schema = _schema()
        self.index = tantivy.Index(self.schema, path=str(self.path))
        self._versions = sqlite3.connect(str(self.path / "versions.sqlite"), check_same_thread=False,
                                         isolation_level=None)
        self._versions.execute("PRAGMA journal_mode=WAL")
        self._versions.execute("CREATE TABLE IF NOT EXISTS ref (id TEXT PRIMARY KEY, updated REAL NOT NULL)")
        self._pending: dict[str, Row | None] = {}
        self._indexed: dict[str, float] = dict(self._versions.execute("SELECT id, updated FROM ref"))

    # -- updates: queued, written before the next query ------------------------------------
    def upsert(self, rows: Iterable[Row]) -> None:
        with self._lock:
            for row in rows:
                if self._indexed.get(row[0]) == row[4] and row[0] not in self._pending:
                    continue  # this version is indexed (e.g. only the usage count moved)
                self._pending[row[0]] = row

    def delete(self, ids: Iterable[str]) -> None:
        with self._lock:
            for key in ids:
                self._pending[key] = None

    def versions(self) -> dict[str, float]:
        with self._lock:
            return dict(self._indexed)

    def _writer(self) -> tantivy.IndexWriter:
        deadline = time.monotonic() + _LOCK_WAIT_S
        while True:
            try:
                return self.index.writer(heap_size=_WRITER_HEAP, num_threads=1)
            except ValueError:  # another kernel holds the writer lock for a moment
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def flush(self) -> int:
        """Write the queued changes as one commit; returns how many."""
        with self._lock:
            if not self._pending:
                return 0
            pending, self._pending = self._pending, {}
            writer = self._writer()
            try:
                for key, row in pending.items():
                    writer.delete_documents_by_term("key", key)
                    if row is not None:
                        writer.add_document(tantivy.Document(key=key, filter=f"{row[1]}|{row[2]}", body=row[3]))
                writer.commit()
                writer.wait_merging_threads()  # releases the writer lock for other kernels
            except BaseException:
                self._pending = {**pending, **self._pending}
                raise
            self.index.reload()
            db = self._versions
            db.execute("BEGIN")
            for key, row in pending.items():
                if row is None:
                    db.execute("DELETE FROM ref WHERE id=?", (key,))
                    self._indexed.pop(key, None)
                else:
                    db.execute("INSERT OR REPLACE INTO ref(id, updated) VALUES (?,?)", (key, row[4]))
                    self._indexed[key] = row[4]
            db.execute("COMMIT")
            return len(pending)

    # -- queries -----------------------------------------------------------------------------
    def search(self, text: str, kind: str, scopes: tuple[str, ...], k: int) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, BM25 score)`` of ``kind`` in ``scopes``, best first."""
        terms = query_terms(text)
        if not terms or k <= 0:
            return []
        try:
            self.flush()
        except ValueError as exc:  # the writer lock stayed busy: answer from the index as it is
            warnings.warn(f"agio memory: the search index could not be updated ({exc}); recent changes are "
                          "searched after the next write", RuntimeWarning, stacklevel=3)
        with self._lock:
            self.index.reload()  # other kernels' commits
            schema = self.schema
            words = self.index.parse_query(" ".join(terms), ["body"])
            where = tantivy.Query.boolean_query(
                [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "filter", f"{kind}|{s}")) for s in scopes])
            query = tantivy.Query.boolean_query([(tantivy.Occur.Must, words), (tantivy.Occur.Must, where)])
            searcher = self.index.searcher()
            hits = searcher.search(query, k).hits
            return [(searcher.doc(addr)["key"][0], float(score)) for score, addr in hits]

    def coverage(self, text: str, bodies: dict[str, str]) -> dict[str, float]:
        """How much of the query's lexical evidence each body holds, 0..1: the IDF-weighted share of the
        query's (stemmed, non-stop) words found in it.

        BM25's raw scores have no fixed scale (a lone common word can top a list), so hybrid retrieval
        fuses this bounded measure with the cosine instead (``retrieval.py``).
        """
        words = set(self._analyze(" ".join(query_terms(text))))
        if not words:
            return {key: 0.0 for key in bodies}
        with self._lock:
            searcher = self.index.searcher()
            n = max(1, searcher.num_docs)
            idf = {w: math.log(1 + (n - (df := searcher.doc_freq("body", w)) + 0.5) / (df + 0.5)) for w in words}
        total = sum(idf.values())
        return {key: sum(idf[w] for w in words.intersection(self._analyze(body))) / total
                for key, body in bodies.items()}

    def _analyze(self, text: str) -> list[str]:
        analyzer = getattr(self, "_analyzer", None)
        if analyzer is None:
            analyzer = self._analyzer = _analyzer()
        return analyzer.analyze(text)

    def close(self) -> None:
        with self._lock:
            try:
                self.flush()
            finally:
                self._versions.close()

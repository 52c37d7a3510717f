"""MemoryStore: skills, experiences, feedback, proposals and vectors in the store directory.

The records live in the store's named journal "memory" (tables skills, experiences, feedback,
proposals, vectors): ``<store>/memory.jsonl`` in the TinyDB store, rows of ``agio_journal`` in a
SQL store. The BM25 index is derived and lives beside it (``<store>/memory-index/``; for SQLite
``<file>.memory-index/``; elsewhere a scratch directory, rebuilt when the process starts).
With the local embedding model installed, each skill and experience carries its vector in its own
document (``vectors.py``), computed when it is written; the vector index is derived, in process memory.
See ``docs/memory.md``.

Writes are appends to the journal (one write, one fsync), so adding a record costs the same however
many are stored; the index follows each change incrementally, including changes other kernels
appended (seen when the journal is refreshed).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable

from ..core import NotFoundError, now
from ..storage.base import Repository
from ..storage.ids import resolve_prefix
from ..storage.journal import Journal
from .index import LexicalIndex
from .local_model import LocalEmbeddings, local_embeddings
from .records import GLOBAL, TABLES, Feedback, Proposal, Record, Skill, from_doc, to_doc
from .vectors import VectorIndex, decode, encode, is_current

_KEYS = {name: (lambda d: d["id"]) for name in (*TABLES, "vectors")}
_KEYS["vectors"] = lambda d: f"{d['model']}:{d['id']}"
_KINDS = {"skills": "skill", "experiences": "experience"}


class MemoryStore:
    """``MemoryStore(directory)`` keeps its own journal file there; :func:`memory_for` gives a
    repository's memory (its named journal "memory", the index beside the store)."""

    def __init__(self, root: Path | str | None = None, *, journal: Any = None, index_dir: Path | str | None = None,
                 lock_timeout: float = 10.0, embedder: LocalEmbeddings | None | str = "auto"):
        # the model whose vectors records carry: the local one when installed ("auto"), or None
        self.embedder: LocalEmbeddings | None = local_embeddings() if embedder == "auto" else embedder  # type: ignore[assignment]
        self._vectors: VectorIndex | None = None  # built on the first hybrid retrieval
        self._stale: set[tuple[str, str]] = set()  # records whose vector is missing or of another model
        if journal is None:
            if root is None:
                raise ValueError("MemoryStore needs a directory or a journal")
            Path(root).mkdir(parents=True, exist_ok=True)
            journal = Journal(Path(root) / "memory.jsonl", _KEYS, lock_timeout)
        self._lock = threading.RLock()
        self._journal = journal
        self._journal.refresh()
        self.index = LexicalIndex(Path(index_dir) if index_dir is not None else Path(root) / "memory-index")
        self.sync_index()
        self._journal.on_change = self._on_change  # from now on the index follows every change

    # -- index upkeep ---------------------------------------------------------------------
    def sync_index(self) -> int:
        """Bring the derived index in line with the journal; returns how many records were re-indexed."""
        with self._lock:
            indexed = self.index.versions()
            stale: list[tuple[str, str, str, str, float]] = []
            live: set[str] = set()
            for table, kind in _KINDS.items():
                cls = TABLES[table]
                for key, doc in self._journal.tables.get(table, {}).items():
                    live.add(key)
                    if indexed.get(key) != doc["updated_at"]:
                        rec = from_doc(cls, doc)
                        stale.append((key, kind, rec.scope, rec.search_text(), rec.updated_at))
            if stale:
                self.index.upsert(stale)
            gone = [k for k in indexed if k not in live]
            if gone:
                self.index.delete(gone)
            return len(stale)

    def _on_change(self, table: str, key: str, doc: dict[str, Any] | None) -> None:
        if table == "":  # the journal was read again from its start: the vector index is rebuilt when needed
            self._vectors = None
            return
        kind = _KINDS.get(table)
        if kind is None:
            return
        if doc is None:
            self.index.delete([key])
            if self._vectors is not None:
                self._vectors.drop(key)
            return
        rec = from_doc(TABLES[table], doc)
        self.index.upsert([(key, kind, rec.scope, rec.search_text(), rec.updated_at)])
        if self._vectors is not None:
            self._index_vector(table, key, kind, rec.scope, doc)

    # -- vectors of the local model (kept inside the records) ----------------------------------------
    def _index_vector(self, table: str, key: str, kind: str, scope: str, doc: dict[str, Any]) -> None:
        stored = doc.get("vector")
        assert self._vectors is not None and self.embedder is not None
        if is_current(stored, self.embedder):
            self._vectors.put(key, kind, scope, decode(stored))
            self._stale.discard((table, key))
        else:
            self._vectors.drop(key)
            self._stale.add((table, key))

    def vector_index(self) -> VectorIndex | None:
        """The vectors of the local model, by kind and scope (None without the model).

        Built from the journal on first use; records without a current vector (written before the
        model was installed, or by another model or version) are embedded now and written back, once.
        """
        if self.embedder is None:
            return None
        with self._lock:
            if self._vectors is None:
                self._vectors = VectorIndex(self.embedder.dim)
                self._stale = set()
                try:
                    for table, kind in _KINDS.items():
                        for key, doc in self._journal.tables.get(table, {}).items():
                            self._index_vector(table, key, kind, doc.get("scope", GLOBAL), doc)
                except BaseException:
                    self._vectors = None  # built again, whole, by the next retrieval
                    raise
            if self._stale:
                docs = [(t, self._journal.tables[t][k]) for t, k in sorted(self._stale)
                        if k in self._journal.tables.get(t, {})]
                self._stale = set()
                for start in range(0, len(docs), 4096):
                    self.put_many(docs[start:start + 4096])
            return self._vectors

    def _with_vectors(self, records: list[tuple[str, dict[str, Any]]], *, fresh: bool = False
                      ) -> list[tuple[str, dict[str, Any]]]:
        """Skills and experiences with their vector: kept when the text is unchanged and the model the
        same (unless ``fresh``), else computed (one batch); without the model an unchanged record keeps
        what it had."""
        out: list[tuple[str, dict[str, Any]]] = []
        todo: list[tuple[dict[str, Any], str]] = []
        for table, doc in records:
            cls = TABLES.get(table)
            if table not in _KINDS or cls is None:
                out.append((table, doc))
                continue
            doc = {k: v for k, v in doc.items() if k != "vector"}
            text = from_doc(cls, doc).search_text()
            old = self._journal.tables.get(table, {}).get(doc["id"])
            kept = (old.get("vector") if old is not None and not fresh and from_doc(cls, old).search_text() == text
                    else None)
            if kept is not None and (self.embedder is None or is_current(kept, self.embedder)):
                doc["vector"] = kept
            elif self.embedder is not None:
                todo.append((doc, text))
            out.append((table, doc))
        if todo:
            model = self.embedder
            assert model is not None
            for (doc, _), vector in zip(todo, model.embed([t for _, t in todo])):
                doc["vector"] = encode(model, vector)
        return out

    def has_vectors(self) -> bool:
        """Whether any record carries a vector (a model's work this process may not be able to use)."""
        return any("vector" in d for t in _KINDS for d in self._journal.tables.get(t, {}).values())

    def reembed(self) -> int:
        """Compute every record's vector again with the current model (and drop stored endpoint vectors);
        returns how many records were re-embedded. Nothing else changes."""
        self.refresh()
        with self._lock:
            docs = [(t, d) for t in _KINDS for d in self._journal.tables.get(t, {}).values()]
            old = [("vectors", k) for k in self._journal.tables.get("vectors", {})]
            for start in range(0, max(len(docs), 1), 4096):
                chunk = docs[start:start + 4096]
                if chunk or old:
                    self._journal.append(self._with_vectors(chunk, fresh=True), old if start == 0 else [])
            self._vectors = None
            return len(docs)

    def refresh(self) -> None:
        """See what other kernels appended (a ``stat`` when nothing changed)."""
        with self._lock:
            self._journal.refresh()

    # -- generic reads/writes ---------------------------------------------------------------
    def docs(self, table: str) -> list[dict[str, Any]]:
        self.refresh()
        return list(self._journal.tables.get(table, {}).values())

    def get(self, table: str, key: str) -> dict[str, Any] | None:
        self.refresh()
        return self._journal.tables.get(table, {}).get(key)

    def put(self, table: str, objs: Iterable[Any]) -> None:
        self.put_many([(table, to_doc(o)) for o in objs])

    def put_many(self, records: list[tuple[str, dict[str, Any]]], deletes: list[tuple[str, str]] = ()) -> None:
        """One durable append of upserts and deletes across tables (all or nothing); skills and
        experiences get their vector first (computed before anything is written)."""
        with self._lock:
            self._journal.append(self._with_vectors(list(records)), list(deletes))

    # -- records --------------------------------------------------------------------------
    def add(self, record: Record) -> Record:
        self.put("skills" if isinstance(record, Skill) else "experiences", [record])
        return record

    def resolve(self, kind: str, text: str, tables: tuple[str, ...]) -> str:
        """The full id of a record of ``tables`` that ``text`` names (the id or a unique 6+ character prefix)."""
        self.refresh()
        ids = {k for t in tables for k in self._journal.tables.get(t, {})}
        return resolve_prefix(kind, text, ids.__contains__, lambda prefix: ids, where="in memory")

    def record(self, record_id: str) -> Record:
        record_id = self.resolve("skill or experience", record_id, ("skills", "experiences"))
        for table in ("skills", "experiences"):
            doc = self.get(table, record_id)
            if doc is not None:
                return from_doc(TABLES[table], doc)
        raise NotFoundError(f"no skill or experience {record_id!r} in memory")

    def records(self, table: str) -> list[Record]:
        cls = TABLES[table]
        return [from_doc(cls, d) for d in self.docs(table)]

    def by_ids(self, table: str, ids: list[str]) -> list[Record]:
        cls, docs = TABLES[table], self._journal.tables.get(table, {})
        return [from_doc(cls, docs[i]) for i in ids if i in docs]

    def edit(self, record_id: str, **changes: Any) -> Record:
        rec = self.record(record_id)
        bad = [k for k in changes if k not in rec.EDITABLE]
        if bad:
            raise ValueError(f"cannot edit {', '.join(bad)} of a {rec.kind}; editable: {', '.join(rec.EDITABLE)}")
        new = replace(rec, **changes, updated_at=now())
        return self.add(new)

    def delete(self, record_id: str) -> None:
        rec = self.record(record_id)
        table = "skills" if isinstance(rec, Skill) else "experiences"
        with self._lock:
            self._journal.append((), [(table, rec.id)])

    def count_use(self, records: list[Record]) -> None:
        """One append bumping the usage count of records a run retrieved."""
        if not records:
            return
        self.put_many([("skills" if isinstance(r, Skill) else "experiences",
                        to_doc(replace(r, usage_count=r.usage_count + 1))) for r in records])

    # -- feedback and proposals -------------------------------------------------------------------
    def feedback_items(self) -> list[Feedback]:
        return [from_doc(Feedback, d) for d in self.docs("feedback")]

    def proposals(self) -> list[Proposal]:
        return [from_doc(Proposal, d) for d in self.docs("proposals")]

    def proposal(self, proposal_id: str) -> Proposal:
        doc = self.get("proposals", self.resolve("proposed experience", proposal_id, ("proposals",)))
        if doc is None:
            raise NotFoundError(f"no proposed experience {proposal_id!r}")
        return from_doc(Proposal, doc)

    # -- vectors (hybrid retrieval) -------------------------------------------------------------
    def vectors(self, model: str) -> dict[str, dict[str, Any]]:
        """Stored embeddings for ``model``: record id -> {"updated_at", "vector"}."""
        prefix = f"{model}:"
        return {d["id"]: d for k, d in self._journal.tables.get("vectors", {}).items() if k.startswith(prefix)}

    def put_vectors(self, model: str, items: list[tuple[Record, list[float]]]) -> None:
        self.put_many([("vectors", {"id": r.id, "model": model, "updated_at": r.updated_at, "vector": v})
                       for r, v in items])

    def close(self) -> None:
        with self._lock:
            self._journal.close()
            self.index.close()


def scopes_for(scope: str | None) -> tuple[str, ...]:
    return (GLOBAL,) if scope in (None, GLOBAL) else (scope, GLOBAL)


_stores: "weakref.WeakKeyDictionary[Any, MemoryStore]" = weakref.WeakKeyDictionary()


def _index_dir(repository: Repository) -> Path:
    """Where the derived index of a repository's memory lives: beside its files when it has any."""
    root = getattr(repository, "root", None)
    path = getattr(repository, "path", None)
    if root is not None and Path(root).is_dir():
        return Path(root) / "memory-index"
    if isinstance(path, Path) and path.parent.is_dir():  # an SQLite file
        return path.with_name(path.name + ".memory-index")
    return _scratch_dir("agio-memory-index-")


def _scratch_dir(prefix: str) -> Path:
    """A directory for this process only (a derived index, rebuilt on demand), removed at exit."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return Path(path)


def memory_for(repository: Repository | None = None) -> MemoryStore:
    """The memory of a repository (the default store when None)."""
    if repository is None:
        from ..storage import open_repository

        repository = open_repository()
    store = _stores.get(repository)
    if store is None:
        if hasattr(repository, "journal"):
            store = MemoryStore(journal=repository.journal("memory", _KEYS), index_dir=_index_dir(repository))
        else:  # a store without named journals (in-memory): a scratch directory for this process
            store = MemoryStore(_scratch_dir("agio-memory-"))
        _stores[repository] = store
    return store


def existing_memory(repository: Repository) -> MemoryStore | None:
    """The repository's memory if anything was ever stored in it (a run without memory opens nothing)."""
    store = _stores.get(repository)
    if store is not None:
        return store
    root = getattr(repository, "root", None)
    if root is not None and Path(root).is_dir():
        found = (Path(root) / "memory.jsonl").exists()
    elif hasattr(repository, "journal_names"):
        found = "memory" in repository.journal_names("memory")
    else:
        found = False
    return memory_for(repository) if found else None

"""An append-only JSON-lines journal that TinyDB can read.

Layout of a journal file::

    {"agio_journal": 1, "snapshot": {"steps": {"1": {...}, "2": {...}}, "events": {...}}}
    {"t": "steps", "d": {...}}          <- upsert: replaces the doc with the same key
    {"t": "steps", "k": "<key>", "x": 1} <- delete

A commit is one ``write`` of whole lines and one ``fsync``: its cost depends on neither the file's
size nor the store's. Replaying the file (snapshot, then lines in order; the last version of a key
wins) gives TinyDB's ``{table: {doc_id: doc}}``, with doc ids assigned in order of first appearance,
so two writers never hand out the same id. Compaction rewrites the snapshot atomically (temp file,
fsync, rename, directory fsync).

A trailing line without its newline is a write that never completed (it was never reported
committed): readers ignore it, the next writer truncates it under the lock. A bad line anywhere else
is corruption and raises :class:`StoreError` naming the file and line.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable

import orjson
from tinydb.storages import Storage

from ..core import StoreError
from .locking import FileLock

Doc = dict[str, Any]
KeyFn = Callable[[Doc], str]

JOURNAL_VERSION = 1


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so a crash leaves either the old or the new file, never a torn one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


class Journal:
    """One journal file: its replayed state in memory, kept current by reading only new bytes."""

    def __init__(self, path: Path, keys: dict[str, KeyFn], lock_timeout: float = 10.0):
        self.path = path
        self.keys = keys
        self.lock = FileLock(path, lock_timeout)
        self.tables: dict[str, dict[str, Doc]] = {}  # table -> key -> doc (insertion order = doc id order)
        self.base_ids: dict[str, dict[str, int]] = {}  # doc ids fixed by the snapshot line
        self.lines = 0  # change lines after the snapshot
        self._offset = 0
        self._inode: int | None = None
        self._fd: int | None = None
        self._warned_tail = False
        self.on_change: Callable[[str, str, Doc | None], None] | None = None

    # -- reading -------------------------------------------------------------
    def _reset(self) -> None:
        self.tables = {}
        self.base_ids = {}
        self.lines = 0
        self._offset = 0

    def refresh(self, *, repair: bool = False) -> bool:
        """Apply what other writers appended since we last looked (a stat when nothing changed).

        With ``repair`` (only under the lock) a torn trailing line is truncated away.
        """
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._inode is not None:
                self._close_fd()
                self._reset()
                self._inode = None
            return False
        if st.st_ino != self._inode or st.st_size < self._offset:
            self._close_fd()
            self._reset()
            self._inode = st.st_ino
        if st.st_size == self._offset:
            return True
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        if end == 0 and self._offset == 0 and data.startswith(b'{"agio_journal"'):
            raise StoreError(f"store file {self.path} is truncated: its snapshot line is incomplete "
                             f"({len(data)} bytes, no end of line)")
        self._apply(data[:end], first_line_no=None)
        self._offset += end
        if end < len(data) and not repair and not self._warned_tail:
            self._warned_tail = True
            warnings.warn(f"store file {self.path} ends with an incomplete record ({len(data) - end} bytes, "
                          "a write interrupted by a crash or a truncated file); it is ignored", stacklevel=2)
        if end < len(data) and repair:
            # a torn write from a crashed writer (writers only write under the lock we hold): it was
            # never reported committed, so it goes
            with open(self.path, "r+b") as f:
                f.truncate(self._offset)
                os.fsync(f.fileno())
        return True

    def _apply(self, data: bytes, first_line_no: int | None) -> None:
        if not data:
            return
        tables = self.tables
        keys = self.keys
        lines = data.split(b"\n")
        lines.pop()  # after the final newline
        for n, raw in enumerate(lines):
            raw = raw.strip(b"\0")
            if not raw.strip():
                continue
            try:
                rec = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise StoreError(f"store file {self.path} is corrupt near byte {self._offset} "
                                 f"(line {n + 1} of the unread part): {exc}") from None
            if "snapshot" in rec and self._offset == 0 and not tables and n == 0:
                self._load_snapshot(rec)
                continue
            try:
                table = rec["t"]
                if rec.get("x"):
                    key = rec["k"]
                    doc = None
                    tables.get(table, {}).pop(key, None)
                else:
                    doc = rec["d"]
                    key = keys[table](doc) if table in keys else str(doc.get("id"))
                    tables.setdefault(table, {})[key] = doc
            except (KeyError, TypeError) as exc:
                raise StoreError(f"store file {self.path} has a malformed record: {raw[:120]!r}") from exc
            self.lines += 1
            if self.on_change is not None:
                self.on_change(table, key, doc)

    def _load_snapshot(self, rec: Doc) -> None:
        if rec.get("agio_journal", 0) > JOURNAL_VERSION:
            raise StoreError(f"store file {self.path} has journal version {rec['agio_journal']}, newer than "
                             f"this agio-notebook understands ({JOURNAL_VERSION}); upgrade agio-notebook")
        for table, docs in (rec.get("snapshot") or {}).items():
            key_fn = self.keys.get(table)
            target = self.tables.setdefault(table, {})
            ids = self.base_ids.setdefault(table, {})
            for doc_id, doc in sorted(docs.items(), key=lambda kv: int(kv[0])):
                key = key_fn(doc) if key_fn is not None else f"#{doc_id}"
                target[key] = doc
                ids[key] = int(doc_id)
                if self.on_change is not None:
                    self.on_change(table, key, doc)

    # -- writing -------------------------------------------------------------
    def _open_fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            st = os.fstat(self._fd)
            if self._inode is None:
                self._inode = st.st_ino
        return self._fd

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def append(self, records: Iterable[tuple[str, Doc]], deletes: Iterable[tuple[str, str]] = ()) -> None:
        """Durably append upserts ``(table, doc)`` and deletes ``(table, key)``: one write, one fsync."""
        records = list(records)
        deletes = list(deletes)
        parts = [b'{"t":"%s","d":%s}\n' % (table.encode(), orjson.dumps(doc)) for table, doc in records]
        parts += [orjson.dumps({"t": table, "k": key, "x": 1}) + b"\n" for table, key in deletes]
        if not parts:
            return
        data = b"".join(parts)
        with self.lock:
            existed = self.refresh(repair=True)
            fd = self._open_fd()
            if not existed:
                fsync_dir(self.path.parent)
            os.write(fd, data)
            os.fsync(fd)
            self._offset += len(data)
            self._apply_records(records, deletes)

    def _apply_records(self, records: list[tuple[str, Doc]], deletes: list[tuple[str, str]]) -> None:
        """What we just wrote, applied without parsing it back."""
        tables, keys = self.tables, self.keys
        for table, doc in records:
            key = keys[table](doc) if table in keys else str(doc.get("id"))
            tables.setdefault(table, {})[key] = doc
            if self.on_change is not None:
                self.on_change(table, key, doc)
        for table, key in deletes:
            tables.get(table, {}).pop(key, None)
            if self.on_change is not None:
                self.on_change(table, key, None)
        self.lines += len(records) + len(deletes)

    def compact(self) -> None:
        """Rewrite the file as one snapshot line (atomically); doc ids are kept."""
        with self.lock:
            self.refresh(repair=True)
            if not self.lines:
                return
            atomic_write(self.path, self.snapshot_bytes())
            self._close_fd()
            self._reset()
            self._inode = None
            self.refresh()

    def tinydb_data(self) -> dict[str, dict[str, Doc]]:
        """The state in TinyDB's layout: ``{table: {doc_id: doc}}``."""
        out: dict[str, dict[str, Doc]] = {}
        for table, docs in self.tables.items():
            fixed = self.base_ids.get(table, {})
            next_id = max(fixed.values(), default=0) + 1
            ids: dict[str, Doc] = {}
            for key, doc in docs.items():
                doc_id = fixed.get(key)
                if doc_id is None:
                    doc_id, next_id = next_id, next_id + 1
                ids[str(doc_id)] = doc
            out[table] = ids
        return out

    def snapshot_bytes(self, data: dict[str, dict[str, Doc]] | None = None) -> bytes:
        return orjson.dumps({"agio_journal": JOURNAL_VERSION,
                             "snapshot": self.tinydb_data() if data is None else data}) + b"\n"

    def close(self) -> None:
        self._close_fd()
        self.lock.close()


class JournalStorage(Storage):
    """TinyDB Storage over a journal file: ``TinyDB(path, storage=JournalStorage)``.

    Reads replay the journal. Writes through TinyDB's own API replace the file with a snapshot,
    atomically and under the same lock the store uses (TinyDB writes whole tables anyway).
    """

    def __init__(self, path: str | os.PathLike[str], keys: dict[str, KeyFn] | None = None, **_: Any):
        from .layout import ALL_KEYS

        self._journal = Journal(Path(path), keys if keys is not None else ALL_KEYS)

    def read(self) -> dict[str, dict[str, Doc]] | None:
        self._journal.refresh()
        data = self._journal.tinydb_data()
        return data or None

    def write(self, data: dict[str, dict[str, Doc]]) -> None:
        journal = self._journal
        with journal.lock:
            atomic_write(journal.path, journal.snapshot_bytes(data))

    def close(self) -> None:
        self._journal.close()

"""The run query's index of a TinyDB store, kept current with the store's run index journal (``index.jsonl``).

Each question catches the index up first: a ``stat`` when nothing changed; the new lines when something was
appended (another process's runs, or this one's); when the journal is another file (a compaction, which
brings the snapshot on disk along, see :mod:`.run_index_file`), the snapshot on disk again; and when no
snapshot matches the journal, a rebuild from the whole journal, written to disk for the next process. So a
process that has just started answers its first page from the snapshot and the journal's tail, without
reading every run.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any, Callable, TypeVar

from ..core import StoreError
from .journal import Journal
from .layout import INDEX_KEYS
from .run_index import RunIndex, SnapshotUnreadable
from .run_index_file import NAME, Snapshot, Stamp, build, damaged, load, rewrite

T = TypeVar("T")

REWRITE_AFTER = 2 << 20  # bytes of journal read past the snapshot before a new snapshot is written
REWRITE_ON_CLOSE = 64 << 10  # ... and on close


class _Replaced(Exception):
    """The journal followed is another file now (or shorter): the snapshot under the overlay no longer applies."""


class FollowedRunIndex:
    """The run query's index of one TinyDB store, made current with its journal at each question."""

    def __init__(self, root: Path, lock_timeout: float = 10.0):
        self.root = root
        self.path = root / "index.jsonl"
        self.lock_timeout = lock_timeout
        self._snapshot: Snapshot | None = None
        self._reader: Journal | None = None  # the journal, from the snapshot's stamp on
        self._writable = True  # False once the store's directory refused a snapshot (read-only): kept in memory
        self._disk_damaged = False  # the snapshot on disk could not be read: not loaded again until rewritten

    def ask(self, question: Callable[[RunIndex], T], whole: Callable[[], Journal] | None) -> T | None:
        """``question(index)`` of the index made current: from the snapshot on disk and the journal's tail,
        else built from ``whole()`` (the whole journal, read). With ``whole`` None, None when no snapshot on
        disk matches. A snapshot SQLite cannot read is reported in one line, and rebuilt."""
        for _ in range(3):
            index = self._current(whole)
            if index is None:
                return None
            try:
                return question(index)
            except SnapshotUnreadable as exc:
                damaged(self.root / NAME, exc)
                self._disk_damaged = True
                self._drop()
        raise StoreError(f"the run query's index of {self.root} could not be read")

    def close(self) -> None:
        """Leave a snapshot for the next process when this one read much of the journal past it."""
        try:
            self._rewrite(REWRITE_ON_CLOSE)
        finally:
            self._drop()

    # -- keeping current ------------------------------------------------------------------------
    def _current(self, whole: Callable[[], Journal] | None) -> RunIndex | None:
        if self._snapshot is not None and self._catch_up():
            return self._snapshot.index
        self._drop()
        if not self._disk_damaged and self._load():
            return self._snapshot.index  # type: ignore[union-attr]
        if whole is None:
            return None
        for _ in range(3):
            if self._build(whole()):
                return self._snapshot.index  # type: ignore[union-attr]
        raise StoreError(f"the run index of {self.root} kept changing while it was read; ask again")

    def _catch_up(self) -> bool:
        """The journal's new lines into the overlay; False when it is not the file followed any more."""
        reader, stamp = self._reader, self._snapshot.stamp  # type: ignore[union-attr]
        assert reader is not None
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return stamp is None and reader.inode is None  # still no journal: still empty
        if stamp is not None and (st.st_ino, st.st_dev) != (reader.inode, stamp.device):
            return False
        try:
            reader.refresh()
        except _Replaced:
            return False
        self._rewrite(REWRITE_AFTER)
        return True

    def _follow(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._reader = Journal(self.path, INDEX_KEYS, self.lock_timeout)
        if snapshot.stamp is not None:
            self._reader.start_at(snapshot.stamp.inode, snapshot.stamp.offset)
        self._reader.on_change = self._hear

    def _hear(self, table: str, key: str, doc: dict[str, Any] | None) -> None:
        if table == "":  # the journal forgets what it read: another file, a shorter one, or none (not its first read)
            if self._reader is not None and self._reader.inode is not None:
                raise _Replaced
        elif self._snapshot is not None:
            self._snapshot.index.apply(table, key, doc)

    def _load(self) -> bool:
        """Follow the snapshot on disk, if it matches the journal."""
        try:
            snapshot = load(self.root)
        except SnapshotUnreadable as exc:
            damaged(self.root / NAME, exc)
            self._disk_damaged = True
            return False
        if snapshot is None:
            return False
        assert snapshot.stamp is not None
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            snapshot.close()
            return False
        try:
            matches = snapshot.stamp.holds(fd)
        finally:
            os.close(fd)
        if not matches:
            snapshot.close()
            return False
        self._follow(snapshot)
        return self._catch_up()

    def _build(self, journal: Journal) -> bool:
        """Index the whole journal as ``journal`` read it, written to disk when it read no damage; False when
        the file changed under it (read again)."""
        runs, sessions = journal.tables.get("runs", {}).values(), journal.tables.get("sessions", {}).values()
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            if journal.loaded:
                return False
            self._follow(Snapshot(RunIndex(), None))  # no journal yet: empty, and read from its start once made
            return True
        try:
            if os.fstat(fd).st_ino != journal.inode:
                return False
            stamp = Stamp.of(fd, journal.offset)
        finally:
            os.close(fd)
        clean = not (journal.damaged or journal.zeros or journal.cut_snapshot)
        snapshot, written = build(self.root, runs, sessions, stamp, persist=clean and self._writable)
        if clean and not written:
            self._writable = False
        if written:
            self._disk_damaged = False
        self._follow(snapshot)
        return self._catch_up()

    def _rewrite(self, after: int) -> None:
        """A new snapshot on disk once the overlay holds ``after`` bytes of the journal or more (never from
        bytes read with damage or zeros, nor over a snapshot built in memory from such bytes)."""
        snapshot, reader = self._snapshot, self._reader
        if snapshot is None or reader is None or not self._writable or reader.inode is None:
            return
        if reader.damaged or reader.zeros or reader.cut_snapshot or (snapshot.fd is None and snapshot.stamp is not None):
            return
        if reader.offset - (snapshot.stamp.offset if snapshot.stamp is not None else 0) < after:
            return
        stamp = Stamp.of_file(self.path, reader.inode, reader.offset)
        if stamp is None:
            return
        try:
            fresh = rewrite(self.root, snapshot, stamp)
        except (OSError, SnapshotUnreadable, sqlite3.Error):
            self._writable = False
            return
        self._disk_damaged = False
        snapshot.close()
        reader.close()
        self._follow(fresh)

    def _drop(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._snapshot is not None:
            self._snapshot.close()
            self._snapshot = None

"""The run query's snapshot on disk: ``index.runs.sqlite`` beside a TinyDB store's ``index.jsonl``.

A process asking for a page of runs would otherwise read the whole run index journal (1.3 s at 100,000 runs)
and index it (0.7 s) first. This file is that index, kept: a process attaches it and reads only the journal's
lines after it (:mod:`.run_index_follow`).

It is derived data and must never disagree with the journal, so it says which bytes of the journal it reflects
(a :class:`Stamp`: the file's device, inode and inode generation, how many bytes, and digests of the first and
of the last 64 KiB before there; every rewrite of a journal also begins with a random id of its own) and is
used only while the journal is that file, that long at least, with those bytes at both ends. The store only
ever appends to the journal or replaces it (a new inode), so that is the whole of what can change; an edit in
place between the ends by another program is not looked for. Anything else (another file under the name, a
shorter one, other bytes, a store copied elsewhere, a file SQLite cannot read, another format) and it is
rebuilt from the journal. It is never changed in place: each version is written to a temp file, synced, and
renamed over the last, so a reader (which opens it read-only and immutable) sees one whole version, and a
writer killed midway leaves the previous one. It is written only from journal bytes read without damage
or zero (lost) regions, so that damage stays in what every process reads, and reports.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import time
import urllib.parse
import warnings
from dataclasses import asdict, dataclass
from hashlib import blake2b
from pathlib import Path
from typing import Any, Iterable

import orjson

from .damage import Damage, StoreDamageWarning, report
from .durability import file_identity
from .journal import Journal, fsync_dir
from .layout import INDEX_KEYS
from .run_index import RunIndex, SnapshotUnreadable, create

NAME = "index.runs.sqlite"
FORMAT = 1  # of the file; another is rebuilt
WINDOW = 64 * 1024  # bytes of the journal digested at its start and before the stamp's offset
_STALE_TEMP = 600.0  # seconds after which a temp file is a killed writer's leftover
_CHUNK = 4 << 20

Doc = dict[str, Any]


def _digest(fd: int, start: int, end: int) -> str:
    return blake2b(os.pread(fd, end - start, start), digest_size=16).hexdigest()


@dataclass(frozen=True)
class Stamp:
    """Which bytes of the run index journal a snapshot reflects: those before ``offset`` (a line's end) of
    the file (``device``, ``inode``, ``generation``), whose first and last ``WINDOW`` bytes digest as given."""

    device: int
    inode: int
    generation: int
    offset: int
    head: str
    tail: str

    @classmethod
    def of(cls, fd: int, offset: int) -> Stamp:
        st = os.fstat(fd)
        return cls(st.st_dev, st.st_ino, file_identity(fd)[1], offset, _digest(fd, 0, min(offset, WINDOW)),
                   _digest(fd, max(0, offset - WINDOW), offset))

    @classmethod
    def of_file(cls, path: Path | str, inode: int | None, offset: int) -> Stamp | None:
        """The stamp of the journal at ``path`` up to ``offset``; None if that path is no longer file ``inode``
        (replaced meanwhile) or is gone."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            return cls.of(fd, offset) if os.fstat(fd).st_ino == inode else None
        finally:
            os.close(fd)

    def holds(self, fd: int) -> bool:
        """Whether the open file is the one stamped, and still holds the bytes stamped."""
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (self.device, self.inode) or st.st_size < self.offset:
            return False
        return (file_identity(fd)[1] == self.generation and _digest(fd, 0, min(self.offset, WINDOW)) == self.head
                and _digest(fd, max(0, self.offset - WINDOW), self.offset) == self.tail)


@dataclass
class Snapshot:
    """A run index and what its snapshot reflects (``stamp``; None: nothing, it is empty). ``fd`` holds the
    snapshot file open (the version attached, whatever has replaced it since); None: built in memory."""

    index: RunIndex
    stamp: Stamp | None
    fd: int | None = None

    def close(self) -> None:
        self.index.close()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _uri(path: Path) -> str:
    return f"file:{urllib.parse.quote(str(path))}?mode=ro&immutable=1"


def _read_stamp(index: RunIndex) -> Stamp | None:
    rows = index.read_snapshot("SELECT format, value FROM snap.stamp")
    if len(rows) != 1 or rows[0][0] != FORMAT:
        return None
    try:
        return Stamp(**orjson.loads(rows[0][1]))
    except (TypeError, orjson.JSONDecodeError) as exc:
        raise SnapshotUnreadable(f"its stamp is unreadable ({exc})") from None


def _write_stamp(path: Path, stamp: Stamp) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = OFF")
        db.execute("CREATE TABLE IF NOT EXISTS stamp (format INTEGER NOT NULL, value BLOB NOT NULL)")
        db.execute("DELETE FROM stamp")
        db.execute("INSERT INTO stamp VALUES (?, ?)", (FORMAT, orjson.dumps(asdict(stamp))))
    finally:
        db.close()


def damaged(path: Path, why: object) -> None:
    """One line: the snapshot could not be read; nothing is lost, it is rebuilt."""
    report(Damage(path, f"the run query's index could not be read ({why}); it is rebuilt from index.jsonl"),
           stacklevel=4)


def load(root: Path) -> Snapshot | None:
    """The snapshot on disk, attached (None: there is none, or of another format); ``SnapshotUnreadable``
    when SQLite cannot read it. Whether it matches the journal is the caller's to check (``stamp.holds``)."""
    path = root / NAME
    for _ in range(3):  # a newer version may take the name between our open and SQLite's
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            index = RunIndex(_uri(path))
        except BaseException:
            os.close(fd)
            raise
        try:
            if os.stat(path).st_ino != os.fstat(fd).st_ino:
                raise FileNotFoundError
            stamp = _read_stamp(index)
        except FileNotFoundError:
            Snapshot(index, None, fd).close()
            continue
        except BaseException:
            Snapshot(index, None, fd).close()
            raise
        if stamp is None:
            Snapshot(index, None, fd).close()
            return None
        return Snapshot(index, stamp, fd)
    return None


def _temp(root: Path) -> Path:
    """A new temp file beside the snapshot (a killed writer's old ones are removed)."""
    now = time.time()
    for old in root.glob(f".{NAME}.*.tmp"):
        try:
            if now - old.stat().st_mtime > _STALE_TEMP:
                old.unlink()
        except OSError:
            pass
    path = root / f".{NAME}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))  # the store's files' mode
    return path


def _install(root: Path, tmp: Path) -> Snapshot:
    """Sync the finished temp file, attach it, then give it the snapshot's name."""
    fd = os.open(tmp, os.O_RDONLY)
    index: RunIndex | None = None
    try:
        os.fsync(fd)
        index = RunIndex(_uri(tmp))
        stamp = _read_stamp(index)
        if stamp is None:
            raise SnapshotUnreadable("its stamp is missing")
        os.replace(tmp, root / NAME)
    except BaseException:
        if index is not None:
            index.close()
        os.close(fd)
        raise
    fsync_dir(root)
    return Snapshot(index, stamp, fd)


def build(root: Path, runs: Iterable[Doc], sessions: Iterable[Doc], stamp: Stamp, *, persist: bool) -> tuple[Snapshot, bool]:
    """A snapshot of ``runs`` and ``sessions`` (the journal's, as ``stamp`` says): written to disk when
    ``persist``, else (or when the store's directory cannot take it) in memory. Also whether it was written."""
    if persist:
        try:
            return written(root, runs, sessions, stamp), True
        except (OSError, sqlite3.Error, SnapshotUnreadable):
            pass
    return Snapshot(RunIndex(None, runs, sessions), stamp), False


def written(root: Path, runs: Iterable[Doc], sessions: Iterable[Doc], stamp: Stamp) -> Snapshot:
    """A snapshot of ``runs`` and ``sessions`` written to disk (raises ``OSError`` or ``sqlite3.Error``)."""
    tmp = _temp(root)
    try:
        db = sqlite3.connect(tmp, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode = OFF")
            db.execute("PRAGMA synchronous = OFF")
            db.execute("BEGIN")
            create(db, "main", runs, sessions)
            db.execute("COMMIT")
        finally:
            db.close()
        _write_stamp(tmp, stamp)
        return _install(root, tmp)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def rewrite(root: Path, snapshot: Snapshot, stamp: Stamp) -> Snapshot:
    """A new snapshot on disk: ``snapshot``'s (its file as attached, or an empty one) with its overlay
    merged in, stamped ``stamp``. Raises ``OSError`` or ``sqlite3.Error`` when it cannot be written."""
    tmp = _temp(root)
    try:
        if snapshot.fd is not None:
            _copy(snapshot.fd, tmp)
        else:
            db = sqlite3.connect(tmp, isolation_level=None)
            try:
                db.execute("PRAGMA journal_mode = OFF")
                create(db, "main", (), ())
            finally:
                db.close()
        snapshot.index.merge_into(tmp)
        _write_stamp(tmp, stamp)
        return _install(root, tmp)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _copy(fd: int, dest: Path) -> None:
    with open(dest, "wb") as out:
        offset = 0
        while chunk := os.pread(fd, _CHUNK, offset):
            out.write(chunk)
            offset += len(chunk)


def compact_keeping(root: Path, journal: Journal, lock_timeout: float) -> bool:
    """Compact the run index journal (``Journal.compact``) and leave a snapshot on disk that matches the new
    file: the snapshot there plus the old file's lines after it, if it matched the old file (a copy and a few
    rows), else one built from the compacted journal, which the compaction has just read whole."""
    with journal.lock.existing() as present:
        if not present:
            return True
        journal.refresh(repair=True)
        carried = _carry(root, journal, lock_timeout)
        try:
            if not journal.compact():
                return False
            try:
                _keep(root, journal, carried)
            except (OSError, sqlite3.Error, SnapshotUnreadable):
                pass  # the journal is compacted; the snapshot on disk does not match it, and is rebuilt when read
            return True
        finally:
            if carried is not None:
                carried[0].unlink(missing_ok=True)
                carried[1].close()


def _keep(root: Path, journal: Journal, carried: tuple[Path, RunIndex] | None) -> None:
    """After a compaction (the lock held, ``journal`` read whole): the snapshot on disk, for the new file."""
    if journal.inode is None or journal.damaged or journal.zeros:
        return
    stamp = Stamp.of_file(journal.path, journal.inode, journal.offset)
    if stamp is None:
        return
    if carried is not None:
        tmp, overlay = carried
        overlay.merge_into(tmp)
        _write_stamp(tmp, stamp)
        _install(root, tmp).close()
    else:
        written(root, journal.tables.get("runs", {}).values(), journal.tables.get("sessions", {}).values(),
                stamp).close()


def _carry(root: Path, journal: Journal, lock_timeout: float) -> tuple[Path, RunIndex] | None:
    """Before a compaction (the journal's lock held, the file whole): a copy of the snapshot on disk, and the
    journal's lines after it as an overlay, if it matches the journal; None otherwise."""
    if journal.damaged or journal.zeros or journal.cut_snapshot or not journal.loaded:
        return None
    try:
        src = os.open(root / NAME, os.O_RDONLY)
    except OSError:
        return None
    tmp: Path | None = None
    overlay: RunIndex | None = None
    try:
        tmp = _temp(root)
        _copy(src, tmp)
        attached = RunIndex(_uri(tmp))
        try:
            stamp = _read_stamp(attached)
        finally:
            attached.close()
        fd = os.open(journal.path, os.O_RDONLY)
        try:
            matches = stamp is not None and stamp.offset <= journal.offset and stamp.holds(fd)
        finally:
            os.close(fd)
        if not matches or stamp is None:
            raise LookupError
        overlay = RunIndex()
        reader = Journal(journal.path, INDEX_KEYS, lock_timeout)
        reader.start_at(stamp.inode, stamp.offset)
        reader.on_change = overlay.apply
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", StoreDamageWarning)
            reader.refresh()
        reader.close()
        if caught or reader.damaged or reader.zeros or (reader.inode, reader.offset) != (journal.inode, journal.offset):
            raise LookupError
        return tmp, overlay
    except (LookupError, OSError, sqlite3.Error, SnapshotUnreadable):
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        if overlay is not None:
            overlay.close()
        return None
    finally:
        os.close(src)

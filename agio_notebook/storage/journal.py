"""An append-only JSON-lines journal that TinyDB can read.

Layout of a journal file::

    {"agio_journal": 1, "rewrite": "<random>", "snapshot": {"steps": {"1": {...}, "2": {...}}, "events": {...}}}
    {"t": "steps", "d": {...}}          <- upsert: replaces the doc with the same key
    {"t": "steps", "k": "<key>", "x": 1} <- delete

A named journal (``Repository.journal``: memory, execution records, …) also writes each upsert's key,
``{"t": ..., "k": ..., "d": ...}``, and its snapshot line a ``"keys"`` map beside the documents, so it
reads right without its owner's key functions: that is how ``agio store migrate`` and the exports carry
every journal, whatever its name. (A line without a key, written before, falls back to the doc's ``id``,
else to its content.)

A commit is one ``write`` of whole lines and one ``fsync``: its cost depends on neither the file's
size nor the store's. Replaying the file (snapshot, then lines in order; the last version of a key
wins) gives TinyDB's ``{table: {doc_id: doc}}``, with doc ids assigned in order of first appearance,
so two writers never hand out the same id. Compaction rewrites the snapshot atomically (temp file,
fsync, rename, directory fsync); each rewrite names itself with a random ``rewrite`` id, so its first bytes
tell it from every other version of the file (what an index derived from the file checks, see
:mod:`.run_index_file`).

A trailing line without its newline is a write that never completed (it was never reported
committed): readers ignore it, the next writer truncates it under the lock. A bad line anywhere else
is damage: reported (:class:`StoreDamageWarning`, naming the file and where) and skipped.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import secrets
from pathlib import Path
from typing import Any, Callable, Iterable

import orjson
from tinydb.storages import Storage

from ..core import StoreError
from .damage import Damage, report, salvage_snapshot
from .durability import file_identity
from .locking import FileLock, LockTimeout, native_flock

Doc = dict[str, Any]
KeyFn = Callable[[Doc], str]

JOURNAL_VERSION = 1


def fsync_path(path: Path) -> None:
    """fsync a file, or a directory (its entries), by name."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


fsync_dir = fsync_path


def atomic_write(path: Path, data: bytes, lock: FileLock | None = None) -> None:
    """Replace ``path`` with ``data`` so a crash leaves either the old or the new file, never a torn one.

    ``lock``: the held lock of ``path``. A lock on the file itself passes to the new file (locked
    before it takes the name), so nobody writes to either file in between; one beside it stays.
    """
    if lock is not None and not lock.on_file:
        lock = None
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
        if lock is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)  # nobody else knows this file yet: at once
        os.replace(tmp, path)
    except BaseException:
        os.close(fd)
        raise
    if lock is not None:
        lock.adopt(fd)
    else:
        os.close(fd)
    fsync_dir(path.parent)


class Journal:
    """One journal file: its replayed state in memory, kept current by reading only new bytes."""

    def __init__(self, path: Path, keys: dict[str, KeyFn], lock_timeout: float = 10.0, *, keyed_lines: bool = False):
        self.path = path
        self.keys = keys
        self.keyed_lines = keyed_lines  # each upsert names its key (a named journal: see the module's docstring)
        self.lock = FileLock(path, lock_timeout, on_file=native_flock(path.parent))
        self.tables: dict[str, dict[str, Doc]] = {}  # table -> key -> doc (insertion order = doc id order)
        self.base_ids: dict[str, dict[str, int]] = {}  # doc ids fixed by the snapshot line
        self.lines = 0  # change lines after the snapshot
        self.damage: list[Damage] = []  # what could not be read (reported as it was found)
        self.tail_damage: Damage | None = None  # an incomplete last record (a writer removes it)
        self.cut_snapshot = False  # the snapshot line is cut off: readable, but never written to
        self.zeros = False  # zero bytes were read: a region the disk lost, which a log's replay may still fill in
        self._offset = 0
        self._inode: int | None = None
        self._fd: int | None = None
        self._identity = (0, 0)  # (inode, generation) of the file open for appends
        self._tail: int | None = None  # size of an incomplete last record already reported
        self.on_change: Callable[[str, str, Doc | None], None] | None = None
        self.new_file = False  # created by an append not yet synced: its directory entry needs an fsync too

    # -- reading -------------------------------------------------------------
    def _reset(self) -> None:
        self.tables = {}
        self.base_ids = {}
        self.lines = 0
        self.damage = []
        self.tail_damage = None
        self.cut_snapshot = False
        self.zeros = False
        self._tail = None
        self._offset = 0
        if self.on_change is not None:
            self.on_change("", "", None)  # everything is forgotten

    def _damaged(self, what: str, line: int | None = None) -> Damage:
        damage = Damage(self.path, what, line)
        self.damage.append(damage)
        report(damage, stacklevel=4)
        return damage

    @property
    def damaged(self) -> bool:
        return bool(self.damage) or self.tail_damage is not None

    @property
    def loaded(self) -> bool:
        """Whether the file has been read (a refresh found it)."""
        return self._inode is not None

    @property
    def offset(self) -> int:
        """How many bytes of the file have been read: the end of its last complete line."""
        return self._offset

    @property
    def inode(self) -> int | None:
        """The inode number of the file read (None: not read, or gone)."""
        return self._inode

    def start_at(self, inode: int, offset: int) -> None:
        """Read the file from ``offset`` on, as long as it is the file ``inode``: what comes before is held
        elsewhere (a derived index's snapshot). ``tables`` then holds what is read from there, and
        ``on_change`` hears it; another file under the name, or a shorter one, is read from its start."""
        self._inode, self._offset = inode, offset

    def refresh(self, *, repair: bool = False) -> bool:
        """Apply what other writers appended since we last looked (a stat when nothing changed).

        Damage is reported (:class:`StoreDamageWarning`) and skipped. With ``repair`` (only under
        the lock) an incomplete last record is truncated away; a cut snapshot line never is.
        """
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._inode is not None:
                self._close_fd()
                self._reset()
                self._inode = None
            return False
        if st.st_ino == self._inode and (st.st_size == self._offset or (st.st_size == self._tail and not repair)):
            return True
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return self.refresh(repair=repair)
        with f:
            st = os.fstat(f.fileno())  # the file we read, even if a compaction replaced it since the stat
            if st.st_ino != self._inode or st.st_size < self._offset:
                self._close_fd()
                self._reset()
                self._inode = st.st_ino
            if st.st_size == self._offset or (st.st_size == self._tail and not repair):
                return True
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        if end < len(data) and not repair and self.lock.depth == 0:
            # maybe a write in flight: look again under the lock before calling it damage
            try:
                with self.lock.existing():  # (gone meanwhile: refresh says so)
                    return self.refresh()
            except LockTimeout:
                pass  # a writer stuck holding the lock: report what we see
        if end == 0 and self._offset == 0 and data.startswith(b'{"agio_journal"'):
            self._salvage_snapshot(data)
            return True
        self._apply(data[:end])
        self._offset += end
        if end < len(data) and self._tail != self._offset + len(data) - end:
            self._tail = self._offset + len(data) - end
            self.tail_damage = self._damaged(f"ends with an incomplete record ({len(data) - end} bytes, a write cut short by a "
                          f"crash or a truncated file){'; it is removed' if repair else '; it is skipped'}")
        if end < len(data) and repair:
            # a write cut short (writers only write under the lock we hold): it was never reported
            # committed, and its bytes cannot be read, so it goes
            with open(self.path, "r+b") as f:
                f.truncate(self._offset)
                os.fsync(f.fileno())
            self._tail = None
            if self.tail_damage in self.damage:
                self.damage.remove(self.tail_damage)
            self.tail_damage = None
        return True

    def _salvage_snapshot(self, data: bytes) -> None:
        """A compacted file cut inside its snapshot line: keep every document before the cut."""
        salvaged = salvage_snapshot(data)
        self._load_snapshot({"agio_journal": JOURNAL_VERSION, "snapshot": salvaged})
        self.cut_snapshot = True
        self._offset = self._tail = len(data)
        count = sum(len(docs) for docs in salvaged.values())
        self._damaged(f"its snapshot line is cut off after {len(data)} bytes (no end of line); {count} "
                      "records before the cut were read, the rest is lost", 1)

    def _apply(self, data: bytes) -> None:
        if not data:
            return
        tables = self.tables
        keys = self.keys
        lines = data.split(b"\n")
        lines.pop()  # after the final newline
        first = self._offset == 0
        for n, raw in enumerate(lines):
            if b"\0" in raw:
                self.zeros = True
                raw = raw.strip(b"\0")
            if not raw.strip():
                continue
            try:
                rec = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                if first and n == 0 and raw.startswith(b'{"agio_journal"') and not tables:
                    salvaged = salvage_snapshot(raw)
                    self._load_snapshot({"agio_journal": JOURNAL_VERSION, "snapshot": salvaged})
                    self._damaged(f"its snapshot line is corrupt ({exc}); the "
                                  f"{sum(len(d) for d in salvaged.values())} records before the damage were read", 1)
                    continue
                self._damaged(f"unreadable record at byte {self._offset + sum(len(x) + 1 for x in lines[:n])}, "
                              f"skipped ({exc}): {raw[:80]!r}", None)
                continue
            if first and n == 0 and isinstance(rec, dict) and "snapshot" in rec and not tables:
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
                    key = keys[table](doc) if table in keys else rec.get("k") or default_key(doc)
                    tables.setdefault(table, {})[key] = doc
            except (KeyError, TypeError, AttributeError):
                self._damaged(f"malformed record, skipped: {raw[:80]!r}")
                continue
            self.lines += 1
            if self.on_change is not None:
                self.on_change(table, key, doc)

    def _load_snapshot(self, rec: Doc) -> None:
        if rec.get("agio_journal", 0) > JOURNAL_VERSION:
            raise StoreError(f"store file {self.path} has journal version {rec['agio_journal']}, newer than "
                             f"this agio-notebook understands ({JOURNAL_VERSION}); upgrade agio-notebook")
        for table, docs in (rec.get("snapshot") or {}).items():
            key_fn = self.keys.get(table)
            stored = (rec.get("keys") or {}).get(table) or {}
            target = self.tables.setdefault(table, {})
            ids = self.base_ids.setdefault(table, {})
            for doc_id, doc in sorted(docs.items(), key=lambda kv: int(kv[0])):
                key = key_fn(doc) if key_fn is not None else stored.get(doc_id) or f"#{doc_id}"
                target[key] = doc
                ids[key] = int(doc_id)
                if self.on_change is not None:
                    self.on_change(table, key, doc)

    # -- writing -------------------------------------------------------------
    def _open_fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self._identity = file_identity(self._fd)
            if self._inode is None:
                self._inode = self._identity[0]
        return self._fd

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def append(self, records: Iterable[tuple[str, Doc]], deletes: Iterable[tuple[str, str]] = (), *,
               sync: bool = True) -> tuple[Path, int, tuple[int, int], bytes] | None:
        """Durably append upserts ``(table, doc)`` and deletes ``(table, key)``: one write, one fsync.

        ``sync=False`` leaves the fsync to the caller (a group commit makes many appends durable with
        one sync, see :mod:`agio_notebook.storage.wal`); the data is visible to readers at once.
        Returns what was appended and where: (file, offset, (inode, generation), bytes); None when
        nothing was.
        """
        keys = self.keys
        keyed = [(table, keys[table](doc) if table in keys else default_key(doc), doc) for table, doc in records]
        deletes = list(deletes)
        if self.keyed_lines:
            parts = [b'{"t":"%s","k":%s,"d":%s}\n' % (table.encode(), orjson.dumps(key), orjson.dumps(doc))
                     for table, key, doc in keyed]
        else:
            parts = [b'{"t":"%s","d":%s}\n' % (table.encode(), orjson.dumps(doc)) for table, _, doc in keyed]
        parts += [orjson.dumps({"t": table, "k": key, "x": 1}) + b"\n" for table, key in deletes]
        if not parts:
            return None
        data = b"".join(parts)
        with self.lock:
            existed = self.refresh(repair=True)
            self.check_writable()
            fd = self._open_fd()
            if not existed or self._offset == 0:  # its first bytes: its directory entry may not be on disk yet
                self.new_file = True
            offset = self._offset
            os.write(fd, data)
            if sync:
                self.sync()
            self._offset += len(data)
            self._apply_records(keyed, deletes)
            return self.path, offset, self._identity, data

    def sync(self) -> None:
        """Make what was appended durable: the file's fsync, and its directory's when the file is new."""
        if self._fd is None:
            fsync_path(self.path)
        else:
            os.fsync(self._fd)
        if self.new_file:
            fsync_dir(self.path.parent)
            self.new_file = False

    def check_writable(self) -> None:
        if self.cut_snapshot:
            raise StoreError(f"store file {self.path} is damaged (its snapshot line is cut off) and is not "
                             "written to; nothing was lost: run `agio store repair` to salvage it")

    def _apply_records(self, records: list[tuple[str, str, Doc]], deletes: list[tuple[str, str]]) -> None:
        """What we just wrote (``(table, key, doc)``), applied without parsing it back."""
        tables = self.tables
        for table, key, doc in records:
            tables.setdefault(table, {})[key] = doc
            if self.on_change is not None:
                self.on_change(table, key, doc)
        for table, key in deletes:
            tables.get(table, {}).pop(key, None)
            if self.on_change is not None:
                self.on_change(table, key, None)
        self.lines += len(records) + len(deletes)

    def compact(self) -> bool:
        """Rewrite the file as one snapshot line (atomically); doc ids are kept.

        A damaged file is left as it is (``False``): compacting it would drop the evidence;
        ``repair`` salvages it and keeps the original.
        """
        with self.lock.existing() as present:
            if not present:
                return True
            self.refresh(repair=True)
            if self.damaged or self.cut_snapshot:
                return False
            if not self.lines:
                return True
            atomic_write(self.path, self.snapshot_bytes(), self.lock)
            self._close_fd()
            self._reset()
            self._inode = None
            self.refresh()
            return True

    def tinydb_data(self, keys: dict[str, dict[str, str]] | None = None) -> dict[str, dict[str, Doc]]:
        """The state in TinyDB's layout: ``{table: {doc_id: doc}}`` (and each doc's key into ``keys``)."""
        out: dict[str, dict[str, Doc]] = {}
        for table, docs in self.tables.items():
            fixed = self.base_ids.get(table, {})
            next_id = max(fixed.values(), default=0) + 1
            ids: dict[str, Doc] = {}
            names = keys.setdefault(table, {}) if keys is not None else None
            for key, doc in docs.items():
                doc_id = fixed.get(key)
                if doc_id is None:
                    doc_id, next_id = next_id, next_id + 1
                ids[str(doc_id)] = doc
                if names is not None:
                    names[str(doc_id)] = key
            out[table] = ids
        return out

    def snapshot_bytes(self, data: dict[str, dict[str, Doc]] | None = None) -> bytes:
        line: dict[str, Any] = {"agio_journal": JOURNAL_VERSION, "rewrite": secrets.token_hex(8)}
        if data is None:
            keys: dict[str, dict[str, str]] | None = {} if self.keyed_lines else None
            line["snapshot"] = self.tinydb_data(keys)
            if keys is not None:
                line["keys"] = keys
        else:
            line["snapshot"] = data
        return orjson.dumps(line) + b"\n"

    def close(self) -> None:
        self._close_fd()
        self.lock.close()


def default_key(doc: Doc) -> str:
    """The key of a doc whose table has no key function: its ``id``, else its content (never one key for
    every doc without an id)."""
    if "id" in doc:
        return str(doc["id"])
    return "#" + hashlib.sha256(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


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
            atomic_write(journal.path, journal.snapshot_bytes(data), journal.lock)

    def close(self) -> None:
        self._journal.close()

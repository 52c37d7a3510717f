"""Maintenance of the TinyDB store: stats, verify, repair, delete, prune, compact.

Mixed into :class:`TinyDBRepository`. Every change to a session happens holding the session's claim
(so never under a live run) and the journal's lock, and ends in an atomic rewrite (temp file, fsync,
rename, directory fsync): the files stay plain TinyDB data after every operation.
"""

from __future__ import annotations

import os
import shutil
import time
import warnings
from collections import Counter
from contextlib import contextmanager
from datetime import date, datetime
from pathlib import Path
from typing import Any, Iterator

from ..core import NotFoundError, SessionBusyError, StoreError
from .damage import Damage, StoreDamageWarning, acknowledgements
from .journal import Journal, atomic_write, fsync_dir
from .layout import INDEX_KEYS, SESSION_KEYS
from .prune import prune
from .reports import Pruned, Repaired, SessionSize, StoreStats


def _quiet_journal(path: Path, keys: dict, lock_timeout: float) -> Journal:
    """A fresh replay of one file whose damage is collected (``journal.damage``), not warned about."""
    journal = Journal(path, keys, lock_timeout)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreDamageWarning)
        journal.refresh()
    return journal


class TinyDBMaintenance:
    """Stats, verify, repair, delete, prune and compaction of a TinyDB store, mixed into
    ``TinyDBRepository``: it works through that class's files and locks (``root``, ``lock_timeout``,
    ``_lock``, ``_index``, ``_journal()``, ``_journals``, ``_claimed``...), and imports nothing of it."""

    def _session_paths(self) -> list[Path]:
        return sorted(p for p in self._sessions_dir.iterdir() if p.name.endswith(".jsonl"))

    # -- stats -----------------------------------------------------------------------
    def stats(self, top: int = 5) -> StoreStats:
        """Sessions, runs (by status), steps, events and bytes; the ``top`` largest sessions by bytes."""
        out = StoreStats()
        sizes: list[SessionSize] = []
        statuses: Counter[str] = Counter()
        for path in self._session_paths():
            journal = Journal(path, SESSION_KEYS, self.lock_timeout)
            journal.refresh()  # damage is reported as a warning, the rest is counted
            tables = journal.tables
            journal.close()
            size = path.stat().st_size
            session_ids = list(tables.get("session", {}))
            steps, runs = len(tables.get("steps", {})), len(tables.get("runs", {}))
            statuses.update(d.get("status", "?") for d in tables.get("runs", {}).values())
            out.sessions += 1
            out.steps += steps
            out.runs += runs
            out.events += len(tables.get("events", {}))
            sizes.append(SessionSize(session_ids[0] if session_ids else path.stem, steps, runs, size))
        out.bytes = sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())  # all it takes on disk
        out.runs_by_status = dict(statuses)
        out.largest = sorted(sizes, key=lambda s: -s.bytes)[:top]
        return out

    # -- verify and repair ---------------------------------------------------------------
    def verify(self) -> list[Damage]:
        """Every problem in the store: unreadable lines, cut files, two current steps on one sequence."""
        problems: list[Damage] = []
        for path, keys in [(self.root / "index.jsonl", INDEX_KEYS)] + [(p, SESSION_KEYS)
                                                                       for p in self._session_paths()]:
            journal = _quiet_journal(path, keys, self.lock_timeout)
            problems += journal.damage
            if keys is SESSION_KEYS:
                lost = self._lost_of(path, journal)
                if lost is not None:
                    problems.append(lost)
                seqs = Counter(d.get("sequence") for d in journal.tables.get("steps", {}).values()
                               if not d.get("superseded"))
                problems += [Damage(path, f"{n} current steps share sequence {seq}")
                             for seq, n in sorted(seqs.items(), key=lambda kv: str(kv[0])) if n > 1]
            journal.close()
        return problems

    def repair(self) -> list[Repaired]:
        """Rewrite each damaged file with every readable record; the original stays beside it.

        The original is kept as ``<file>.damaged-<UTC time>`` (not read by the store).
        """
        done: list[Repaired] = []
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        for path, keys in [(self.root / "index.jsonl", INDEX_KEYS)] + [(p, SESSION_KEYS)
                                                                       for p in self._session_paths()]:
            with self._lock:
                journal = Journal(path, keys, self.lock_timeout)
                try:
                    with journal.lock.existing() as present:
                        if not present:
                            continue
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore", StoreDamageWarning)
                            journal.refresh()
                        lost = self._lost_of(path, journal) if keys is SESSION_KEYS else None
                        if not journal.damaged and lost is None:
                            continue
                        if lost is not None:  # recorded: reads stop warning, until more is lost
                            journal.tables.setdefault("lost", {}).update(
                                {d["id"]: d for d in acknowledgements(lost, stamp)})
                        kept = path.with_name(f"{path.name}.damaged-{stamp}")
                        try:
                            os.link(path, kept)  # the original bytes, untouched, under a new name
                        except OSError:
                            shutil.copy2(path, kept)
                        records = sum(len(docs) for docs in journal.tables.values())
                        atomic_write(path, journal.snapshot_bytes(), journal.lock)
                        done.append(Repaired(path, kept, records, (*journal.damage, *([lost] if lost else []))))
                finally:
                    journal.close()
                self._forget(path)
        if done:
            self._repaired = False
            self._index.refresh()
            self._repair_index()
        return done

    def _lost_of(self, path: Path, journal: Journal) -> Damage | None:
        """Steps the session in ``journal`` lost (see ``TinyDBRepository._lost_in``)."""
        session_ids = list(journal.tables.get("session", {})) or [d["session_id"] for d in
                                                                   journal.tables.get("steps", {}).values()][:1]
        return self._lost_in(path, session_ids[0], journal.tables) if session_ids else None

    def _forget(self, path: Path) -> None:
        """Drop cached state of a file rewritten or removed here (it is re-read on next use)."""
        if path == self.root / "index.jsonl":
            self._index.close()
            self._open_index()
            return
        for sid, journal in list(self._journals.items()):
            if journal.path == path:
                journal.close()
                del self._journals[sid]
                self._seq_index.pop(sid, None)

    # -- delete and prune -------------------------------------------------------------------
    @contextmanager
    def _claimed(self, session_id: str, what: str) -> Iterator[None]:
        """Hold the session's claim while changing it: never under a live run."""
        self.claim_session(session_id, what)
        try:
            yield
        finally:
            self.release_session(session_id, linger=False)

    def delete_session(self, session_id: str) -> Pruned:
        """Remove a session with all its steps, runs and events (refused while a run holds it)."""
        path = self.session_file(session_id)
        if not path.exists() and self.get_session(session_id) is None:
            raise NotFoundError(f"no session {session_id!r} in the store at {self.root}")
        with self._claimed(session_id, "a delete"), self._lock:
            self._settle_logs()
            journal = self._journal(session_id)
            tables = journal.tables
            gone = Pruned(1, len(tables.get("runs", {})), len(tables.get("steps", {})), len(tables.get("events", {})))
            with journal.lock.existing() as present:
                if present:
                    path.unlink()
                    fsync_dir(path.parent)
            self._forget(path)
            self._index.refresh()
            runs = [k for k, d in self._index.tables.get("runs", {}).items() if d["session_id"] == session_id]
            self._index.append((), [("sessions", session_id), *(("runs", k) for k in runs)])
        return gone

    def delete_run(self, run_id: str) -> Pruned:
        """Remove one run: its record, its events and every step it wrote (all attempts)."""
        run = self.get_run(run_id)
        if run is None:
            raise NotFoundError(f"no run {run_id!r} in the store at {self.root}")
        with self._claimed(run.session_id, "a delete"), self._lock:
            return self._remove(run.session_id, lambda t, d: d.get("run_id" if t != "runs" else "id") == run_id)

    def _remove(self, session_id: str, doomed: Any) -> Pruned:
        """Delete the docs ``doomed(table, doc)`` picks from a session (claim held), then compact it."""
        journal = self._journal(session_id)
        journal.check_writable()
        deletes = [(table, key) for table in ("steps", "events", "runs")
                   for key, doc in journal.tables.get(table, {}).items() if doomed(table, doc)]
        if not deletes:
            return Pruned()
        count = Counter(table for table, _ in deletes)
        journal.append((), deletes)
        journal.compact()
        runs = [key for table, key in deletes if table == "runs"]
        if runs:
            self._index.refresh()
            self._index.append((), [("runs", k) for k in runs if k in self._index.tables.get("runs", {})])
        return Pruned(0, count["runs"], count["steps"], count["events"])

    def prune(self, *, superseded: bool = False, older_than: datetime | date | str | float | None = None) -> Pruned:
        """Remove superseded attempts (their steps, and runs replaced by a retry), and/or whole sessions
        whose last activity is before ``older_than``. Sessions a live run holds are left alone."""
        return prune(self, superseded=superseded, older_than=older_than, remove_superseded=self._prune_superseded)

    def _prune_superseded(self) -> Pruned:
        total = Pruned()
        for s in self.list_sessions():
            try:
                with self._claimed(s.session_id, "a prune"), self._lock:
                    runs = self._journal(s.session_id).tables.get("runs", {})
                    gone = {k for k, d in runs.items() if d.get("superseded_by")}
                    total += self._remove(s.session_id, lambda t, d: bool(
                        d.get("superseded") if t == "steps" else d.get("id") in gone if t == "runs"
                        else d.get("run_id") in gone))
            except SessionBusyError:
                continue
            except StoreError as exc:  # a damaged session: reported, left for repair
                warnings.warn(str(exc), StoreDamageWarning, stacklevel=2)
        return total

    # -- compaction --------------------------------------------------------------------------
    def compact(self, min_lines: int = 1) -> list[Path]:
        """Rewrite every journal with at least ``min_lines`` change lines as one snapshot (atomic).

        Damaged files are left as they are and returned (``repair`` first).
        """
        skipped: list[Path] = []
        with self._lock:
            cached = {j.path: j for j in self._journals.values()}
            for path in [*self._session_paths(), self.root / "index.jsonl"]:
                journal = self._index if path == self.root / "index.jsonl" else cached.get(path)
                if journal is self._index:
                    journal.refresh()  # (a process that asked only the run query's index has not read it)
                fresh = journal is None
                if fresh:
                    journal = Journal(path, SESSION_KEYS, self.lock_timeout)
                    journal.refresh()
                compacted = journal.lines < min_lines or (
                    self._compact_index() if journal is self._index else journal.compact())
                if not compacted:
                    skipped.append(path)
                if fresh:
                    journal.close()
        return skipped

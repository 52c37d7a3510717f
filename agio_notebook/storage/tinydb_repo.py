"""TinyDBRepository: the default store — a directory of TinyDB-readable journal files.

Durable (every commit fsynced before it returns), safe across processes (file locks; each writer
first reads what others appended), fast as it grows (an append touches one session file and never
re-reads or rewrites it). See ``docs/store.md``.
"""

from __future__ import annotations

import atexit
from collections import Counter
import os
import threading
import weakref
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, TypeVar

import orjson

from ..core import AgentRun, AgentSession, RunStatus, SessionBusyError, Step, StepEvent, StoreError, now
from .claims import ClaimFiles, Holder
from .damage import Damage, lost_steps, report, salvage_snapshot
from .durability import FilesystemSync
from .journal import Journal, atomic_write, fsync_dir, fsync_path
from .layout import INDEX_KEYS, SCHEMA_VERSION, SESSION_KEYS, session_file_name, store_root
from .locking import FileLock, LockTimeout, native_flock
from .run_index import RunIndex
from .run_index_file import compact_keeping
from .run_index_follow import FollowedRunIndex
from .run_query import Recheck, RunFilter, RunPage, check_limit, page_of, with_live_totals
from .tinydb_maintenance import TinyDBMaintenance
from .wal import Append, DeadLogs, WriteAheadLog, has_logs, replay

T = TypeVar("T")

_MAX_OPEN_FILES = 128
_COMPACT_AFTER_LINES = 64


class TinyDBRepository(TinyDBMaintenance):
    def __init__(self, path: str | os.PathLike[str] | None = None, *, lock_timeout: float = 10.0):
        self.root = store_root(path)
        self.files_root = self.root  # workspaces and other local files live in the store directory
        self.lock_timeout = lock_timeout
        self._sessions_dir = self.root / "sessions"
        try:
            self._sessions_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the store at {self.root}: {exc}") from None
        self._check_meta()
        self._syncfs = FilesystemSync(self.root)
        self._replay_dead_logs()  # what a stopped machine lost of reported commits is put back
        self._open_index()  # read when first needed (recovery below asks the run query's index first)
        self._runs = FollowedRunIndex(self.root, lock_timeout)  # the run query's index (storage/run_index*.py)
        self._journals: dict[str, Journal] = {}
        self._written: dict[int, Journal] = {}  # session files written (so left open) since the last limit
        self._lock = threading.RLock()
        self._repaired = False
        self._claims = ClaimFiles()
        # claims have their own lock, so a run starting on the event loop never waits behind a
        # commit holding ``_lock``; taken after ``_lock`` when both are needed, never before it
        self._claim_lock = threading.Lock()
        self._seq_index: dict[str, dict[int, str]] = {}  # session -> sequence -> current step id
        self._recheck = Recheck()  # when the run query last looked for runs whose process died, per session
        self._wal = WriteAheadLog(self.root, self._make_durable)
        _live.add(self)
        self.recover_interrupted()  # runs left `running` by a process that died are found on open

    # -- meta ------------------------------------------------------------------
    def _check_meta(self) -> None:
        meta_path = self.root / "meta.json"
        if not meta_path.exists():
            atomic_write(meta_path, orjson.dumps({"schema_version": SCHEMA_VERSION,
                                                  "layout": "session-journals"}, option=orjson.OPT_INDENT_2))
        try:
            meta = orjson.loads(meta_path.read_bytes())
        except (orjson.JSONDecodeError, OSError) as exc:
            raise StoreError(f"store metadata {meta_path} is unreadable: {exc}") from None
        version = meta.get("schema_version")
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise StoreError(f"store {self.root} has schema version {version!r}; this agio-notebook reads "
                             f"version {SCHEMA_VERSION} (upgrade agio-notebook to open it)")
        self.schema_version = version

    # -- session journals --------------------------------------------------------
    def session_file(self, session_id: str) -> Path:
        return self._sessions_dir / session_file_name(session_id)

    def claim_file(self, session_id: str) -> Path:
        return self._sessions_dir / (session_file_name(session_id)[:-len(".jsonl")] + ".claim")

    def _journal(self, session_id: str, *, refresh: bool = True) -> Journal:
        journal = self._journals.get(session_id)
        if journal is None:
            journal = self._journals[session_id] = Journal(self.session_file(session_id), SESSION_KEYS,
                                                           self.lock_timeout)
            journal.on_change = self._sequence_tracker(session_id)
        if refresh:
            journal.refresh()
        return journal

    def _limit_open_files(self, keep: Journal) -> None:
        """Close the session files written since the last time there were too many (each write
        leaves its file open for the next): counted as they are written, not by a walk over all."""
        if len(self._written) < _MAX_OPEN_FILES:
            return
        for journal in self._written.values():
            if journal is not keep:
                journal.close()
        self._written = {id(keep): keep}

    def _sequence_tracker(self, session_id: str):
        """Keeps ``sequence -> current step id`` of a session as its journal is replayed or written."""
        by_seq = self._seq_index.setdefault(session_id, {})
        by_id: dict[str, int] = {}

        def on_change(table: str, key: str, doc: dict[str, Any] | None) -> None:
            if table == "":
                by_seq.clear()
                by_id.clear()
            if table != "steps":
                return
            old = by_id.pop(key, None)
            if old is not None and by_seq.get(old) == key:
                del by_seq[old]
            if doc is not None and not doc.get("superseded"):
                by_seq[doc["sequence"]] = key
                by_id[key] = doc["sequence"]

        return on_change

    def _check_sequences(self, session_id: str, steps: list[dict[str, Any]]) -> None:
        """Under the session's lock: a new current step may not take a sequence another current step holds."""
        current = self._seq_index.get(session_id, {})
        after: dict[int, str | None] = {}  # the sequences this batch touches, as they are after it
        for doc in steps:
            seq, step_id = doc["sequence"], doc["id"]
            holder = after[seq] if seq in after else current.get(seq)
            if doc.get("superseded"):
                if holder == step_id:
                    after[seq] = None
                continue
            if holder is not None and holder != step_id:
                raise StoreError(f"session {session_id}: sequence {seq} is already taken by step {holder} "
                                 "(another run wrote to this session); nothing was written")
            after[seq] = step_id

    # -- named journals (records other systems keep beside the sessions) --------------------------
    def journal(self, name: str, keys: dict[str, Any]) -> Journal:
        """The journal file ``<root>/<name>.jsonl`` (e.g. "memory", "executions/BATCH"), read and current."""
        path = self.root / f"{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        journal = Journal(path, keys, self.lock_timeout, keyed_lines=True)  # readable without the owner's keys
        journal.refresh()
        return journal

    def journal_names(self, prefix: str = "") -> list[str]:
        """Named journals whose name starts with ``prefix``; "" lists them all, in subfolders too (not the
        sessions, the write-ahead log, nor the folders kept for others such as workspaces)."""
        folder, _, start = prefix.rpartition("/")
        base = self.root / folder if folder else self.root
        if not base.is_dir():
            return []
        names = [f"{folder}/{p.stem}" if folder else p.stem for p in base.glob("*.jsonl") if p.stem.startswith(start)]
        if not folder:
            from .contents import FOLDERS

            own = {self._sessions_dir.name, "wal", *FOLDERS}
            names += [p.relative_to(self.root).with_suffix("").as_posix()
                      for sub in base.iterdir() if sub.is_dir() and not sub.is_symlink() and sub.name not in own
                      and sub.name.startswith(start) for p in sub.rglob("*.jsonl")]
        return sorted(n for n in names if n != "index")

    # -- session claims ------------------------------------------------------------
    def claim_session(self, session_id: str, what: str = "a run") -> None:
        """Hold ``session_id`` for one run, across processes; :class:`SessionBusyError` names the holder.

        A claim left by a dead process is taken over, and that process's runs become ``interrupted``.
        """
        with self._claim_lock:
            if self._claims.holds(session_id):
                raise SessionBusyError(f"session {session_id} is in use by another run of this process")
            previous = self._claims.claim(session_id, self.claim_file(session_id), what)
        try:
            if previous is not None or self.session_file(session_id).exists():  # a new session has no past
                with self._lock:
                    self._interrupt_runs(session_id, previous)
        except BaseException:
            self.release_session(session_id, linger=False)
            raise

    def release_session(self, session_id: str, *, linger: bool = True) -> None:
        """``linger``: a run's release, finished on a worker thread (see :class:`ClaimFiles`)."""
        with self._claim_lock:
            self._claims.release(session_id, linger=linger)

    def session_releasing(self, session_id: str) -> bool:
        """Released by this process a moment ago, its lock still held (a claim takes it back at once)."""
        return self._claims.releasing(session_id)

    def session_holder(self, session_id: str) -> Holder | None:
        """Who holds the session now (None: nobody)."""
        if self._claims.releasing(session_id):
            return None
        return ClaimFiles.holder(self.claim_file(session_id))

    def recover_interrupted(self, session_id: str | None = None) -> list[str]:
        """Mark ``interrupted`` every run left ``running`` in a session nobody holds; returns their ids."""
        found: list[str] = []
        with self._lock:
            sessions = self._sessions_left_by_dead_holders() if session_id is None else set()
            sessions |= self._running_sessions(session_id)
            for sid in sorted(sessions):
                with self._claim_lock:
                    if self._claims.holds(sid) or self.session_holder(sid) is not None:
                        continue
                    try:
                        previous = self._claims.claim(sid, self.claim_file(sid), "recovery of interrupted runs")
                    except SessionBusyError:
                        continue  # a run just started there
                try:
                    found += self._interrupt_runs(sid, previous)
                except StoreError as exc:
                    report(Damage(self.session_file(sid), f"its interrupted runs could not be marked: {exc}"))
                finally:
                    self.release_session(sid, linger=False)
        return found

    def _running_sessions(self, session_id: str | None) -> set[str]:
        """Sessions with a run recorded ``running`` (in ``session_id`` only, if given): from the run query's index
        when its snapshot on disk makes it current without reading the whole run index (a panel opening a
        large store), else from the run index."""
        if not self._index.loaded:
            found = self._runs.ask(lambda index: index.running_sessions(session_id), None)
            if found is not None:
                return found
        self._index.refresh()
        return {d["session_id"] for d in self._index.tables.get("runs", {}).values()
                if d.get("status") == RunStatus.RUNNING.value and (session_id is None or d["session_id"] == session_id)}

    def _sessions_left_by_dead_holders(self) -> set[str]:
        """Sessions whose lease still names a holder that nobody holds: its process died mid-run.

        A clean release empties the lease, so only a crash leaves one behind. Such a session may
        hold a run the index never heard of, or a record cut short, so recovery visits it.
        """
        found = set()
        for lease in self._sessions_dir.glob("*.claim"):
            try:
                if lease.stat().st_size == 0 or ClaimFiles.holder(lease) is not None:
                    continue
            except OSError:
                continue
            journal = Journal(lease.with_suffix(".jsonl"), SESSION_KEYS, self.lock_timeout)
            try:
                with journal.lock.existing():  # writes finish under this lock: a cut record is the dead writer's
                    journal.refresh(repair=True)
            except (LockTimeout, OSError, StoreError):
                continue  # a read path reports what is wrong with it
            finally:
                journal.close()
            sessions = set(journal.tables.get("session", {}))
            found |= sessions  # each is claimed and released by recovery, which clears its lease
            if not sessions:  # nothing of the session was ever written: just clear the lease
                try:
                    with self._claim_lock:
                        self._claims.claim(f"lease:{lease.name}", lease, "recovery")
                        self._claims.release(f"lease:{lease.name}", linger=False)
                except SessionBusyError:
                    pass
        if found:  # the dead writer may have been cut short writing the index too
            try:
                with self._index.lock:
                    self._index.refresh(repair=True)
            except LockTimeout:
                pass  # a live writer holds it: its next write cuts what a dead one left
        return found

    def _interrupt_runs(self, session_id: str, previous: Holder | None) -> list[str]:
        """Called holding the session's claim: any run still ``running`` there has no live process."""
        if not self.session_file(session_id).exists():
            return []
        journal = self._journal(session_id)
        running = [AgentRun.from_dict(d) for d in journal.tables.get("runs", {}).values()
                   if d.get("status") == RunStatus.RUNNING.value]
        who = f" ({previous.describe()})" if previous is not None else ""
        for run in running:
            run.status = RunStatus.INTERRUPTED
            run.error = f"interrupted: the process running it stopped before the run finished{who}"
            last = [d.get("created_at") or 0.0 for d in journal.tables.get("steps", {}).values()
                    if d.get("run_id") == run.id]
            run.ended_at = max(last) if last else now()
            self.commit(run=run)
        # the index is a cache: a process killed between the session file and the index left it behind
        self._index.refresh()
        stored = journal.tables.get("runs", {})
        settled = [r.id for r in running]
        for run_id, doc in list(self._index.tables.get("runs", {}).items()):
            if doc["session_id"] == session_id and doc.get("status") == RunStatus.RUNNING.value \
                    and run_id in stored and stored[run_id].get("status") != RunStatus.RUNNING.value:
                self._update_index(None, AgentRun.from_dict(stored[run_id]))
                settled.append(run_id)
        return settled

    # -- writes ----------------------------------------------------------------
    def commit(self, *, session: AgentSession | None = None, run: AgentRun | None = None,
               steps: Iterable[Step] = (), events: Iterable[StepEvent] = ()) -> None:
        with self._lock:
            written = self._append_commit(session, run, steps, events, sync=True)
            if written is not None:
                self._update_index(written[1], run)

    def commit_group(self, commits: list[dict[str, Any]]) -> list[BaseException | None]:
        """Make many commits durable together (each as :meth:`commit` would), with one sync for all.

        Each commit is appended to its session file in order; the index gets one append for the
        group; then the group's appends are copied into this process's write-ahead log, and one
        ``fdatasync`` of the log makes them durable (:mod:`.wal`; the files reach the disk at the
        log's next checkpoint). The repository's lock is not held during the sync, so readers on
        other threads wait for the writes, never for the disk. Returns each commit's failure (None:
        durable).
        """
        outcomes: list[BaseException | None] = []
        appends: list[Append] = []
        touched: dict[str, Journal] = {}
        changes: list[tuple[AgentSession | None, AgentRun | None]] = []
        for c in commits:
            try:
                with self._lock:  # taken per commit: readers on the event loop get in between
                    written = self._append_commit(c.get("session"), c.get("run"), c.get("steps", ()),
                                                  c.get("events", ()), sync=False, limit_files=False)
            except Exception as exc:  # noqa: BLE001 - one commit's failure is that commit's alone
                outcomes.append(exc)
                continue
            outcomes.append(None)
            if written is not None:
                journal, session, appended = written
                touched[journal.path.name] = journal
                appends.append(appended)
                changes.append((session, c.get("run")))
        with self._lock:
            try:
                indexed = self._update_index_many(changes, sync=False)
                if indexed is not None:
                    appends.append(indexed)
            except Exception as exc:  # noqa: BLE001 - nothing of the group is known durable
                return [o or exc for o in outcomes]
        try:
            self._wal.log(appends)
        except Exception as exc:  # noqa: BLE001
            return [o or exc for o in outcomes]
        with self._lock:
            if touched:
                self._limit_open_files(next(iter(touched.values())))
        return outcomes

    def _make_durable(self, paths: list[Path]) -> None:
        """A checkpoint of the write-ahead log: the files it covers, on disk (``syncfs`` of the store's
        filesystem where the system has it, and each file's fsync for files on another one, or
        everywhere without ``syncfs``)."""
        if self._syncfs.available:
            dead = DeadLogs(self.root).this_boot_only()  # looked up before the sync: what they cover is synced
            try:
                self._syncfs()
                root_device = os.stat(self.root).st_dev
                _fsync_files([p for p in paths if _device(p) not in (root_device, None)])
            except BaseException:
                dead.release()
                raise
            dead.remove()  # a killed process's appends were in the page cache, and are on disk now
            return
        _fsync_files(paths)

    def checkpoint(self) -> None:
        """Bring what the write-ahead log holds to its files on disk (the writer calls it when idle)."""
        self._wal.checkpoint()

    def _replay_dead_logs(self) -> None:
        """Replay (and remove) the write-ahead logs of processes that are gone; one process at a time."""
        if not has_logs(self.root):
            return
        replaying = FileLock(self.root / "wal", self.lock_timeout)
        try:
            with replaying:
                replay(self.root, self._make_durable)
        except OSError as exc:  # a store this process may only read: its logs wait for a writer
            report(Damage(self.root / "wal", f"write-ahead logs of processes that are gone were not replayed "
                                             f"({exc.strerror or exc}); a process that may write the store "
                                             "replays them when it opens it"))
        finally:
            replaying.close()

    def _settle_logs(self) -> None:
        """Before a session file is removed: no log of this process, nor of one that is gone, may
        bring it back after a stop."""
        self._wal.checkpoint()
        self._replay_dead_logs()

    def _append_commit(self, session: AgentSession | None, run: AgentRun | None, steps: Iterable[Step],
                       events: Iterable[StepEvent], *, sync: bool, limit_files: bool = True,
                       ) -> tuple[Journal, AgentSession | None, Append] | None:
        """Append one commit to its session file (under the session's lock); the journal, the session
        to index and what was appended where, or None when there was nothing to write. Called holding
        ``self._lock``."""
        steps_docs = [("steps", step.to_dict()) for step in steps]
        run_doc = [("runs", run.to_dict())] if run is not None else []
        records: list[tuple[str, dict[str, Any]]] = [("session", session.to_dict())] if session is not None else []
        session_id = (session.session_id if session is not None else run.session_id if run is not None
                      else steps_docs[0][1]["session_id"] if steps_docs else None)
        event_docs = [("events", event.to_dict()) for event in events]
        session_id = session_id or (event_docs[0][1]["session_id"] if event_docs else None)
        if session_id is None:
            return None
        journal = self._journal(session_id, refresh=False)
        self._written[id(journal)] = journal
        if limit_files:
            self._limit_open_files(journal)
        with journal.lock:  # read, decide and append as one step against other writers
            journal.refresh(repair=True)  # a torn tail from a crashed writer is cut (and reported)
            self._check_sequences(session_id, [d for _, d in steps_docs])
            # A kill can cut a large append at any page: a run's record comes after the steps it counts,
            # so no prefix of it has a run claiming steps the file lacks, save the run's first record,
            # which comes first (a step of a run the file never names would be worse)
            known_run = run is not None and run.id in journal.tables.get("runs", {})
            records += [*steps_docs, *run_doc] if known_run else [*run_doc, *steps_docs]
            records += event_docs
            known = "session" in journal.tables and session_id in journal.tables["session"]
            if not known and session is None:  # first write to a session created implicitly
                implicit = AgentSession(session_id=session_id)
                records.insert(0, ("session", implicit.to_dict()))
                session = implicit
            appended = journal.append(records, sync=sync)
        assert appended is not None  # records is never empty here
        return journal, session, appended

    def _update_index(self, session: AgentSession | None, run: AgentRun | None) -> None:
        self._update_index_many([(session, run)])

    def _update_index_many(self, changes: list[tuple[AgentSession | None, AgentRun | None]], *,
                           sync: bool = True) -> Append | None:
        """One append to the index for what these commits changed (sessions, run status changes);
        what was appended where, or None."""
        if not any(session is not None or run is not None for session, run in changes):
            return None
        index = self._index
        index.refresh()
        updates: list[tuple[str, dict[str, Any]]] = []
        for session, run in changes:
            if session is not None:
                doc = session.to_dict()
                doc["file"] = session_file_name(session.session_id)
                updates.append(("sessions", doc))
            if run is not None:
                stored = index.tables.get("runs", {}).get(run.id)
                if stored is None or stored.get("status") != run.status.value or \
                        stored.get("superseded_by") != run.superseded_by or stored.get("scores") != (run.scores or None):
                    updates.append(("runs", run.to_dict()))
        return index.append(updates, sync=sync) if updates else None

    def delete_steps(self, session_id: str, start_seq: int) -> int:
        with self._lock:
            journal = self._journal(session_id)
            doomed = [key for key, d in journal.tables.get("steps", {}).items() if d["sequence"] >= start_seq]
            journal.append((), [("steps", key) for key in doomed])
            return len(doomed)

    # -- reads -----------------------------------------------------------------
    def _repair_index(self, indexed: set[str] | None = None) -> None:
        """Sessions whose file exists but whose index entry was lost (crash between the two writes).
        ``indexed``: the session files the index names (None: those of the index journal, read)."""
        if self._repaired:
            return
        if indexed is None:
            indexed = {d.get("file") for d in self._index.tables.get("sessions", {}).values()}
        for name in sorted(os.listdir(self._sessions_dir)):
            if not name.endswith(".jsonl") or name in indexed:
                continue
            journal = Journal(self._sessions_dir / name, SESSION_KEYS, self.lock_timeout)
            try:
                journal.refresh()
            except StoreError:
                continue  # reported when the session itself is read
            for doc in journal.tables.get("session", {}).values():
                self._update_index(AgentSession.from_dict(doc), None)
            for doc in journal.tables.get("runs", {}).values():
                self._update_index(None, AgentRun.from_dict(doc))
        self._repaired = True  # done: an index another process held locked is repaired at the next read

    def get_session(self, session_id: str) -> AgentSession | None:
        with self._lock:
            self._index.refresh()
            doc = self._index.tables.get("sessions", {}).get(session_id)
            if doc is None and self.session_file(session_id).exists():
                doc = self._journal(session_id).tables.get("session", {}).get(session_id)
            return AgentSession.from_dict(doc) if doc is not None else None

    def list_sessions(self) -> list[AgentSession]:
        with self._lock:
            self._index.refresh()
            self._repair_index()
            docs = self._index.tables.get("sessions", {}).values()
            return sorted((AgentSession.from_dict(d) for d in docs), key=lambda s: s.created_at)

    def _session_steps(self, session_id: str) -> Iterable[dict[str, Any]] | None:
        """The session's step records (None: no such session), read and checked against what its runs
        committed: steps lost from the file (cut in the middle, an old copy restored) are reported on
        every read, not only on the read that cut a torn tail. Called holding ``_lock``."""
        if not self.session_file(session_id).exists():
            return None
        journal = self._journal(session_id)
        steps = journal.tables.get("steps", {}).values()
        lost = self._lost_in(journal.path, session_id, journal.tables)
        if lost is not None:
            report(lost, stacklevel=4)
        return steps

    def _lost_in(self, path: Path, session_id: str, tables: dict[str, dict[str, Any]]) -> Damage | None:
        """Steps a session's runs committed that its tables (a session file's) no longer hold, unless a
        repair recorded the loss (the file's ``lost`` records)."""
        with self._lock:
            self._index.refresh()
            runs = [*self._runs_of_session(session_id), *tables.get("runs", {}).values()]
        held = Counter(d.get("run_id") for d in tables.get("steps", {}).values())
        acknowledged = {k: d.get("left") for k, d in tables.get("lost", {}).items()}
        return lost_steps(path, session_id, runs, held, acknowledged)

    def _open_index(self) -> None:
        """(Re)open the index journal, and what is derived from it in memory (made again on first use)."""
        self._index = Journal(self.root / "index.jsonl", INDEX_KEYS, self.lock_timeout)
        self._index_runs: dict[str, dict[str, dict[str, Any]]] | None = None  # session -> run id -> index record
        self._index.on_change = self._follow_index_runs

    def _runs_of_session(self, session_id: str) -> Iterable[dict[str, Any]]:
        """The index's records of a session's runs (the final one of each finished run), grouped by session
        once and then kept current by :meth:`_follow_index_runs`, not found by a pass over every run."""
        if self._index_runs is None:
            by_session: dict[str, dict[str, dict[str, Any]]] = {}
            for doc in self._index.tables.get("runs", {}).values():
                by_session.setdefault(doc["session_id"], {})[doc["id"]] = doc
            self._index_runs = by_session
        return self._index_runs.get(session_id, {}).values()

    def _follow_index_runs(self, table: str, key: str, doc: dict[str, Any] | None) -> None:
        """The index journal's feed: run records into the by-session grouping (a reload empties it)."""
        grouped = self._index_runs
        if table == "":
            self._index_runs = None  # grouped again from the tables on next use
        elif table == "runs" and grouped is not None:
            if doc is None:
                for runs in grouped.values():
                    runs.pop(key, None)
            else:
                grouped.setdefault(doc["session_id"], {})[key] = doc

    def get_steps(self, session_id: str, start_seq: int | None = None, end_seq: int | None = None,
                  *, include_superseded: bool = False) -> list[Step]:
        with self._lock:
            docs = self._session_steps(session_id)
            if docs is None:
                return []
            picked = [d for d in docs if (include_superseded or not d.get("superseded"))
                      and (start_seq is None or d["sequence"] >= start_seq)
                      and (end_seq is None or d["sequence"] <= end_seq)]
        picked.sort(key=lambda d: (d["sequence"], d.get("attempt", 1)))
        return [Step.from_dict(d) for d in picked]

    def get_last_step(self, session_id: str) -> Step | None:
        with self._lock:
            found = self._session_steps(session_id)
            if found is None:
                return None
            docs = [d for d in found if not d.get("superseded")]
        if not docs:
            return None
        return Step.from_dict(max(docs, key=lambda d: (d["sequence"], d.get("attempt", 1))))

    def get_run(self, run_id: str) -> AgentRun | None:
        with self._lock:
            self._index.refresh()
            doc = self._index.tables.get("runs", {}).get(run_id)
            if doc is not None and self._settle([doc]):
                doc = self._index.tables.get("runs", {}).get(run_id)
            if doc is not None:
                # the session file holds the latest version (the index only tracks status changes)
                journal = self._journal(doc["session_id"])
                doc = journal.tables.get("runs", {}).get(run_id, doc)
            return AgentRun.from_dict(doc) if doc is not None else None

    def list_runs(self, session_id: str | None = None) -> list[AgentRun]:
        return sorted((AgentRun.from_dict(d) for d in self.iter_run_dicts(session_id)), key=lambda r: r.started_at)

    def get_events(self, run_id: str, cursor: int = 0, limit: int = 100) -> list[StepEvent]:
        with self._lock:
            self._index.refresh()
            run = self._index.tables.get("runs", {}).get(run_id)
            if run is None:
                return []
            docs = [d for d in self._journal(run["session_id"]).tables.get("events", {}).values()
                    if d["run_id"] == run_id and d["seq"] > cursor]
        docs.sort(key=lambda d: d["seq"])
        return [StepEvent.from_dict(d) for d in docs[:limit]]

    # -- bulk reads for frames -----------------------------------------------------
    def iter_step_dicts(self, session_id: str | None = None) -> Iterator[dict[str, Any]]:
        if session_id is not None:
            with self._lock:
                found = self._session_steps(session_id)
                docs = list(found) if found is not None else []
            yield from docs
            return
        for name in sorted(os.listdir(self._sessions_dir)):
            if name.endswith(".jsonl"):
                docs = list(read_table_fast(self._sessions_dir / name, "steps"))
                if docs:  # checked against the runs' counts as a read of the one session is
                    path, session_id = self._sessions_dir / name, docs[0]["session_id"]
                    tables: dict[str, dict[str, Any]] = {"steps": dict(enumerate(docs))}
                    lost = self._lost_in(path, session_id, tables)
                    if lost is not None:  # was the loss recorded by a repair? (read only when something is short)
                        tables["lost"] = {d["id"]: d for d in read_table_fast(path, "lost")}
                        lost = self._lost_in(path, session_id, tables)
                    if lost is not None:
                        report(lost)
                yield from docs

    def iter_run_dicts(self, session_id: str | None = None) -> Iterator[dict[str, Any]]:
        with self._lock:
            self._index.refresh()
            self._repair_index()
            docs = self._run_docs(session_id)
            if self._settle(docs):
                docs = self._run_docs(session_id)
        yield from docs

    def ids_with_prefix(self, kind: str, prefix: str, limit: int = 20) -> list[str]:
        """Run or session ids starting with ``prefix``, from the index (no session file is read)."""
        with self._lock:
            self._index.refresh()
            self._repair_index()
            table = self._index.tables.get("runs" if kind == "run" else "sessions", {})
            return sorted(i for i in table if i.startswith(prefix))[:limit]

    # -- the run query: pages of runs, from its index (storage/run_index*.py) ---------------------------
    def _whole_index(self) -> Journal:
        """The run index journal, read whole (what the run query's index is built from when none matches)."""
        self._index.refresh()
        return self._index

    def _ask_runs(self, question: Callable[[RunIndex], T]) -> T:
        """``question`` of the run query's index, current (called holding ``_lock``); first, once, the index
        entries of sessions a crash left out of it are made again."""
        if not self._repaired:
            self._repair_index(self._runs.ask(lambda index: index.session_files(), self._whole_index))
        return self._runs.ask(question, self._whole_index)  # type: ignore[return-value]

    def query_runs(self, where: RunFilter = RunFilter(), limit: int = 50, cursor: str | None = None) -> RunPage:
        """A page of runs, newest first (see ``storage/run_query.py``); a run still going shows the totals of
        the steps its session file holds so far."""
        limit = check_limit(limit)
        with self._lock:
            for _ in range(2):  # again once if runs whose process died were just settled
                docs = self._ask_runs(lambda index: index.page(where, limit + 1, cursor))
                due = set(self._recheck.due(d["session_id"] for d in docs[:limit]
                                            if d.get("status") == RunStatus.RUNNING.value))
                if not self._settle([d for d in docs[:limit] if d["session_id"] in due]):
                    break
            docs = [self._live(d) if d.get("status") == RunStatus.RUNNING.value else d for d in docs]
        return page_of(docs, limit)

    def _live(self, doc: dict[str, Any]) -> dict[str, Any]:
        """A running run with the totals of the steps its session file holds so far."""
        steps = [s for s in self._journal(doc["session_id"]).tables.get("steps", {}).values()
                 if s.get("run_id") == doc["id"] and not s.get("superseded")]
        tokens = [(s.get("metrics") or {}).get("total_tokens") for s in steps]
        return with_live_totals(doc, len(steps), sum(t for t in tokens if t) if any(t is not None for t in tokens) else None)

    def run_facets(self, limit: int = 100) -> dict[str, list[str]]:
        """The values each filter of the run query can take (agents, statuses, notebooks, users), sorted."""
        with self._lock:
            return self._ask_runs(lambda index: index.facets(limit))

    def _run_docs(self, session_id: str | None) -> list[dict[str, Any]]:
        return [d for d in self._index.tables.get("runs", {}).values()
                if session_id is None or d["session_id"] == session_id]

    def _settle(self, docs: Iterable[dict[str, Any]]) -> bool:
        """Runs shown as ``running`` whose process is gone become ``interrupted`` before anyone reads them."""
        orphans = {d["session_id"] for d in docs if d.get("status") == RunStatus.RUNNING.value
                   and not self._claims.holds(d["session_id"]) and self.session_holder(d["session_id"]) is None}
        return any([self.recover_interrupted(sid) for sid in sorted(orphans)])

    # -- maintenance -----------------------------------------------------------------
    def _compact_open(self, min_lines: int) -> None:
        """Compact the journals this instance has open (on close: never a walk over the whole store)."""
        with self._lock:
            for journal in self._journals.values():
                if journal.lines >= min_lines:
                    journal.compact()
            # the run index, once its lines are a tenth of its records: a compaction rewrites it and its run
            # query snapshot whole, which a large store should not pay at every kernel's close
            if self._index.lines >= max(min_lines, sum(map(len, self._index.tables.values())) // 10):
                self._compact_index()

    def _compact_index(self) -> bool:
        """Compact the run index journal, bringing the run query's snapshot on disk along (False: damaged)."""
        return compact_keeping(self.root, self._index, self.lock_timeout)

    def close(self) -> None:
        with self._lock:
            with self._claim_lock:
                self._claims.release_all()
            self._wal.close()  # its files on disk, and no log left behind
            try:
                self._runs.close()  # a snapshot of the run query's index for the next process, if it read much
            except (OSError, StoreError):
                pass
            try:
                self._compact_open(_COMPACT_AFTER_LINES)
            except StoreError:
                pass  # another process holds a lock: compaction waits for a later close
            for journal in self._journals.values():
                journal.close()
            self._index.close()
            self._journals.clear()
            self._written.clear()
            self._syncfs.close()


def _device(path: Path) -> int | None:
    try:
        return os.stat(path).st_dev
    except FileNotFoundError:
        return None


def _fsync_files(paths: list[Path]) -> None:
    """Each file's fsync, and its directory's (deleted files are skipped: nothing to keep)."""
    for path in paths:
        try:
            fsync_path(path)
        except FileNotFoundError:
            continue
    for directory in {p.parent for p in paths}:
        fsync_dir(directory)


def read_table_fast(path: Path, table: str, lock_timeout: float = 10.0) -> list[dict[str, Any]]:
    """Current docs of one table, parsing only that table's lines (frames read 100k steps this way).

    Damage is reported as loudly as on the full path: other tables' lines are not parsed, but a line
    that is not a whole record, a record of this table that does not parse, an incomplete last
    record and a cut snapshot line each raise a :class:`StoreDamageWarning` naming the file.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    if data and not data.endswith(b"\n"):
        lock = FileLock(path, lock_timeout, on_file=native_flock(path.parent))
        try:
            with lock.existing():  # maybe a write in flight: look again under the lock
                data = path.read_bytes()
        except LockTimeout:
            pass  # a writer stuck holding the lock: report what we see
        except FileNotFoundError:
            return []
        finally:
            lock.close()
    docs: dict[str, dict[str, Any]] = {}
    prefix = b'{"t":"%s"' % table.encode()
    key_fn = SESSION_KEYS[table]
    lines = data.split(b"\n")
    tail = lines.pop()
    if tail.startswith(b'{"agio_journal"') and not lines:
        lines.append(tail)  # a compacted file cut inside its snapshot line: salvaged below
        tail = b""
    for n, raw in enumerate(lines):
        if n == 0 and raw.startswith(b'{"agio_journal"'):
            try:
                snapshot = orjson.loads(raw)["snapshot"]
            except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
                snapshot = salvage_snapshot(raw)
                report(Damage(path, f"its snapshot line is cut off or corrupt ({exc}); "
                                    f"{sum(len(d) for d in snapshot.values())} records before the damage were read",
                              1))
            for doc in (snapshot or {}).get(table, {}).values():
                docs[key_fn(doc)] = doc
        elif raw.startswith(prefix):
            try:
                rec = orjson.loads(raw)
                if rec.get("x"):
                    docs.pop(rec["k"], None)
                else:
                    doc = rec["d"]
                    docs[key_fn(doc)] = doc
            except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
                report(Damage(path, f"unreadable {table} record, skipped ({exc})", n + 1))
        elif not (raw.startswith(b'{"t":"') and raw.endswith(b"}")) and raw.strip(b"\0 \t\r"):
            report(Damage(path, f"unreadable record, skipped: {raw[:80]!r}", n + 1))
    if tail.strip(b"\0 \t\r"):
        report(Damage(path, f"ends with an incomplete record ({len(tail)} bytes, a write cut short by a crash "
                            "or a truncated file); it is skipped"))
    return list(docs.values())


_live: "weakref.WeakSet[TinyDBRepository]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for repo in list(_live):
        try:
            repo.close()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass

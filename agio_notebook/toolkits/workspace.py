"""A session's workspace directory, its path checks and its content-addressed snapshots.

Layout under the workspaces root (``AGIO_WORKSPACES``, else ``<store>/workspaces``)::

    sessions/<session_id>/     the files the agent sees (bound into the sandbox as /workspace)
    blobs/<sha[:2]>/<sha256>   file contents, stored once whatever the number of steps and sessions
    state/<session_id>.json    what is on disk now: the tool calls applied and a manifest

Each tool call that changed files stores only what it changed, ``{path: sha256 or None}``, on its tool
step (``extra["workspace"]``).  The workspace as of step N is the fold of those changes over the
session's current steps up to N; a fork copies the steps, so the fork's workspace is rebuilt from the
same blobs, and a retry supersedes steps, so their changes drop out of the fold.  :meth:`Workspace.sync`
compares what is on disk with the session's history and restores it when they differ (a retry, a fork,
a crash between a change and its step), before the next action runs.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import threading
from pathlib import Path
from typing import Any, Callable, Iterable

from ..storage.contents import WORKSPACES
from ..tools.context import ToolCallContext, history_listeners
from .errors import ActionError

_SHA256 = re.compile(r"[0-9a-f]{64}")
SANDBOX_UID = 65534  # "nobody": what sandboxed code runs as when the kernel runs as root
_HASH_CHUNK = 1 << 20


def reachable_by(path: str, uid: int) -> bool:
    """Can ``uid`` (not root) walk to ``path``? Every ancestor must be searchable by it."""
    parts = Path(path).parts
    for i in range(1, len(parts)):
        st = os.stat(Path(*parts[:i]))
        bits = 0o100 if st.st_uid == uid else 0o001
        if not st.st_mode & bits:
            return False
    return True


def reachable_temp_dir() -> str:
    """A temporary directory in which root can make directories that ``nobody`` can walk into: TMPDIR
    when it can, else the usual ones (TMPDIR may be private, as CI, JupyterHub and HPC sites set it)."""
    import tempfile

    for base in (tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"):
        if os.path.isdir(base) and os.access(base, os.W_OK) and reachable_by(os.path.join(base, "x"), SANDBOX_UID):
            return base
    raise ActionError("no temporary directory the unprivileged sandbox user can reach (tried TMPDIR, /tmp, "
                      "/var/tmp, /dev/shm)")


def workspaces_root(repository: Any = None) -> Path:
    """Where workspaces live: ``AGIO_WORKSPACES``, else in the store's local folder for files (a TinyDB
    store's directory, a SQLite file's ``.files`` folder), else ``./.agio/workspaces``."""
    env = os.environ.get("AGIO_WORKSPACES")
    if env:
        return Path(env).absolute()
    local = getattr(repository, "files_root", None)
    return (Path(local) if local is not None else Path(".agio")).absolute() / WORKSPACES  # travels with the store


def sandbox_owner() -> tuple[int, int] | None:
    """The uid/gid workspace files must belong to so sandboxed code can write them (None: keep as is)."""
    return (SANDBOX_UID, SANDBOX_UID) if os.geteuid() == 0 else None


_FICLONE = 0x40049409  # ioctl: share the source's blocks (btrfs, XFS, bcachefs); copy-on-write


def clone_or_copy(src_fd: int, dest_fd: int) -> None:
    """Copy-on-write where the filesystem allows it, else an in-kernel copy, between open files."""
    try:
        fcntl.ioctl(dest_fd, _FICLONE, src_fd)
        return
    except OSError:
        pass
    size = os.fstat(src_fd).st_size
    sent = 0
    while sent < size:
        n = os.sendfile(dest_fd, src_fd, sent, size - sent)
        if n == 0:
            break
        sent += n


class _DirFds:
    """The directory descriptors of one path under a workspace, each opened from its parent's without
    following a symlink, so files created through them stay inside whatever the agent's code did to the
    tree; missing directories are made (owned like the workspace). Paths visited in sorted order share
    their open ancestors, and only one path's ancestors are open at a time."""

    def __init__(self, ws: Workspace):
        self.ws = ws
        self.open: list[tuple[tuple[str, ...], int]] = [((), os.open(ws.dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))]

    def __enter__(self) -> _DirFds:
        return self

    def __exit__(self, *exc: object) -> None:
        for _, fd in self.open:
            os.close(fd)
        self.open.clear()

    def of(self, parts: tuple[str, ...]) -> int:
        """The descriptor of directory ``parts`` (made if missing)."""
        while parts[:len(self.open[-1][0])] != self.open[-1][0]:  # leave what is not an ancestor
            os.close(self.open.pop()[1])
        while len(self.open[-1][0]) < len(parts):
            prefix, parent = self.open[-1]
            fd = open_subdir(parent, parts[len(prefix)], self.ws.owner, make=True, path="/".join(parts))
            self.open.append((parts[:len(prefix) + 1], fd))
        return self.open[-1][1]


def open_subdir(parent: int, name: str, owner: tuple[int, int] | None, *, make: bool, path: str) -> int:
    """Open directory ``name`` of the open directory ``parent`` without following a symlink (made first,
    owned by ``owner``, when ``make``); a symlink or a file there is an ActionError naming ``path``."""
    if make:
        try:
            os.mkdir(name, 0o755, dir_fd=parent)
            if owner is not None:
                os.chown(name, *owner, dir_fd=parent, follow_symlinks=False)
        except FileExistsError:
            pass
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ActionError(f"path {path!r}: {name!r} is not a directory of the workspace "
                              "(symlinks are not followed)") from None
        raise


class Workspace:
    """The workspace of one session. Paths given by the model are relative to :attr:`dir`."""

    # called with (session id, why) whenever a workspace is restored (the sandbox restarts its interpreter)
    restore_listeners: list[Callable[[str, str], None]] = []

    def __init__(self, root: Path, session_id: str):
        if not session_id or "/" in session_id or session_id in (".", ".."):
            raise ActionError(f"invalid session id for a workspace: {session_id!r}")
        self.root = root
        self.session_id = session_id
        self.dir = root / "sessions" / session_id
        self.blobs = root / "blobs"
        self.state_file = root / "state" / f"{session_id}.json"
        self.owner = sandbox_owner()
        self._state: dict[str, Any] | None = None
        # tool calls of one turn may run in parallel threads: snapshot bookkeeping is one at a time
        self.lock = threading.RLock()

    # -- paths -------------------------------------------------------------------
    def create(self) -> None:
        for d in (self.dir, self.blobs, self.state_file.parent):
            d.mkdir(parents=True, exist_ok=True)
        self.chown(self.dir)

    def chown(self, path: Path) -> None:
        if self.owner is not None:
            os.chown(path, *self.owner, follow_symlinks=False)

    def real_dir(self) -> str:
        return os.path.realpath(self.dir)

    @staticmethod
    def parts(rel: str) -> tuple[str, ...]:
        """The parts of a relative path that cannot leave the workspace by name (absolute, ``..``, NUL)."""
        if not isinstance(rel, str) or not rel.strip():
            raise ActionError("path must be a non-empty relative path inside the workspace")
        if "\x00" in rel:
            raise ActionError("path contains a NUL byte")
        if os.path.isabs(rel):
            raise ActionError(f"path {rel!r} is absolute; use a path relative to the workspace")
        parts = Path(rel).parts
        if ".." in parts:
            raise ActionError(f"path {rel!r} uses '..'; paths must stay inside the workspace")
        return parts

    def resolve(self, rel: str) -> Path:
        """A model-given path inside the workspace, or ActionError (absolute, ``..``, symlink escape)."""
        self.parts(rel)
        target = self.dir / rel
        self.check_inside(os.path.realpath(target), rel)
        return target

    def check_inside(self, real: str, rel: str) -> None:
        base = self.real_dir()
        if real != base and not real.startswith(base + os.sep):
            raise ActionError(f"path {rel!r} leads outside the workspace (through a symlink)")

    def open(self, rel: str, flags: int, mode: int = 0o644, *, make_parents: bool = False) -> int:
        """Open a workspace file, checked at open: the path is walked one directory at a time from the
        workspace's own descriptor, never following a symlink (``O_NOFOLLOW`` on every part), so code
        swapping a directory for a symlink meanwhile cannot redirect it; the opened file's real path is
        read back from the descriptor and must be inside the workspace."""
        self.resolve(rel)
        parts = Path(rel).parts
        fd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for part in parts[:-1]:
                child = open_subdir(fd, part, self.owner, make=make_parents, path=rel)
                os.close(fd)
                fd = child
            target = os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
        finally:
            os.close(fd)
        try:
            self.check_inside(os.readlink(f"/proc/self/fd/{target}"), rel)
        except BaseException:
            os.close(target)
            raise
        return target

    def relative(self, path: Path) -> str:
        return path.relative_to(self.dir).as_posix()

    # -- snapshots ---------------------------------------------------------------
    def _load_state(self) -> dict[str, Any] | None:
        if self._state is None and self.state_file.exists():
            try:
                self._state = json.loads(self.state_file.read_text())
            except (OSError, ValueError):
                self._state = None
        return self._state

    def _save_state(self, state: dict[str, Any]) -> None:
        self._state = state
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.state_file)

    def store_blob(self, rel: str) -> tuple[str, int, int] | None:
        """Store a workspace file's content once by its hash; (sha256, size, mtime_ns), or None when it is
        no longer a regular file.  Read through a descriptor opened without following any symlink, so the
        agent's code (which may still be running in the background) cannot swap in a link to a file
        outside and have it copied into the snapshots."""
        try:
            fd = self.open(rel, os.O_RDONLY | os.O_NONBLOCK)
        except (OSError, ActionError):
            return None
        with os.fdopen(fd, "rb") as src:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None
            self.blobs.mkdir(parents=True, exist_ok=True)
            tmp = self.blobs / f".incoming.{os.getpid()}.{threading.get_ident()}.tmp"
            digest = hashlib.sha256()
            with open(tmp, "wb") as out:
                while chunk := src.read(_HASH_CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
        sha = digest.hexdigest()
        blob = self.blobs / sha[:2] / sha
        if blob.exists():
            tmp.unlink()
        else:
            blob.parent.mkdir(exist_ok=True)
            os.chmod(tmp, 0o444)
            os.replace(tmp, blob)
        return sha, st.st_size, st.st_mtime_ns

    def _walk(self) -> Iterable[tuple[str, os.stat_result, bool]]:
        """(relative path, lstat, is_regular_file) of everything under the workspace, no symlink followed."""
        stack = [self.dir]
        while stack:
            d = stack.pop()
            try:
                entries = list(os.scandir(d))
            except FileNotFoundError:
                continue
            for entry in entries:
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    stack.append(Path(entry.path))
                    continue
                yield self.relative(Path(entry.path)), st, stat.S_ISREG(st.st_mode)

    def scan(self) -> dict[str, str | None]:
        with self.lock:
            return self._scan()

    def _scan(self) -> dict[str, str | None]:
        """What changed on disk since the last snapshot (stat first, hashing only changed files)."""
        state = self._load_state() or {"applied": [], "manifest": {}}
        manifest: dict[str, list[Any]] = state["manifest"]
        changes: dict[str, str | None] = {}
        seen: set[str] = set()
        for rel, st, regular in self._walk():
            if not regular:
                continue  # symlinks, fifos, sockets: not snapshotted
            seen.add(rel)
            known = manifest.get(rel)
            if known and known[1] == st.st_size and known[2] == st.st_mtime_ns:
                continue
            stored = self.store_blob(rel)
            if stored is None:
                seen.discard(rel)
                continue
            sha, size, mtime = stored
            if not known or known[0] != sha:
                changes[rel] = sha
            manifest[rel] = [sha, size, mtime]
        for rel in [r for r in manifest if r not in seen]:
            del manifest[rel]
            changes[rel] = None
        self._save_state(state)
        return changes

    def record(self, ctx: ToolCallContext | None, changes: dict[str, str | None]) -> None:
        with self.lock:
            self._record(ctx, changes)

    def _record(self, ctx: ToolCallContext | None, changes: dict[str, str | None]) -> None:
        """Attach a tool call's changes to its step (``extra["workspace"]``) and mark them applied."""
        if not changes:
            return
        state = self._load_state() or {"applied": [], "manifest": {}}
        if ctx is not None:
            ws = ctx.step_extra.setdefault("workspace", {"changes": {}})
            ws["changes"].update(changes)
            if ctx.tool_call_id not in state["applied"]:
                state["applied"].append(ctx.tool_call_id)
        self._save_state(state)

    def commit_paths(self, ctx: ToolCallContext | None, rels: Iterable[str]) -> dict[str, str | None]:
        with self.lock:
            return self._commit_paths(ctx, rels)

    def _commit_paths(self, ctx: ToolCallContext | None, rels: Iterable[str]) -> dict[str, str | None]:
        """Snapshot the given paths after a file tool changed them, and record the change."""
        state = self._load_state() or {"applied": [], "manifest": {}}
        self._state = state
        changes: dict[str, str | None] = {}
        for rel in rels:
            stored = self.store_blob(rel)
            if stored is not None:
                sha, size, mtime = stored
                if state["manifest"].get(rel, [None])[0] != sha:
                    changes[rel] = sha
                state["manifest"][rel] = [sha, size, mtime]
            elif rel in state["manifest"]:
                del state["manifest"][rel]
                changes[rel] = None
        self._record(ctx, changes)
        return changes

    # -- following the conversation ---------------------------------------------
    @staticmethod
    def history(ctx: ToolCallContext) -> tuple[set[str], list[tuple[str, dict[str, str | None]]]]:
        """(tool call ids live in the session, [(tool call id, changes)] in sequence order)."""
        repo = ctx.repository
        steps = repo.get_steps(ctx.session_id) if repo is not None else []
        live = set(ctx.batch_call_ids)
        changes: list[tuple[str, dict[str, str | None]]] = []
        for step in steps:
            if step.tool_call_id:
                live.add(step.tool_call_id)
                ws = step.extra.get("workspace")
                if ws and ws.get("changes"):
                    changes.append((step.tool_call_id, ws["changes"]))
        return live, changes

    def sync(self, ctx: ToolCallContext | None) -> str | None:
        with self.lock:
            return self._sync(ctx)

    def _sync(self, ctx: ToolCallContext | None) -> str | None:
        """Bring the directory in line with the session's history; returns why it was restored, if it was."""
        self.create()
        if ctx is None or ctx.repository is None:  # no stored history to follow (a tool used by hand)
            return None
        live, changes = self.history(ctx)
        state = self._load_state()
        expected = [tcid for tcid, _ in changes]
        if state is not None and set(state["applied"]) <= live and set(expected) <= set(state["applied"]):
            return None
        if state is None and not changes:
            self._save_state({"applied": [], "manifest": {}})
            return None
        target: dict[str, str] = {}
        for _, delta in changes:
            for rel, sha in delta.items():
                if sha is None:
                    target.pop(rel, None)
                elif not isinstance(sha, str) or not _SHA256.fullmatch(sha) or not isinstance(rel, str):
                    # the store is not trusted to name host files: a blob is only ever a content hash
                    raise ActionError(f"the workspace history in the store is damaged ({rel!r} names no content "
                                      "hash); nothing was restored")
                else:
                    target[rel] = sha
        reason = "a forked session" if state is None else "a retry or fork"
        why = f"workspace restored to the session's history ({reason}): {len(target)} file(s)"
        for listener in list(self.restore_listeners):  # first: the interpreter must not write meanwhile
            listener(self.session_id, why)
        self.restore(target, state)
        self._save_state({"applied": expected, "manifest": self._state["manifest"] if self._state else {}})
        return why

    def restore(self, target: dict[str, str], state: dict[str, Any] | None) -> None:
        """Make the directory hold exactly ``target`` (path -> sha); unchanged files are left alone."""
        manifest = dict(state["manifest"]) if state else {}
        keep: dict[str, list[Any]] = {}
        for rel, st, regular in list(self._walk()):
            known = manifest.get(rel)
            if (regular and rel in target and known and known[0] == target[rel]
                    and known[1] == st.st_size and known[2] == st.st_mtime_ns):
                keep[rel] = known
                continue
            os.unlink(self.dir / rel)
        blobs = os.path.realpath(self.blobs)
        with _DirFds(self) as dirs:  # sorted: a directory's files one after another, its descriptor open once
            for rel, sha in sorted(target.items()):
                if rel in keep:
                    continue
                if not _SHA256.fullmatch(sha):  # a hex name cannot point anywhere but into the blobs
                    raise ActionError(f"workspace snapshot names no content hash for {rel!r}; nothing was restored")
                parts = self.parts(rel)
                if not parts:
                    raise ActionError(f"workspace snapshot names the workspace itself ({rel!r}) as a file")
                try:
                    keep[rel] = [sha, *self._restore_file(dirs.of(parts[:-1]), parts[-1],
                                                          os.path.join(blobs, sha[:2], sha))]
                except FileNotFoundError:
                    raise ActionError(f"workspace snapshot is missing the content of {rel!r} "
                                      f"(blob {sha[:12]})") from None
                except OSError as exc:
                    raise ActionError(f"workspace restore stopped at {rel!r}: {exc.strerror or exc}") from None
        self._prune_dirs(target)
        self.chown(self.dir)
        self._state = {"applied": [], "manifest": keep}

    def _restore_file(self, dir_fd: int, name: str, blob: str) -> tuple[int, int]:
        """Write one file from its blob into an open workspace directory; (size, mtime_ns)."""
        src = os.open(blob, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                         dir_fd=dir_fd)
            try:
                clone_or_copy(src, fd)
                os.fchmod(fd, 0o644)
                if self.owner is not None:
                    os.fchown(fd, *self.owner)
                st = os.fstat(fd)
            finally:
                os.close(fd)
        finally:
            os.close(src)
        return st.st_size, st.st_mtime_ns

    def _prune_dirs(self, target: dict[str, str]) -> None:
        needed = {str(Path(rel).parent) for rel in target}
        for dirpath, dirnames, filenames in os.walk(self.dir, topdown=False):
            rel = os.path.relpath(dirpath, self.dir)
            if rel != "." and not filenames and not dirnames and not any(
                    n == rel or n.startswith(rel + "/") for n in needed):
                os.rmdir(dirpath)


_workspaces: dict[tuple[Path, str], Workspace] = {}


def workspace_for(session_id: str, root: Path | None = None, repository: Any = None) -> Workspace:
    """The (process-wide) Workspace object of a session."""
    base = (root or workspaces_root(repository)).absolute()
    key = (base, session_id)
    ws = _workspaces.get(key)
    if ws is None:
        ws = _workspaces[key] = Workspace(base, session_id)
    return ws


def _follow_retry(session_id: str, repository: Any) -> None:
    """A retry superseded steps: restore the session's workspace of this store (another store's session
    with the same id is not this one)."""
    ws = workspace_for(session_id, repository=repository)
    if ws.state_file.exists():
        ws.sync(ToolCallContext(session_id, None, "", "", repository=repository))


history_listeners.append(_follow_retry)


def prune_workspaces(repository: Any, root: Path | None = None) -> dict[str, int]:
    """Remove the workspaces of sessions the store no longer has, and blobs no stored step refers to.

    For after ``agio store delete`` / ``prune``: the store does not know about workspaces.  Run it while
    no run is in progress (a running action's blobs are referenced only once its step is stored).
    Returns ``{"workspaces": removed, "blobs": removed}``.
    """
    if root is None and os.environ.get("AGIO_WORKSPACES") is None and getattr(repository, "files_root", None) is None:
        # its workspaces would share ./.agio/workspaces with other stores: removing "unknown" sessions
        # there would delete theirs
        raise ActionError("this store has no folder of its own for workspaces; pass root= (the folder its "
                          "workspaces are in) to prune them")
    base = (root or workspaces_root(repository)).absolute()
    sessions = {s.session_id for s in repository.list_sessions()}
    referenced: set[str] = set()
    for doc in repository.iter_step_dicts():
        changes = ((doc.get("extra") or {}).get("workspace") or {}).get("changes") or {}
        referenced.update(sha for sha in changes.values() if sha)
    removed = {"workspaces": 0, "blobs": 0}
    for d in (base / "sessions").iterdir() if (base / "sessions").is_dir() else ():
        if d.name not in sessions and d.name != "manual":
            shutil.rmtree(d)
            (base / "state" / f"{d.name}.json").unlink(missing_ok=True)
            _workspaces.pop((base, d.name), None)
            removed["workspaces"] += 1
    for blob in (base / "blobs").glob("*/*") if (base / "blobs").is_dir() else ():
        if blob.name not in referenced and not blob.name.startswith("."):
            blob.unlink()
            removed["blobs"] += 1
    return removed

"""What a store holds beside its sessions, read and written generically: for ``migrate`` and the exports.

- Named journals (``Repository.journal``): memory records and their vectors, feedback, batches and
  executions, plans, exercise progress, and any journal added later, whatever its name. Each journal is
  read as ``(name, table, key, doc)`` rows with the keys it stores, so no owner has to be known here.
- Files under the store's ``files_root`` that other rooms keep there (:data:`FOLDERS`): workspaces (their
  content-addressed blobs, the files a session sees now, and their state).
"""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Iterator

from ..core import StoreError
from .base import Repository

WORKSPACES = "workspaces"
FOLDERS = (WORKSPACES,)  # the folders under files_root that travel with the store
_CHUNK = 2000  # journal rows per append when writing


# -- journals ----------------------------------------------------------------------------------------
def journal_rows(repository: Repository) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    """``(journal, table, key, doc)`` for every current document of every journal the store lists."""
    for name in repository.journal_names(""):
        journal = repository.journal(name, {})
        try:
            for table, docs in sorted(journal.tables.items()):
                for key, doc in docs.items():
                    yield name, table, key, doc
        finally:
            journal.close()


def write_journal_rows(repository: Repository, rows: Iterable[tuple[str, str, str, dict[str, Any]]]) -> int:
    """Append rows (as ``journal_rows`` gives them) to ``repository``'s journals, keeping their keys; how many."""
    by_name: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for name, table, key, doc in rows:
        by_name.setdefault(name, []).append((table, key, doc))
    count = 0
    for name, entries in by_name.items():
        for start in range(0, len(entries), _CHUNK):
            chunk = entries[start:start + _CHUNK]
            given: dict[str, dict[int, str]] = {}
            for table, key, doc in chunk:
                given.setdefault(table, {})[id(doc)] = key
            # the key each doc had in the source, looked up by the doc itself as it is appended; a record the
            # target already holds is read with a placeholder (only the appended lines' keys are written)
            keys = {table: (lambda d, m=m: m.get(id(d)) or f"#held-{id(d)}") for table, m in given.items()}
            journal = repository.journal(name, keys)
            try:
                journal.append([(table, doc) for table, _, doc in chunk])
            finally:
                journal.close()
            count += len(chunk)
    return count


# -- files beside the store --------------------------------------------------------------------------
def files_root(repository: Any) -> Path | None:
    root = getattr(repository, "files_root", None)
    return Path(root) if root is not None else None


def iter_files(root: Path | None) -> Iterator[tuple[str, Path, os.stat_result]]:
    """``(relative posix path, path, lstat)`` of each regular file and symlink under the travelling folders."""
    if root is None:
        return
    for folder in FOLDERS:
        top = root / folder
        if not top.is_dir() or top.is_symlink():
            continue
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            dirnames.sort()
            for name in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
                path = Path(dirpath) / name
                st = os.lstat(path)
                if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                    yield path.relative_to(root).as_posix(), path, st


def file_docs(repository: Any) -> Iterator[dict[str, Any]]:
    """Each file as an export record: ``{"path", "mode", "link", "data"}`` (contents in base64)."""
    for rel, path, st in iter_files(files_root(repository)):
        if stat.S_ISLNK(st.st_mode):
            yield {"path": rel, "mode": None, "link": os.readlink(path), "data": None}
        else:
            yield {"path": rel, "mode": stat.S_IMODE(st.st_mode), "link": None,
                   "data": base64.b64encode(path.read_bytes()).decode("ascii")}


def copy_files(source: Any, target: Any) -> int:
    """Copy the travelling folders from one store's files_root to another's (owners kept when run as root:
    a workspace belongs to the sandbox's user)."""
    src, dst = files_root(source), files_root(target)
    if src is None or dst is None or src.resolve() == dst.resolve():
        return 0
    docs = [{"path": rel, "mode": stat.S_IMODE(st.st_mode), "source": path,
             "link": os.readlink(path) if stat.S_ISLNK(st.st_mode) else None} for rel, path, st in iter_files(src)]
    written = write_files(dst, docs)
    if os.geteuid() == 0:
        for folder in FOLDERS:
            for dirpath, dirnames, filenames in os.walk(src / folder):
                for name in ["", *dirnames, *filenames]:
                    st = os.lstat(os.path.join(dirpath, name) if name else dirpath)
                    rel = Path(dirpath, name).relative_to(src)
                    if os.path.lexists(dst / rel):
                        os.lchown(dst / rel, st.st_uid, st.st_gid)
    return written


def write_files(root: Path, docs: Iterable[dict[str, Any]]) -> int:
    """Write file records under ``root``: regular files first, symlinks last, so no file is ever written
    through a link; a path outside the travelling folders (absolute, ``..``) is refused before anything."""
    docs = list(docs)
    for doc in docs:
        _check_path(doc["path"])
    for doc in docs:
        if doc.get("link") is not None:
            continue
        path = root / doc["path"]
        _make_parents(root, path)
        data = Path(doc["source"]).read_bytes() if "source" in doc else base64.b64decode(doc["data"] or "")
        mode = (doc.get("mode") or 0o644) & 0o777
        if path.is_symlink():
            path.unlink()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), mode)
    for doc in docs:
        if doc.get("link") is None:
            continue
        path = root / doc["path"]
        _make_parents(root, path)
        if os.path.lexists(path):
            path.unlink()
        os.symlink(doc["link"], path)
    return len(docs)


def _check_path(rel: str) -> None:
    parts = PurePosixPath(rel).parts
    if not parts or rel.startswith("/") or ".." in parts or parts[0] not in FOLDERS or "\\" in rel:
        raise StoreError(f"refused a file outside the store's folders ({', '.join(FOLDERS)}): {rel!r}")


def _make_parents(root: Path, path: Path) -> None:
    """Make ``path``'s folders, refusing any that is a symlink (a link never leads a write elsewhere)."""
    current = root
    current.mkdir(parents=True, exist_ok=True)
    for part in path.relative_to(root).parts[:-1]:
        current = current / part
        if current.is_symlink():
            raise StoreError(f"refused to write {path.relative_to(root).as_posix()!r}: {part!r} is a symlink")
        current.mkdir(exist_ok=True)

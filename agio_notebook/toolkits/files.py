"""``workspace_files()``: read, write, append, list, glob, search and replace inside the workspace.

Every path is checked twice: resolved (no absolute path, no ``..``, no symlink leading out) and again
at open, from the opened descriptor itself.  Reads are capped and binary files are refused as text;
every write stores what changed (a content-addressed snapshot) and its unified diff.
"""

from __future__ import annotations

import difflib
import errno
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..tools import Tool, tool
from .actions import current_workspace, recorded
from .errors import ActionError, check_positive
from .workspace import Workspace


@dataclass(frozen=True)
class FileLimits:
    max_read_bytes: int = 256_000
    max_write_bytes: int = 5_000_000
    max_results: int = 200
    max_search_file_bytes: int = 2_000_000
    max_diff_chars: int = 20_000

    def __post_init__(self) -> None:
        check_positive(self)


def is_binary(data: bytes) -> bool:
    """NUL bytes, or not UTF-8, in the first 8 KB."""
    head = data[:8192]
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(head) - 4  # a multi-byte character cut at the 8 KB boundary is fine
    return False


def _open(ws: Workspace, rel: str, flags: int, **kw: Any) -> int:
    """Open a regular file of the workspace (never blocking on a FIFO the agent's code made)."""
    try:
        fd = ws.open(rel, flags | os.O_NONBLOCK, **kw)
    except FileNotFoundError:
        raise ActionError(f"no file {rel!r} in the workspace") from None
    except IsADirectoryError:
        raise ActionError(f"{rel!r} is a directory") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the last part is a symlink
            raise ActionError(f"path {rel!r} is a symlink; symlinks are not followed") from None
        raise ActionError(f"cannot open {rel!r}: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ActionError(f"{rel!r} is not a regular file")
    return fd


def read_bytes(ws: Workspace, rel: str, limit: int) -> bytes:
    with os.fdopen(_open(ws, rel, os.O_RDONLY), "rb") as f:
        return f.read(limit + 1)


def _text(ws: Workspace, rel: str, limit: int) -> str | None:
    """The file's text, or None if it does not exist."""
    if not os.path.lexists(ws.resolve(rel)):
        return None
    data = read_bytes(ws, rel, limit)
    if len(data) > limit:
        raise ActionError(f"{rel!r} is larger than {limit} bytes")
    if is_binary(data):
        raise ActionError(f"{rel!r} is a binary file; it cannot be edited as text")
    return data.decode("utf-8")


def write_text(ws: Workspace, rel: str, text: str, limits: FileLimits) -> None:
    data = text.encode("utf-8")
    if len(data) > limits.max_write_bytes:
        raise ActionError(f"refusing to write {len(data)} bytes (limit {limits.max_write_bytes})")
    fd = _open(ws, rel, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, make_parents=True)
    with os.fdopen(fd, "wb") as f:
        if ws.owner is not None:
            os.fchown(f.fileno(), *ws.owner)
        f.write(data)


def diff(old: str | None, new: str, rel: str, cap: int) -> str:
    lines = difflib.unified_diff((old or "").splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile="/dev/null" if old is None else f"a/{rel}", tofile=f"b/{rel}")
    text = "".join(lines)
    return text if len(text) <= cap else text[:cap] + f"\n[diff truncated at {cap} characters]"


def _visible(ws: Workspace, path: Path) -> bool:
    """Inside the workspace once resolved (a symlink pointing out is not listed)."""
    real = os.path.realpath(path)
    base = ws.real_dir()
    return real == base or real.startswith(base + os.sep)


def _pattern_ok(pattern: str) -> None:
    if not pattern or os.path.isabs(pattern) or ".." in Path(pattern).parts:
        raise ActionError(f"pattern {pattern!r} must be relative to the workspace, without '..'")


def workspace_files(*, limits: FileLimits | None = None, workspace_root: str | Path | None = None,
                    requires_approval: bool = False) -> list[Tool]:
    """The file tools. ``requires_approval`` pauses the run before each write, append or replace."""
    limits = limits or FileLimits()
    root = Path(workspace_root).absolute() if workspace_root is not None else None

    def writing(name: str, rel: str, data: dict[str, Any], make: Any) -> str:
        ctx, ws, _ = current_workspace(root)
        with recorded("file_operation", name, {"path": rel, **data}) as action:
            old = _text(ws, rel, limits.max_write_bytes)
            new = make(old)
            write_text(ws, rel, new, limits)
            changes = ws.commit_paths(ctx, [ws.relative(ws.resolve(rel))])
            action.output = {"path": rel, "bytes": len(new.encode()), "diff": diff(old, new, rel, limits.max_diff_chars),
                             "workspace_changes": changes}
        return f"{name}: {rel} ({len(new.encode())} bytes)"

    @tool(name="read_file")
    def read_file(path: str) -> str:
        """Read a text file of the workspace.

        Args:
            path: Path relative to the workspace.
        """
        _, ws, _ = current_workspace(root)
        with recorded("file_operation", "read_file", {"path": path}) as action:
            data = read_bytes(ws, path, limits.max_read_bytes)
            if is_binary(data):
                raise ActionError(f"{path!r} is a binary file; it is not shown as text")
            text = data[:limits.max_read_bytes].decode("utf-8", errors="replace")
            if len(data) > limits.max_read_bytes:
                text += f"\n[truncated at {limits.max_read_bytes} bytes]"
            action.output = {"path": path, "bytes": len(data)}
        return text

    @tool(name="write_file", requires_approval=requires_approval)
    def write_file(path: str, content: str) -> str:
        """Create or overwrite a text file in the workspace.

        Args:
            path: Path relative to the workspace; missing directories are created.
            content: The whole new content.
        """
        return writing("write_file", path, {"content": content[:2000]}, lambda old: content)

    @tool(name="append_file", requires_approval=requires_approval)
    def append_file(path: str, content: str) -> str:
        """Append text to a file of the workspace (created if missing).

        Args:
            path: Path relative to the workspace.
            content: Text to add at the end.
        """
        return writing("append_file", path, {"content": content[:2000]}, lambda old: (old or "") + content)

    @tool(name="replace_in_file", requires_approval=requires_approval)
    def replace_in_file(path: str, old: str, new: str, count: int = 1) -> str:
        """Replace exact text in a workspace file.

        Args:
            path: Path relative to the workspace.
            old: The exact text to find.
            new: Its replacement.
            count: How many occurrences to replace (0 = all).
        """
        def make(text: str | None) -> str:
            if text is None:
                raise ActionError(f"no file {path!r} in the workspace")
            found = text.count(old) if old else 0
            if not found:
                raise ActionError(f"the text to replace was not found in {path!r}")
            return text.replace(old, new, count if count > 0 else -1)

        return writing("replace_in_file", path, {"old": old[:2000], "new": new[:2000], "count": count}, make)

    @tool(name="list_files")
    def list_files(path: str = ".") -> list[dict[str, Any]]:
        """List a workspace directory (name, type, size).

        Args:
            path: Directory relative to the workspace.
        """
        _, ws, _ = current_workspace(root)
        with recorded("file_operation", "list_files", {"path": path}) as action:
            target = ws.dir if path in (".", "", "./") else ws.resolve(path)
            if not target.is_dir():
                raise ActionError(f"{path!r} is not a directory of the workspace")
            entries = []
            for entry in sorted(os.scandir(target), key=lambda e: e.name)[:limits.max_results]:
                kind = "link" if entry.is_symlink() else "dir" if entry.is_dir() else "file"
                size = entry.stat(follow_symlinks=False).st_size if kind == "file" else None
                entries.append({"name": entry.name, "type": kind, "size": size})
            action.output = {"count": len(entries)}
        return entries

    @tool(name="glob_files")
    def glob_files(pattern: str) -> list[str]:
        """Workspace paths matching a glob pattern such as ``**/*.py``.

        Args:
            pattern: Glob pattern relative to the workspace.
        """
        _, ws, _ = current_workspace(root)
        with recorded("file_operation", "glob_files", {"pattern": pattern}) as action:
            _pattern_ok(pattern)
            found = sorted(ws.relative(p) for p in ws.dir.glob(pattern) if _visible(ws, p))[:limits.max_results]
            action.output = {"count": len(found)}
        return found

    @tool(name="search_files")
    def search_files(pattern: str, glob: str = "**/*", ignore_case: bool = False) -> list[dict[str, Any]]:
        """Search workspace text files for a regular expression, like grep.

        Args:
            pattern: Regular expression to look for.
            glob: Which files to search (glob relative to the workspace).
            ignore_case: Match regardless of case.
        """
        _, ws, _ = current_workspace(root)
        with recorded("file_operation", "search_files", {"pattern": pattern, "glob": glob}) as action:
            _pattern_ok(glob)
            try:
                regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
            except re.error as exc:
                raise ActionError(f"invalid regular expression {pattern!r}: {exc}") from None
            hits: list[dict[str, Any]] = []
            for p in sorted(ws.dir.glob(glob)):
                if len(hits) >= limits.max_results:
                    break
                if p.is_symlink() or not p.is_file() or not _visible(ws, p):
                    continue
                data = read_bytes(ws, ws.relative(p), limits.max_search_file_bytes)
                if is_binary(data):
                    continue
                for no, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
                    if regex.search(line):
                        hits.append({"path": ws.relative(p), "line": no, "text": line[:500]})
                        if len(hits) >= limits.max_results:
                            break
            action.output = {"count": len(hits)}
        return hits

    return [read_file, write_file, append_file, replace_in_file, list_files, glob_files, search_files]


__all__ = ["FileLimits", "workspace_files"]

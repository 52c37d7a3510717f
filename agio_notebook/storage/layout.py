"""Where things live in a store directory, and what identifies each kind of document.

    <root>/meta.json                   {"schema_version": 1, ...}
    <root>/index.jsonl                 journal: sessions, run summaries (start/end/supersede only)
    <root>/sessions/<session>.jsonl    journal: the session, its steps, its runs, its events

One file per session bounds what any append touches; the index lets the runs frame and
``get_events`` find a run without opening every session file.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any, Callable

SCHEMA_VERSION = 1

Doc = dict[str, Any]

SESSION_KEYS: dict[str, Callable[[Doc], str]] = {
    "session": lambda d: d["session_id"],
    "steps": lambda d: d["id"],
    "runs": lambda d: d["id"],
    "events": lambda d: f"{d['run_id']}:{d['seq']}",
    "lost": lambda d: d["id"],  # steps a repair found lost, by run: reads stop warning about them
}
INDEX_KEYS: dict[str, Callable[[Doc], str]] = {
    "sessions": lambda d: d["session_id"],
    "runs": lambda d: d["id"],
}
ALL_KEYS = {**SESSION_KEYS, **INDEX_KEYS}

def store_root(path: str | os.PathLike[str] | None = None) -> Path:
    """The store directory: ``path``, else ``$AGIO_STORE``, else ``./.agio``."""
    return Path(path if path is not None else os.environ.get("AGIO_STORE") or ".agio").expanduser()


_SAFE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")


def session_file_name(session_id: str) -> str:
    """A file name for any session id: the id itself when it is safe, else a hash of it."""
    if _SAFE.match(session_id):
        return f"{session_id}.jsonl"
    return f"h-{hashlib.sha1(session_id.encode()).hexdigest()}.jsonl"

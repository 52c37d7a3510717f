"""A live widget in a cell whose saved copy is a static snapshot, never a dead widget.

A run's live view, a batch's monitor and a plan's live graph are ipywidgets until they end. The output
that shows one also carries a static bundle of the same view, marked as a snapshot; this kernel keeps
that snapshot fresh in a file the Jupyter server reads when the notebook is saved, and the server's
pre-save hook keeps the snapshot in the saved file in place of the widget
(``agio_notebook_server.snapshots`` says why it works this way). When the view ends, the output is
replaced by the final bundle and the file goes.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from typing import Any, Callable

from ..core import new_id
from .snapshot_files import AGIO_MIME, prune_snapshots, remove_snapshot, snapshot_dir, snapshot_file, write_snapshot

SNAPSHOT_EVERY_S = 1.0  # how stale a saved snapshot may be
_pruned: set[Path] = set()


def snapshot_note(at: str) -> str:
    """What a snapshot says of itself (the extension's ``snapshot.ts`` says the same)."""
    return f"snapshot saved while it ran, as of {at}: it does not update here"


def as_snapshot(bundle: dict[str, Any], now: datetime | None = None) -> dict[str, Any]:
    """``bundle`` marked as taken now, while its run or batch went on: its JSON, HTML and text say so."""
    at = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M:%S UTC")
    note = snapshot_note(at)
    marked: dict[str, Any] = {}
    for mime, value in bundle.items():
        if AGIO_MIME.fullmatch(mime) and isinstance(value, dict):
            marked[mime] = {**value, "snapshot_at": at}
        elif mime == "text/html":
            marked[mime] = (f'<div class="agio-snapshot" style="font-size:12px;color:#57606a;font-style:italic">'
                            f'{escape(note)}</div>{value}')
        elif mime == "text/plain":
            marked[mime] = f"[{note}]\n{value}"
        else:
            marked[mime] = value
    return marked


class LiveOutput:
    """One output: ``widget`` while the kernel shows it, a snapshot in the saved notebook, then the final bundle.

    ``snapshot`` may be called from any thread as often as the view redraws; it writes at most every
    ``every_s`` seconds, and never after ``finish``.
    """

    def __init__(self, widget: Any, *, every_s: float = SNAPSHOT_EVERY_S,
                 clock: Callable[[], float] = time.monotonic, directory: Path | None = None):
        self.widget = widget
        self.display_id = new_id()
        self.every_s = every_s
        self._clock = clock
        directory = directory or snapshot_dir()
        self.path = snapshot_file(widget.model_id, directory)
        self._last = float("-inf")
        self._lock = threading.Lock()
        self._finished = False
        if directory not in _pruned:
            _pruned.add(directory)
            prune_snapshots(directory)

    def show(self, bundle: dict[str, Any]) -> None:
        """Display the widget with ``bundle`` as its snapshot (what a save keeps if no fresher one exists)."""
        from IPython.display import display

        marked = as_snapshot(bundle)
        display({**self.widget._repr_mimebundle_(), **marked}, raw=True, display_id=self.display_id)
        self._write(marked)

    def snapshot(self, make: Callable[[], dict[str, Any] | None]) -> bool:
        """Write ``make()`` as the snapshot a save keeps, if it is due; ``make`` returns None for "unchanged"."""
        with self._lock:
            if self._finished or self._clock() - self._last < self.every_s:
                return False
            try:
                bundle = make()
            except Exception:  # noqa: BLE001 - the last snapshot stays; the live view must go on
                return False
            if bundle is None:
                return False
            self._write(as_snapshot(bundle))
            return True

    def finish(self, bundle: dict[str, Any]) -> None:
        """Replace the output by the final ``bundle``; the snapshot is not needed any more."""
        with self._lock:
            self._finished = True
            self.redraw(bundle)
            if self.path is not None:
                remove_snapshot(self.path)

    def redraw(self, bundle: dict[str, Any]) -> None:
        """Replace the finished output by a fuller ``bundle`` (a transcript's trace graph, drawn after it)."""
        from IPython.display import update_display

        update_display(bundle, display_id=self.display_id, raw=True)

    def _write(self, bundle: dict[str, Any]) -> None:
        self._last = self._clock()
        if self.path is None:
            return
        try:
            write_snapshot(self.path, bundle)
        except OSError:  # a read-only runtime directory: the save keeps the bundle shown with the widget
            self.path = None

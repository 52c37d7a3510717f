"""The snapshot files of live agio views: where a kernel keeps them and what a saved notebook keeps of a
live output (see ``agio_notebook_server.snapshots`` for why a save replaces a widget by its snapshot).

The kernel (``live_output``) writes and removes the files; the Jupyter server's pre-save hook reads them with
the same functions, so both sides agree on where the files are and what they hold.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
AGIO_MIME = re.compile(r"application/vnd\.agio\.[a-z0-9_.-]+\+json")
DIRECTORY = "agio-snapshots"
STALE_AFTER_S = 7 * 24 * 3600  # a snapshot a killed kernel left behind
_MODEL_ID = re.compile(r"[0-9A-Za-z_-]{1,64}")


def snapshot_dir() -> Path:
    """Where kernels keep snapshots and the server reads them: beside the kernels' connection files."""
    from jupyter_core.paths import jupyter_runtime_dir

    return Path(jupyter_runtime_dir()) / DIRECTORY


def snapshot_file(model_id: Any, directory: Path | None = None) -> Path | None:
    """The file of widget ``model_id``'s snapshot; None for an id that is not a plain name (it comes
    from a saved notebook, so it must never reach outside the directory)."""
    if not isinstance(model_id, str) or not _MODEL_ID.fullmatch(model_id):
        return None
    return (directory or snapshot_dir()) / f"{model_id}.json"


def write_snapshot(path: Path, bundle: dict[str, Any]) -> None:
    """Replace the snapshot at ``path`` at once (a save never reads half a file)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(bundle, f, default=str)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_snapshot(path: Path) -> None:
    path.unlink(missing_ok=True)


def prune_snapshots(directory: Path, now: float | None = None) -> int:
    """Remove snapshots no kernel has written for ``STALE_AFTER_S`` (their kernel is gone); how many."""
    now = time.time() if now is None else now
    removed = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        try:
            if entry.name.endswith(".json") and now - entry.stat().st_mtime > STALE_AFTER_S:
                os.unlink(entry.path)
                removed += 1
        except OSError:
            continue
    return removed


def _agio_mimes(data: dict[str, Any]) -> set[str]:
    return {k for k in data if isinstance(k, str) and AGIO_MIME.fullmatch(k)}


def _read_snapshot(path: Path | None, mimes: set[str]) -> dict[str, Any] | None:
    """The bundle at ``path`` if it is one for the same agio views, with text where text belongs."""
    if path is None:
        return None
    try:
        bundle = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (not isinstance(bundle, dict) or WIDGET_VIEW in bundle or _agio_mimes(bundle) != mimes
            or not all(isinstance(bundle[m], dict) for m in mimes)
            or not all(isinstance(v, str) for k, v in bundle.items() if k.startswith("text/"))):
        return None
    return bundle


def saved_data(data: dict[str, Any], directory: Path | None = None) -> dict[str, Any] | None:
    """What a saved notebook keeps of an output's ``data``; None when it is not a live agio widget."""
    mimes = _agio_mimes(data)
    view = data.get(WIDGET_VIEW)
    if not mimes or not isinstance(view, dict):
        return None
    fresh = _read_snapshot(snapshot_file(view.get("model_id"), directory), mimes)
    return fresh if fresh is not None else {k: v for k, v in data.items() if k != WIDGET_VIEW}


def snapshot_outputs(notebook: dict[str, Any], directory: Path | None = None) -> int:
    """Replace every live agio widget output of ``notebook`` (nbformat 4, as JSON) by its snapshot; how many."""
    replaced = 0
    for cell in notebook.get("cells") or []:
        for output in (cell.get("outputs") or []) if isinstance(cell, dict) else []:
            data = output.get("data") if isinstance(output, dict) else None
            saved = saved_data(data, directory) if isinstance(data, dict) else None
            if saved is not None:
                output["data"] = saved
                replaced += 1
    return replaced

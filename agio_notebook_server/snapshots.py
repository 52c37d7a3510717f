"""A saved notebook never carries a dead agio widget: an output showing one is saved as its snapshot.

A run's live view, a batch's monitor and a plan's live graph are ipywidgets while they go on, replaced by
a static bundle (``update_display``) when they end. A notebook saved in between (JupyterLab autosaves
every two minutes) would keep only a widget-view output, which nothing can draw without the kernel that
holds the widget (JupyterLab: "Error displaying widget: model not found"); reopened, the output has no
display id either, so the final bundle never reaches it.

So the kernel shows such a widget in one output together with a static bundle of its own
(``application/vnd.agio.*+json``, ``text/html``, ``text/plain``). While the kernel runs, JupyterLab draws
the widget: its renderer ranks before every other. The kernel also keeps the latest snapshot of that
bundle in a file named after the widget's model id, in the Jupyter runtime directory (updating the
displayed bundle instead would make JupyterLab build a new view of the widget on each update). On save,
this pre-save hook replaces such an output's data with that file's bundle, or, without a file, drops the
widget-view entry and keeps the bundle shown with it. The browser keeps its live widget: a save does not
reload the document. Outputs of other widgets are left alone.

The kernel side (``agio_notebook.notebook.live_output``) writes and removes the files with the helpers
here, so both sides agree on where they are.
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


def pre_save(model: dict[str, Any], path: str, contents_manager: Any = None, **_: Any) -> None:
    """The contents manager's pre-save hook: notebooks are saved with snapshots, not live agio widgets."""
    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    replaced = snapshot_outputs(model["content"])
    if replaced and contents_manager is not None:
        contents_manager.log.debug("agio_notebook_server: %s saved with %d snapshot(s)", path, replaced)


def register(manager: Any) -> None:
    """Add the hook to a contents manager once."""
    if manager is not None and pre_save not in getattr(manager, "_pre_save_hooks", []):
        manager.register_pre_save_hook(pre_save)


def _load_jupyter_server_extension(serverapp: Any) -> None:
    register(serverapp.contents_manager)
    serverapp.log.debug("agio_notebook_server.snapshots: live agio widgets are saved as snapshots")


async def _start_jupyter_server_extension(serverapp: Any) -> None:
    """Again once every extension has loaded: one may have replaced the contents manager (jupytext does)."""
    register(serverapp.contents_manager)
    register(serverapp.web_app.settings.get("contents_manager"))

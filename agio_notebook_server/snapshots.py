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

The kernel side (``agio_notebook.notebook.live_output``) writes and removes the files, and this hook reads
them, with the same functions (``agio_notebook.notebook.snapshot_files``).
"""

from __future__ import annotations

from typing import Any

from agio_notebook.notebook.snapshot_files import snapshot_outputs


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

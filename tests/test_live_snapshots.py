"""A live agio widget is saved as its snapshot: the snapshot's marks, the rule the server's pre-save hook
applies to an output, the kernel side's files, and the hook in a real Jupyter server saving a notebook."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from datetime import datetime, timezone

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from agio_notebook.notebook.live_output import LiveOutput, as_snapshot, snapshot_note
from agio_notebook.notebook.snapshot_files import (STALE_AFTER_S, WIDGET_VIEW, prune_snapshots, saved_data, snapshot_file,
                                            snapshot_outputs, write_snapshot)
from lab_support import running_lab

BATCH = "application/vnd.agio.batch+json"
EVIL = '<img src=x onerror="window.__pwned=1">'
MODEL_ID = "0123456789abcdef0123456789abcdef"


def bundle(completed: int = 0, status: str = "running") -> dict:
    d = {"name": "eval", "status": status, "completed": completed, "total": 10}
    return {BATCH: d, "text/html": f"<b>batch eval</b> {completed}/10", "text/plain": f"batch eval {completed}/10"}


def live(model_id: str = MODEL_ID, completed: int = 0) -> dict:
    """An output's data as the kernel displays a live agio widget: its view and a snapshot of the bundle."""
    return {WIDGET_VIEW: {"version_major": 2, "version_minor": 0, "model_id": model_id},
            **as_snapshot(bundle(completed))}


def test_a_snapshot_says_so_in_its_json_html_and_text():
    at = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    marked = as_snapshot({**bundle(3), "text/html": EVIL}, now=at)
    note = "snapshot saved while it ran, as of 2025-01-02 03:04:05 UTC: it does not update here"
    assert snapshot_note("2025-01-02 03:04:05 UTC") == note  # labextension/test/snapshot.test.ts: the same words
    assert marked[BATCH] == {**bundle(3)[BATCH], "snapshot_at": "2025-01-02 03:04:05 UTC"}
    assert marked["text/plain"] == f"[{note}]\nbatch eval 3/10"
    assert marked["text/html"].startswith('<div class="agio-snapshot"') and note in marked["text/html"]
    assert marked["text/html"].endswith(EVIL)  # the bundle's own HTML, escaped where it was made, is kept whole


def test_without_a_fresher_snapshot_the_widget_view_is_dropped_and_the_bundle_shown_with_it_kept(tmp_path):
    data = live(completed=1)
    saved = saved_data(data, tmp_path)
    assert WIDGET_VIEW not in saved and saved == {k: v for k, v in data.items() if k != WIDGET_VIEW}
    assert saved[BATCH]["completed"] == 1 and "snapshot_at" in saved[BATCH]


def test_the_kernels_latest_snapshot_replaces_the_output(tmp_path):
    fresh = as_snapshot(bundle(7))
    write_snapshot(snapshot_file(MODEL_ID, tmp_path), fresh)
    assert saved_data(live(completed=1), tmp_path) == fresh


@pytest.mark.parametrize("data", [
    {WIDGET_VIEW: {"model_id": MODEL_ID}, "text/plain": "VBox(...)"},  # another library's widget
    bundle(2),  # a final bundle: no widget
    {"text/plain": "x"},
])
def test_other_outputs_are_left_alone(tmp_path, data):
    assert saved_data(data, tmp_path) is None


@pytest.mark.parametrize("file_bundle", [
    {"application/vnd.agio.run+json": {}, "text/plain": "another view"},  # not the output's view
    {**bundle(9), WIDGET_VIEW: {"model_id": MODEL_ID}},  # a widget again
    {**bundle(9), "text/plain": ["not", "text"]},
    "not a bundle",
])
def test_a_file_that_is_not_this_views_snapshot_is_not_used(tmp_path, file_bundle):
    path = snapshot_file(MODEL_ID, tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(file_bundle))
    assert saved_data(live(completed=1), tmp_path)[BATCH]["completed"] == 1


def test_a_model_id_from_the_notebook_never_reaches_outside_the_directory(tmp_path):
    outside = tmp_path / "secret.json"
    outside.write_text(json.dumps(bundle(9)))
    for model_id in ("../secret", "/etc/passwd", "a/b", "", None, 5, "x" * 65):
        assert snapshot_file(model_id, tmp_path / "snaps") is None
        assert saved_data(live(model_id=model_id, completed=1), tmp_path / "snaps")[BATCH]["completed"] == 1


def test_a_whole_notebook_is_saved_valid_with_only_agio_widgets_replaced(tmp_path):
    write_snapshot(snapshot_file(MODEL_ID, tmp_path), as_snapshot(bundle(4)))
    other = {WIDGET_VIEW: {"version_major": 2, "version_minor": 0, "model_id": "f" * 32}, "text/plain": "IntSlider()"}
    nb = new_notebook(cells=[new_code_cell("h", outputs=[new_output("display_data", data=live())]),
                             new_code_cell("s", outputs=[new_output("display_data", data=other)])])
    content = json.loads(nbformat.writes(nb))
    assert snapshot_outputs(content, tmp_path) == 1
    saved = nbformat.reads(json.dumps(content), as_version=4)
    nbformat.validate(saved)
    [batch], [slider] = saved.cells[0].outputs, saved.cells[1].outputs
    assert WIDGET_VIEW not in batch.data and batch.data[BATCH]["completed"] == 4
    assert slider.data[WIDGET_VIEW]["model_id"] == "f" * 32


class Widget:
    model_id = MODEL_ID

    def _repr_mimebundle_(self) -> dict:
        return {WIDGET_VIEW: {"version_major": 2, "version_minor": 0, "model_id": self.model_id},
                "text/plain": "VBox()"}


def test_the_kernel_side_writes_at_most_every_interval_and_removes_the_file_at_the_end(tmp_path):
    now = [100.0]
    out = LiveOutput(Widget(), every_s=1.0, clock=lambda: now[0], directory=tmp_path)
    out.show(bundle(0))  # outside a kernel IPython prints the display; the file is what matters here

    def written() -> int:
        return json.loads(out.path.read_text())[BATCH]["completed"]

    assert out.path == tmp_path / f"{MODEL_ID}.json" and written() == 0
    made = []

    def make(n):
        return lambda: made.append(n) or bundle(n)

    assert not out.snapshot(make(1)) and made == []  # not due: nothing is even built
    now[0] += 1.0
    assert out.snapshot(make(2)) and written() == 2
    now[0] += 5
    assert not out.snapshot(lambda: None) and written() == 2  # unchanged: nothing written
    assert not out.snapshot(lambda: 1 / 0) and written() == 2  # a snapshot that fails leaves the last one
    assert "snapshot_at" in json.loads(out.path.read_text())[BATCH]
    out.finish(bundle(10, "finished"))
    assert not out.path.exists()
    now[0] += 5
    assert not out.snapshot(make(3)) and not out.path.exists()  # a late tick after the end writes nothing


def test_snapshots_a_killed_kernel_left_behind_are_pruned_after_a_week(tmp_path):
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    for p in (old, new):
        p.write_text("{}")
    os.utime(old, (time.time() - STALE_AFTER_S - 60,) * 2)
    assert prune_snapshots(tmp_path) == 1 and not old.exists() and new.exists()
    assert prune_snapshots(tmp_path / "missing") == 0


def test_a_real_server_saves_the_kernels_snapshot_in_place_of_the_widget(tmp_path):
    runtime = tmp_path / "runtime"
    write_snapshot(snapshot_file(MODEL_ID, runtime / "agio-snapshots"), as_snapshot(bundle(6)))
    nb = new_notebook(cells=[new_code_cell("h", outputs=[new_output("display_data", data=live(completed=1))])])
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime)}
    with running_lab(tmp_path, env) as (base, token):
        body = json.dumps({"type": "notebook", "format": "json", "content": json.loads(nbformat.writes(nb))})
        request = urllib.request.Request(f"{base}/api/contents/saved.ipynb?token={token}", data=body.encode(),
                                         method="PUT", headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=60).read()
    [output] = nbformat.read(tmp_path / "saved.ipynb", as_version=4).cells[0].outputs
    assert WIDGET_VIEW not in output.data and output.data[BATCH]["completed"] == 6
    assert output.data["text/plain"].startswith("[snapshot saved while it ran")


def test_the_hook_reaches_a_contents_manager_another_extension_put_in_place():
    import asyncio

    from agio_notebook_server import snapshots
    from jupyter_server.services.contents.filemanager import FileContentsManager

    class Log:
        def debug(self, *args): pass

    class App:
        log = Log()
        contents_manager = FileContentsManager()

        class web_app:
            settings: dict = {}

    first = App.contents_manager
    snapshots._load_jupyter_server_extension(App)
    App.contents_manager = App.web_app.settings["contents_manager"] = FileContentsManager()  # as jupytext does
    asyncio.run(snapshots._start_jupyter_server_extension(App))
    snapshots._load_jupyter_server_extension(App)  # twice: still one hook
    assert first._pre_save_hooks == App.contents_manager._pre_save_hooks == [snapshots.pre_save]

"""A notebook executed in a real kernel and saved keeps every run's transcript, and no secret."""

from __future__ import annotations

import json

import nbformat

from kernel_support import FAKE_KEY

MIME = "application/vnd.agio.run+json"


def bundles(nb):
    return [(i, out["data"]) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
            for out in cell.get("outputs", []) if MIME in out.get("data", {})]


def test_every_run_is_saved_as_a_bundle_without_the_key(saved_notebook):
    text = saved_notebook.read_text()
    assert FAKE_KEY not in text
    nb = nbformat.read(saved_notebook, as_version=4)
    found = bundles(nb)
    assert [i for i, _ in found] == [3, 4, 5]  # the calc run, its retry, the hostile run
    for _, data in found:
        assert {"text/html", "text/plain"} <= set(data)
        assert data[MIME]["run"]["status"] == "completed"
    first, retry, hostile = (d[MIME] for _, d in found)
    failed = [e for e in first["events"] if e["type"] == "tool_call_failed"]
    assert len(failed) == 1 and "ZeroDivisionError" in failed[0]["payload"]["error"]
    assert retry["run"]["kind"] == "retry" and retry["run"]["retry_of"] == first["run"]["id"]
    assert retry["run"]["attempt"] == 2
    assert "<img" not in found[2][1]["text/html"] and "&lt;img" in found[2][1]["text/html"]
    # no live widget state or widget views are left where a transcript should be
    for _, data in found:
        assert "application/vnd.jupyter.widget-view+json" not in data
    runs_table = nb.cells[6]["outputs"][0]["data"]["text/plain"]
    assert "retry" in runs_table and json.dumps(nb.metadata).find(FAKE_KEY) == -1

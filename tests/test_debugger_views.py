"""The pause view's buttons and editors (no kernel needed), and step mode in the static transcript."""

from __future__ import annotations

import asyncio
import json

import ipywidgets as widgets

from agio_notebook.execution.pauses import Pause, PauseKind
from agio_notebook.notebook.pause_view import PauseView
from agio_notebook.notebook.transcript import bundle_for_run

from test_debugger import TOOL_THEN_ANSWER, runner_for, sync

EVIL = '<img src=x onerror="window.__pwned=1">'


def model_pause() -> Pause:
    request = {"model": "m", "messages": [{"role": "user", "content": EVIL}], "tools": [], "settings": {}, "stream": True}
    return Pause(PauseKind.MODEL, "r", "s", 2, 1, request=request)


def test_a_bad_edit_and_a_second_click_are_one_line_and_change_nothing():
    pause, note, closed = model_pause(), widgets.HTML(), []
    view = PauseView(pause, note, closed.append, one_model=False)
    assert EVIL not in view.widget.children[0].value and "&lt;img" in view.widget.children[0].value
    view.editors["messages"].value = '[{"role": "user", "content": "x"'
    view.click("Continue")
    assert "messages: not valid JSON" in note.value and not pause.decided and not closed
    view.editors["messages"].value = json.dumps([{"role": "robot", "content": "x"}])
    view.click("Edit")
    assert "role must be one of" in note.value and pause.edits == {}
    view.editors["messages"].value = json.dumps([{"role": "user", "content": "fixed"}])
    view.click("Edit")
    assert "edited: messages" in note.value and pause.edits["messages"][0]["content"] == "fixed"
    view.click("Continue")
    assert pause.action == "continue" and closed == [view]
    assert all(b.comm is None for b in view.buttons.values())  # closed: the browser can click them no more
    view.click("Continue")  # a second click that arrives after the first
    assert "already resumed (continue)" in note.value and "\n" not in note.value


def test_pause_views_share_their_layouts_and_styles_and_survive_close_all():
    """Each widget a view makes is a message the browser handles before the view shows: the views
    make only their own parts, and share layouts and styles (remade if something closed them)."""
    first, second = (PauseView(model_pause(), widgets.HTML(), lambda v: None, one_model=False) for _ in range(2))
    for a, b in ((first.buttons["Continue"], second.buttons["Step"]), (first.editors["system"], second.editors["messages"]),
                 (first.widget, second.widget)):
        assert a.layout is b.layout
    assert first.buttons["Continue"].style is second.buttons["Abort"].style
    made, note = [], widgets.HTML()
    widgets.Widget.on_widget_constructed(lambda w: made.append(type(w).__name__))
    try:
        PauseView(model_pause(), note, lambda v: None, one_model=False)
    finally:
        widgets.Widget.on_widget_constructed(None)
    assert sorted(made) == sorted(["HTML", "Button", "Button", "Button", "Button", "Textarea", "Textarea",
                                   "Textarea", "HBox", "VBox"])
    widgets.Widget.close_all()
    third = PauseView(model_pause(), widgets.HTML(), lambda v: None, one_model=False)
    assert third.widget.layout.comm is not None and third.widget.layout is not first.widget.layout


def test_after_agio_loads_a_pause_of_either_view_makes_only_its_own_widgets():
    """The first pause of a Run All comes before the extension's answer is heard, so both views'
    layouts and styles are made when agio loads: the browser builds them long before that pause."""
    from IPython.testing.globalipapp import get_ipython

    from agio_notebook.notebook.magics import load_ipython_extension

    widgets.Widget.close_all()  # nothing shared exists, as in a fresh kernel
    load_ipython_extension(get_ipython())
    made: list[str] = []
    note = widgets.HTML()
    widgets.Widget.on_widget_constructed(lambda w: made.append(type(w).__name__))
    try:
        for one_model in (True, False):
            PauseView(model_pause(), note, lambda v: None, one_model=one_model)
    finally:
        widgets.Widget.on_widget_constructed(None)
    assert "PauseWidget" in made and "Textarea" in made
    assert not [m for m in made if m.endswith(("Layout", "Style"))], made


def test_skip_takes_the_typed_result_and_only_a_tool_pause_offers_it():
    assert "Skip" not in PauseView(model_pause(), widgets.HTML(), lambda v: None, one_model=False).buttons
    pause = Pause(PauseKind.TOOL, "r", "s", 3, 3, tool_call={"id": "c1", "name": "add", "arguments": "{}"})
    view = PauseView(pause, widgets.HTML(), lambda v: None, one_model=False)
    view.editors["skip"].value = "42"
    view.click("Skip")
    assert pause.action == "skip" and pause.skipped_result == "42"


@sync
async def test_the_static_transcript_shows_pauses_edits_and_what_the_model_saw_escaped(tmp_path):
    runner, _ = runner_for(tmp_path, TOOL_THEN_ANSWER)
    debug = runner.debug(None, f"What is 2 + 3? {EVIL}")
    async for pause in debug:
        if pause.kind is PauseKind.TOOL:
            pause.edit(arguments={"a": 20, "b": 30})
        pause.cont()
    bundle = bundle_for_run(runner.repository, debug.result.run_id)
    html, text = bundle["text/html"], bundle["text/plain"]
    assert html.count('class="agio-pause-mark"') == 3 and html.count("What the model saw") == 2
    assert "agio-edited" in html and EVIL not in html and "&lt;img" in html
    assert "paused before tool call add (step 3) → continue" in text
    assert '[edited] arguments: proposed {"a": 2, "b": 3}' in text
    assert "paused" in bundle["text/plain"].splitlines()[-3]
    payload = bundle["application/vnd.agio.run+json"]
    assert payload["seen"]["calls"] == {"2": [0, 1], "4": [0, 1, 2, 3]}
    await asyncio.sleep(0)


@sync
async def test_a_pause_the_run_ended_at_is_marked_in_the_transcript(tmp_path):
    runner, _ = runner_for(tmp_path, TOOL_THEN_ANSWER)
    debug = runner.debug("s-end", "What is 2 + 3?", breakpoints=["tool"])
    await debug.__anext__()
    debug._task.cancel()  # an interrupt while paused
    result = await debug._task
    text = bundle_for_run(runner.repository, result.run_id)["text/plain"]
    assert "paused before tool call add (step 3) → ended" in text
    assert "[cancelled]" in text.splitlines()[0]


def test_the_one_model_view_is_one_widget_and_its_clicks_carry_the_editors_texts():
    """What the extension draws: one model; a click brings the texts, and bad ones are one line."""
    pause, note, closed = model_pause(), widgets.HTML(), []
    PauseView(model_pause(), widgets.HTML(), lambda v: None, one_model=True)  # the shared layout exists now
    made = []
    widgets.Widget.on_widget_constructed(lambda w: made.append(type(w).__name__))
    try:
        view = PauseView(pause, note, closed.append, one_model=True)
    finally:
        widgets.Widget.on_widget_constructed(None)
    assert made == ["PauseWidget"] and not view.editors and not view.buttons
    state = view.widget.get_state()
    assert EVIL not in state["html"] and "&lt;img" in state["html"]
    assert [b[0] for b in state["buttons"]] == ["Continue", "Step", "Edit", "Abort"]
    msg = view.widget._handle_custom_msg
    msg({"event": "click", "name": "Continue", "texts": {"messages": '[{"role": "user"'}}, [])
    assert "messages: not valid JSON" in note.value and not pause.decided
    edited = json.dumps([{"role": "user", "content": "edited"}])
    msg({"event": "click", "name": "Edit", "texts": {"messages": edited}}, [])
    assert "edited: messages" in note.value and pause.edits["messages"][0]["content"] == "edited"
    # a view drawn from now on (a reload, a second tab) starts from the edited text, not the proposal
    assert view.widget.editors[0]["value"] == edited
    before = (dict(view.texts), note.value, json.dumps(pause.edits))
    for junk in ("junk", None, {"event": "click", "name": "Explode", "texts": {"messages": "[]"}},
                 {"event": "hover", "name": "Continue"}, {"event": "click", "name": ["Continue"]},
                 {"event": "click", "name": "Edit", "texts": {"messages": 5, "nonsense": "x"}},
                 {"event": "click", "name": "Edit", "texts": ["x"]}):
        msg(junk, [])
        assert not pause.decided and "nonsense" not in view.texts
        assert view.texts == before[0] and json.dumps(pause.edits) == before[2], junk
    fixed = json.dumps([{"role": "user", "content": "fixed"}])
    msg({"event": "click", "name": "Continue", "texts": {"messages": fixed}}, [])
    assert pause.action == "continue" and pause.edits["messages"][0]["content"] == "fixed" and closed == [view]
    assert view.widget.comm is None


def test_the_view_is_one_model_only_after_an_extension_of_this_release_answered(monkeypatch):
    from agio_notebook import __version__
    from agio_notebook.notebook import frontend

    monkeypatch.setattr(frontend, "_widgets", set())
    assert isinstance(PauseView(model_pause(), widgets.HTML(), lambda v: None).widget, widgets.VBox)
    major, minor = __version__.split(".")[:2]
    for odd in (None, "x", {"widgets": ["AgioPauseModel"]}, {"extension": f"{major}.{int(minor) + 1}.0",
                                                               "widgets": ["AgioPauseModel"]},
                {"extension": __version__, "widgets": "AgioPauseModel"}, {"extension": 1, "widgets": [1, None]}):
        frontend.heard(odd)
    assert isinstance(PauseView(model_pause(), widgets.HTML(), lambda v: None).widget, widgets.VBox)
    frontend.heard({"extension": __version__, "widgets": ["AgioPauseModel"]})
    assert type(PauseView(model_pause(), widgets.HTML(), lambda v: None).widget).__name__ == "PauseWidget"


def test_outside_a_kernel_nobody_is_asked_and_nothing_waits(monkeypatch):
    from agio_notebook.notebook import frontend

    monkeypatch.setattr(frontend, "_asked_at", None)
    frontend.say_hello()  # no kernel here: there is no frontend to ask
    assert frontend._asked_at is None and not frontend.answer_may_come()


@sync
async def test_a_view_waits_for_the_answer_only_while_it_can_still_come(monkeypatch):
    import time

    from agio_notebook import __version__
    from agio_notebook.notebook import frontend

    monkeypatch.setattr(frontend, "_widgets", set())
    monkeypatch.setattr(frontend, "clicks_reach_a_busy_cell", lambda: True)
    monkeypatch.setattr(frontend, "_asked_at", time.monotonic() - 5)  # asked long ago, nobody answered
    t0 = time.monotonic()
    await frontend.answer()
    assert time.monotonic() - t0 < 0.5 and not frontend.answer_may_come()
    frontend._asked_at = time.monotonic()  # just asked: wait, until the answer comes
    asyncio.get_running_loop().call_later(0.2, frontend.heard, {"extension": __version__, "widgets": ["AgioPauseModel"]})
    t0 = time.monotonic()
    await frontend.answer()
    assert 0.15 < time.monotonic() - t0 < 1.5 and frontend.has_widget("AgioPauseModel")
    frontend._widgets.clear()
    frontend._asked_at = time.monotonic()  # just asked, and nobody answers: up to the limit
    t0 = time.monotonic()
    await frontend.answer(limit=0.3)
    assert 0.25 < time.monotonic() - t0 < 1.5 and not frontend.has_widget("AgioPauseModel")
    frontend._asked_at = time.monotonic()  # ipykernel 6: a busy cell never hears the answer, so no wait
    monkeypatch.setattr(frontend, "clicks_reach_a_busy_cell", lambda: False)
    assert not frontend.answer_may_come()
    t0 = time.monotonic()
    await frontend.answer(limit=5.0)  # would wait the whole limit if it expected an answer
    assert time.monotonic() - t0 < 2.5 and not frontend.has_widget("AgioPauseModel")


def test_the_note_is_made_when_there_is_first_something_to_say():
    from agio_notebook.notebook.pause_view import PauseNote

    box = widgets.VBox([widgets.HTML("a pause view")])
    note = PauseNote(box)
    note.value = ""  # a new pause resets the line: nothing to make yet
    assert note.widget is None and note.value == "" and len(box.children) == 1
    view = PauseView(model_pause(), note, lambda v: None, one_model=True)
    view.click("Edit")
    assert "nothing changed" in note.value and box.children[-1] is note.widget  # under the view
    note.value = ""
    assert note.widget.value == "" and len(box.children) == 2

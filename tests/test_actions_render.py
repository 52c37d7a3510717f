"""Rich action output in the static transcript: figures only from base64, tables through a sanitizer."""

from __future__ import annotations

from agio_notebook.notebook.render import displays_html, to_text
from agio_notebook.notebook.view_model import fold

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def test_untrusted_html_keeps_only_table_markup():
    html = displays_html([
        {"mime": "text/html", "data": '<table onclick="x()"><tr><th style="a">y</th></tr><tr><td>1<script>alert(1)'
                                      '</script><img src=x onerror=alert(1)><a href="javascript:x">l</a></td></tr></table>'},
        {"mime": "image/png", "data": '" onerror="alert(1)'},
        {"mime": "image/png", "data": PNG},
        {"mime": "application/javascript", "data": "alert(1)"},
    ])
    assert "<th>y</th>" in html and "<td>1" in html
    for bad in ("onclick", "<script", "onerror", "<img src=x", "javascript:", "style=\"a\"", "<a "):
        assert bad not in html, bad
    assert html.count("<img") == 1 and f'src="data:image/png;base64,{PNG}"' in html


def test_a_screenshot_shows_as_a_figure_and_the_text_transcript_counts_them():
    events = [
        {"type": "run_started", "run_id": "r", "session_id": "s", "seq": 1, "ts": 0,
         "payload": {"run": {"id": "r", "session_id": "s", "status": "running"}}},
        {"type": "step_completed", "run_id": "r", "session_id": "s", "seq": 2, "ts": 0, "payload": {"step": {
            "sequence": 1, "role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "screenshot", "arguments": "{}"}}]}}},
        {"type": "action_completed", "run_id": "r", "session_id": "s", "seq": 3, "ts": 0, "payload": {
            "tool_call_id": "c1", "name": "screenshot", "status": "ok", "input": {}, "output": {"screenshot": "cut…"}}},
        {"type": "tool_call_completed", "run_id": "r", "session_id": "s", "seq": 4, "ts": 0,
         "payload": {"tool_call_id": "c1", "name": "screenshot", "content": "taken", "sequence": 2}},
        {"type": "step_completed", "run_id": "r", "session_id": "s", "seq": 5, "ts": 0, "payload": {"step": {
            "sequence": 2, "role": "tool", "content": "taken", "tool_call_id": "c1", "name": "screenshot",
            "extra": {"actions": [{"name": "screenshot", "status": "ok", "output": {"screenshot": PNG}}]}}}},
    ]
    view = fold(events)
    (card,) = view.steps[0].tool_cards
    assert card.displays == [{"mime": "image/png", "data": PNG}]
    assert "[1 figure(s), 0 table(s) shown]" in to_text(view)


def test_a_write_shows_its_diff_escaped():
    from agio_notebook.notebook.render import to_html

    events = [
        {"type": "step_completed", "run_id": "r", "session_id": "s", "seq": 1, "ts": 0, "payload": {"step": {
            "sequence": 1, "role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "write_file", "arguments": "{}"}}]}}},
        {"type": "step_completed", "run_id": "r", "session_id": "s", "seq": 2, "ts": 0, "payload": {"step": {
            "sequence": 2, "role": "tool", "content": "ok", "tool_call_id": "c1", "name": "write_file",
            "extra": {"actions": [{"name": "write_file", "status": "ok",
                                   "output": {"diff": "--- a/x\n+++ b/x\n+<script>alert(1)</script>\n"}}]}}}},
    ]
    html = to_html(fold(events))
    assert 'class="agio-tool-diff"' in html and "+&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>" not in html

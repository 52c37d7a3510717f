"""The fold, the static renderings and the transcript bundle — no kernel needed."""

from __future__ import annotations

import asyncio

from agio_notebook import Agent, StepRunner, tool
from agio_notebook.notebook.render import to_html, to_text
from agio_notebook.notebook.transcript import MIME_TYPE, build_bundle, bundle_for_run
from agio_notebook.notebook.view_model import fold
from agio_notebook.storage import TinyDBRepository

from engine_support import ChunkModel, calls, cancel_when, nap, text, tool_started

EVIL = '<img src=x onerror="window.__pwned=1"><script>alert(1)</script>'


@tool
def echo(s: str) -> str:
    """Echo."""
    return s


@tool
def fail(s: str) -> str:
    """Fail."""
    raise RuntimeError(s)


def run_events(tmp_path, replies):
    repo = TinyDBRepository(tmp_path / "store")
    runner = StepRunner(Agent(model=ChunkModel(replies), tools=[echo, fail]), repository=repo)

    async def go():
        return [e async for e in runner.run_stream("s", "hello <b>you</b>")]
    return repo, asyncio.run(go())


def test_fold_builds_conversation_with_cards(tmp_path):
    _, events = run_events(tmp_path, [calls(("echo", {"s": "hi"}), ("fail", {"s": "nope"})), text("fine", "!")])
    view = fold(events)
    assert view.status == "completed" and view.final_text == "fine!"
    conv = view.conversation()
    assert [s.role for s in conv] == ["user", "assistant", "assistant"]
    cards = conv[1].tool_cards
    assert [(c.name, c.status) for c in cards] == [("echo", "ok"), ("fail", "error")]
    assert cards[0].result == "hi" and "RuntimeError: nope" in cards[1].error
    assert view.run_metrics["tool_errors"] == 1 and conv[2].metrics["total_tokens"]


def test_html_escapes_model_and_tool_output(tmp_path):
    _, events = run_events(tmp_path, [calls(("echo", {"s": EVIL})), text(EVIL)])
    html = to_html(fold(events))
    assert "<img" not in html and "<script" not in html
    assert "&lt;img src=x onerror=" in html
    assert "hello &lt;b&gt;you&lt;/b&gt;" in html
    for cls in ("agio-run", "agio-header", "agio-step-user", "agio-step-assistant", "agio-tool-card",
                "agio-tool-args", "agio-tool-result", "agio-metrics", "agio-status"):
        assert cls in html


def test_bundle_has_three_types_and_no_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-very-secret-key")
    repo, events = run_events(tmp_path, [text("the key is sk-live-very-secret-key")])
    bundle = bundle_for_run(repo, events[0].run_id)
    assert set(bundle) == {MIME_TYPE, "text/html", "text/plain"}
    payload = bundle[MIME_TYPE]
    assert payload["version"] == 1 and payload["run"]["status"] == "completed"
    assert [e["type"] for e in payload["events"]][0] == "run_started"
    assert all(e["type"] != "step_delta" for e in payload["events"])
    assert "sk-live-very-secret-key" not in str(bundle)
    live = build_bundle(events)  # the same transcript from the live events
    assert live["text/plain"] == bundle["text/plain"]


def test_text_transcript_reads_well(tmp_path):
    _, events = run_events(tmp_path, [calls(("fail", {"s": "x"})), text("sorry")])
    plain = to_text(fold(events))
    assert "#1 user: hello <b>you</b>" in plain and "-> fail(" in plain and "[error]" in plain
    assert plain.splitlines()[-1].startswith("4 steps")


def test_fallbacks_show_the_controls_as_whole_commands(tmp_path):
    repo, events = run_events(tmp_path, [text("first")])
    run_id = events[0].run_id
    asyncio.run(StepRunner(Agent(model=ChunkModel([text("second")])), repository=repo).retry(run_id))
    retry_id = [r.id for r in repo.list_runs("s") if r.kind == "retry"][0]
    bundle = bundle_for_run(repo, retry_id)
    html, plain = bundle["text/html"], bundle["text/plain"]
    short = retry_id[:8]  # as the transcript shows the id; a unique prefix names the run
    for command in (f"%agio retry {short} --from-seq 2", "%agio fork s --at 2",
                    f"%agio attempts {short}", f"%agio use-attempt {short} N"):
        assert command in html and command in plain
    assert [(a["number"], a["current"]) for a in bundle[MIME_TYPE]["attempts"]] == [(1, False), (2, True)]
    # the footer line is the same in the HTML and the text (and the extension folds the same events)
    footer = html.split('<div class="agio-metrics"', 1)[1].split(">", 1)[1].split("</div>", 1)[0]
    assert "total" in footer and footer in plain


def test_a_running_run_has_no_commands(tmp_path):
    _, events = run_events(tmp_path, [text("first")])
    html = build_bundle(events[:1])["text/html"]
    assert "agio-commands" not in html and "%agio retry" not in html


def test_malformed_records_are_left_out_of_a_transcript_not_a_traceback():
    """A damaged or crafted store record must not break %agio replay or the end of a live run."""
    import warnings

    from agio_notebook.notebook.view_model import fold

    step = {"id": "t1", "session_id": "s", "run_id": "r", "sequence": 3, "role": "tool", "content": "x",
            "tool_call_id": "c1", "extra": {"actions": ["not a dict", {"output": "nor this"}]}}
    events = [
        {"type": "run_started", "run_id": "r", "session_id": "s", "seq": 1, "ts": 0.0,
         "payload": {"run": {"id": "r", "session_id": "s", "status": "running"}}},
        {"type": "step_completed", "run_id": "r", "session_id": "s", "seq": 2, "ts": 0.0,
         "payload": {"step": {"id": "a1", "session_id": "s", "run_id": "r", "sequence": 2, "role": "assistant",
                              "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}]}}},
        {"type": "action_completed", "run_id": "r", "session_id": "s", "seq": 3, "ts": 0.0,
         "payload": {"tool_call_id": "c1", "input": {"isolation": {"not": "text"}}}},
        {"type": "step_completed", "run_id": "r", "session_id": "s", "seq": 4, "ts": 0.0, "payload": {"step": step}},
        {"type": "tool_call_completed", "run_id": "r", "session_id": "s", "seq": 5, "ts": 0.0, "payload": "junk"},
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        view = fold(events)
        html = to_html(view)
    assert view.skipped == 1 and len([w for w in caught if "malformed event" in str(w.message)]) == 1
    assert "agio" in html and view.run_id == "r"


def test_a_call_its_run_never_finished_is_not_shown_running(tmp_path):
    """Cancelled mid-call: the card says cancelled; a run whose process died (no terminal event, the
    stored run interrupted): interrupted. Neither keeps saying it runs."""
    repo = TinyDBRepository(tmp_path / "store")
    runner = StepRunner(Agent(model=ChunkModel([calls(("echo", {"s": "a"}), ("nap", {"seconds": 10}))]),
                              tools=[echo, nap]), repository=repo)
    events = asyncio.run(cancel_when(runner.run_stream("s", "go"), lambda seen: sum(
        e.type.value == "tool_call_started" for e in seen) == 2 and any(
        e.type.value == "tool_call_completed" for e in seen)))
    assert events[-1].type.value == "run_cancelled"
    cards = {c.name: c.status for c in fold(events).conversation()[1].tool_cards}
    assert cards == {"echo": "ok", "nap": "cancelled"}
    assert "[cancelled]" in to_text(fold(events))
    died = [e for e in events if e.type.value != "run_cancelled"]  # as if the process had died there
    run = repo.get_run(events[0].run_id).to_dict() | {"status": "interrupted"}
    bundle = build_bundle(died, run=run)
    assert "[interrupted]" in bundle["text/plain"]
    assert "agio-tool-interrupted" in bundle["text/html"] and "agio-tool-running" not in bundle["text/html"]


def test_a_run_that_failed_before_any_model_call_shows_no_cost(tmp_path):
    from agio_notebook import Agent, FunctionModel, StepRunner
    from agio_notebook.core import ModelError
    from agio_notebook.notebook.transcript import bundle_for_run
    from agio_notebook.storage import open_repository

    def refuses(messages, tools):
        raise ModelError("HTTP 401: invalid key")

    repo = open_repository(str(tmp_path / "s"))
    result = StepRunner(Agent(model=FunctionModel(refuses)), repository=repo).run_sync(None, "hi")
    bundle = bundle_for_run(repo, result.run_id)
    assert result.status.value == "failed" and "HTTP 401" in bundle["text/plain"]
    assert "cost" not in bundle["text/plain"].splitlines()[-1] and "cost $0" not in bundle["text/html"]

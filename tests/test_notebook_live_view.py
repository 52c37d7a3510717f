"""The live view's update path without a kernel: coalescing, bounded bytes, escaping, cards."""

from __future__ import annotations

import asyncio

from agio_notebook import Agent, StepRunner, tool
from agio_notebook.notebook.live_view import SEGMENT_CHARS, LiveView
from agio_notebook.storage import TinyDBRepository

from engine_support import ChunkModel, calls, text

EVIL = '<img src=x onerror="window.__pwned=1"><script>alert(1)</script>'


@tool
def echo(s: str) -> str:
    """Echo."""
    return s


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def stream(tmp_path, replies):
    runner = StepRunner(Agent(model=ChunkModel(replies), tools=[echo]),
                        repository=TinyDBRepository(tmp_path / "store"))

    async def go():
        return [e async for e in runner.run_stream("s", "hi")]
    return asyncio.run(go())


def values(widget) -> list[str]:
    out = [widget.value] if hasattr(widget, "value") and isinstance(widget.value, str) else []
    for child in getattr(widget, "children", ()):
        out += values(child)
    return out


def test_deltas_are_coalesced_by_time_and_bytes_stay_linear(tmp_path):
    pieces = [f"tok{i} " for i in range(3000)]
    events = stream(tmp_path, [text(*pieces)])
    clock = FakeClock()
    live = LiveView(clock=clock)
    sent = 0
    for ev in events:
        clock.now += 0.001  # 1000 events a second: 3 s of streaming
        before = [*values(live.widget)]
        live.feed(ev)
        after = values(live.widget)
        sent += sum(len(v) for v, old in zip(after, before + [""] * len(after)) if v != old)
    assert live.flushes <= 3.1 * 20 + 3, live.flushes
    assert live.flushes >= 20  # text shows while it streams, not only at the end
    answer = "".join(pieces)
    rendered = "".join(v for v in values(live.widget) if "pre-wrap" in v)
    assert "tok2999" in rendered and "tok0 " in rendered
    # each flush resends at most one text segment (plus small header/footer), never the whole answer
    assert sent < 4 * len(answer) + live.flushes * (SEGMENT_CHARS + 3000), sent
    live.close()


def test_terminal_event_flushes_at_once(tmp_path):
    events = stream(tmp_path, [text("a", "b", "c")])
    clock = FakeClock()  # time never moves: only the first event and the terminal one may flush
    live = LiveView(clock=clock)
    flushed = [live.feed(ev) for ev in events]
    assert flushed[0] and flushed[-1] and sum(flushed) == 2
    assert "completed" in live.header.value and "agio-metrics" in live.footer.value
    live.close()


def test_model_and_tool_text_is_escaped_in_widgets(tmp_path):
    events = stream(tmp_path, [calls(("echo", {"s": EVIL})), text(EVIL)])
    live = LiveView()
    for ev in events:
        live.feed(ev)
    html = "".join(values(live.widget))
    assert "<img" not in html and "<script" not in html
    assert "&lt;img src=x onerror=" in html and "agio-tool-card" in html
    live.close()


def test_after_the_warm_up_a_run_sends_only_its_own_widgets(tmp_path):
    """Layouts and styles are made when agio loads (the browser builds widgets one after another,
    so the first run's view, and a first pause behind it, wait for each one sent before)."""
    import ipywidgets as widgets

    from agio_notebook.notebook.live_view import warm_up

    events = stream(tmp_path, [calls(("echo", {"s": "x"})), text("done")])
    widgets.Widget.close_all()  # as after a restart of the views: nothing shared exists
    warm_up()
    made: list[str] = []
    widgets.Widget.on_widget_constructed(lambda w: made.append(type(w).__name__))
    try:
        view = LiveView(on_stop=lambda: None)
        for e in events:
            view.feed(e)
        view.flush()
    finally:
        widgets.Widget.on_widget_constructed(None)
    assert made and not [m for m in made if m in ("Layout", "ButtonStyle", "HTMLStyle")], made

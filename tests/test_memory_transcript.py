"""The memory_read card in the transcript (HTML, text, live view) and the trace drawing in the bundle."""

from __future__ import annotations

import asyncio

from agio_notebook import Agent, StepRunner, memory
from agio_notebook.notebook.live_view import LiveView
from agio_notebook.notebook.transcript import MIME_TYPE, build_bundle
from agio_notebook.storage import TinyDBRepository

from engine_support import ChunkModel, add, calls, text


def run_with_memory(tmp_path):
    repo = TinyDBRepository(tmp_path / "store")
    memory.add_skill("adding <b>", "Add with the add tool. <script>alert(1)</script>", scope="agent",
                     repository=repo)
    model = ChunkModel([calls(("add", {"a": 1, "b": 2})), text("3")])
    result = asyncio.run(StepRunner(Agent(model=model, tools=[add]), repository=repo).run(None, "add 1 and 2 <script>x</script>"))
    return repo, result


def test_bundle_shows_memory_as_a_collapsible_card_and_carries_the_trace(tmp_path):
    repo, result = run_with_memory(tmp_path)
    bundle = build_bundle(result.events, result.run)
    html = bundle["text/html"]
    assert '<details class="agio-memory-card"' in html and "1 skill, 0 experiences · hybrid" in html  # the local model is installed
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "#2 Memory" in html and "## Memory" in html  # the exact injected text, escaped, inside the card
    assert f"#2 memory: skill {result.events[3].payload['items'][0]['id'][:8]}" in bundle["text/plain"]
    svg = bundle[MIME_TYPE]["trace_svg"]
    assert svg.startswith("<svg") and svg.count('class="node') == 5 and svg.count('class="edge') == 4
    assert "<script>" not in svg and "&lt;script&gt;" in svg  # labels escaped by dot


def test_live_view_draws_the_memory_card(tmp_path):
    repo, result = run_with_memory(tmp_path)
    live = LiveView()
    for event in result.events:
        live.feed(event)
    live.flush()
    blocks = [b for b in live._blocks.values() if b.step.role == "memory"]
    assert len(blocks) == 1
    card = blocks[0].cards["memory"].value
    assert card.startswith('<details class="agio-memory-card"') and "&lt;script&gt;" in card
    assert "Memory" in blocks[0].label.value and not blocks[0].segments  # no raw text, only the card

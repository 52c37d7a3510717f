"""Fallback HTML that survives sanitisers and MathJax, graph layouts as data, batch summaries after Cancel."""

from __future__ import annotations

import base64
from types import SimpleNamespace

from agio_notebook.notebook.batch_monitor import _cost_so_far, histogram, histogram_html, summary_html, summary_text
from agio_notebook.views import graph_layout, graph_png, text_html


def test_text_html_keeps_dollars_as_text():
    html = text_html("<td>$0.0012</td><td>$0.0034</td>")
    assert "$" not in html and html.count("&#36;") == 2
    assert 'class="mathjax_ignore tex2jax_ignore"' in html  # MathJax 3 (JupyterLab) and 2 (nbviewer) skip it


def test_graph_layout_places_nodes_and_routes_edges():
    laid = graph_layout('digraph { rankdir=TB; "a \\"quoted\\"" -> b; "a \\"quoted\\"" -> c; }')
    assert set(laid["nodes"]) == {'a "quoted"', "b", "c"}
    top = laid["nodes"]['a "quoted"']
    assert all(laid["nodes"][n]["y"] > top["y"] for n in "bc")  # y grows downwards, as in the DOM
    for edge in laid["edges"]:
        assert len(edge["points"]) % 3 == 1 and edge["arrow"] is not None
    assert base64.b64decode(graph_png("digraph { a -> b }")).startswith(b"\x89PNG")


def _figures(**over):
    d = {"name": "eval", "status": "cancelled", "total": 40, "done": 40, "completed": 6, "failed": 1, "timed_out": 0,
         "cancelled": 33, "running": 0, "queued": 0, "throughput_per_s": 9.1, "completed_per_s": 1.2,
         "error_rate": 1 / 7, "tokens": 120, "cost": None, "avg_ms": 150.0, "elapsed_s": 5.0, "eta_s": 0.0,
         "histogram": histogram([108, 150, 172, 200, 237]), "last_errors": []}
    return {**d, **over}


def test_a_cancelled_batch_summary_tells_the_truth():
    d = _figures()
    html, text = summary_html(d), summary_text(d)
    for view in (html, text):
        assert "cancelled" in view and "6/40 completed" in view and "33 cancelled" in view and "1 failed" in view
        assert "1.20 completed/s" in view and "9.10" not in view and "cost unknown" in view
    assert "agio-batch-bar-cancelled" in html and "width:82.5%" in html and "width:15.0%" in html
    # a priced batch that was cancelled: the cost known so far, said to be so far
    assert "cost &#36;0.0100 so far" in summary_html(_figures(cost=0.01))
    assert "cost $0.0100 so far" in summary_text(_figures(cost=0.01))


def test_the_histogram_is_css_bars_with_separated_ranges():
    html = histogram_html(histogram([108, 150, 172, 200, 237], bins=2))
    assert "<svg" not in html and "<title>" not in html and html.count('class="agio-batch-bin"') == 2
    assert 'title="108 to 172 ms: 3 item(s)"' in html and "from 108 ms to 237 ms" in html


def test_the_cost_so_far_stays_unknown_while_an_item_that_ran_has_no_price():
    rec = lambda tokens, cost: SimpleNamespace(total_tokens=tokens, cost=cost)  # noqa: E731
    assert _cost_so_far([rec(10, None), rec(0, 0.0), rec(0, 0.0)]) is None  # cancelled items cost 0: not "$0"
    assert _cost_so_far([]) is None
    assert _cost_so_far([rec(10, 0.002), rec(12, 0.003), rec(0, None)]) == 0.005
    assert _cost_so_far([rec(10, 0.002), rec(12, None)]) is None


def test_the_run_transcripts_html_fallback_keeps_dollars_as_text():
    from agio_notebook.notebook.render import to_html
    from agio_notebook.notebook.view_model import RunView

    view = RunView()
    html = to_html(view)
    assert html.startswith('<div class="mathjax_ignore tex2jax_ignore">')
    assert "$" not in to_html(view, extra="<span>costs $5 and $6</span>")

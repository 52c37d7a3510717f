"""What a running run is doing right now, for the live footer: a fold over its events only."""

from __future__ import annotations

from .view_model import RunView


def pause_place(pause: dict) -> str:
    """Where a step-mode pause stands, from its ``run_paused`` payload: ``before tool call add (step 3)``."""
    kind, name = pause.get("kind"), pause.get("name")
    where = {"model": "before the model call", "reply": "after the model's reply",
             "tool": f"before tool call {name}", "result": f"after the result of {name}"}.get(kind, str(kind))
    return f"{where} (step {pause.get('sequence')})"


def phase(view: RunView) -> str | None:
    """``waiting for the model…``, ``streaming…``, ``running 2 tools (a, b)…``, ``waiting for approval
    (a)…`` or ``finishing…`` while the run goes on; ``None`` once it has ended."""
    if view.status not in ("pending", "running"):
        return None
    if view.paused is not None:
        return f"paused {pause_place(view.paused)}"
    cards = [c for s in view.steps for c in s.tool_cards]
    waiting = [c.name for c in cards if c.status == "awaiting_approval"]
    if waiting:
        return f"waiting for approval ({', '.join(waiting)})…"
    running = [c.name for c in cards if c.status in ("running", "pending")]  # pending: about to start
    if running:
        return f"running {len(running)} tool{'s' if len(running) > 1 else ''} ({', '.join(running)})…"
    last = max(view.steps, key=lambda s: s.sequence, default=None)
    if last is not None and last.role == "assistant":
        if not last.complete:
            return "streaming…" if last.text else "waiting for the model…"
        if not last.tool_cards:
            return "finishing…"
    return "waiting for the model…"

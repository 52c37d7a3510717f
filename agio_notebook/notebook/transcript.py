"""The transcript bundle a finished run leaves in its cell.

``application/vnd.agio.run+json`` carries the run's stored events (enough to redraw it, which the
JupyterLab extension does); ``text/html`` and ``text/plain`` are the same transcript for viewers
without the extension (GitHub, nbviewer, VS Code). Secrets never get in: the bundle holds events,
not configuration, and any configured API key that slipped into model or tool text is masked.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..core import AgentRun, AgentSession, StepEvent, StepEventType, mask
from ..execution.attempts import Attempt, attempts_of
from ..execution.nested import nested_events
from ..storage.base import Repository, iter_events
from .debug_marks import attach_seen, seen_payload
from .controls import attempt_dicts, command_lines, commands_html, commands_text
from .render import to_html, to_text
from .view_model import fold

MIME_TYPE = "application/vnd.agio.run+json"
BUNDLE_VERSION = 1


def build_bundle(events: Iterable[StepEvent | dict[str, Any]], run: AgentRun | dict[str, Any] | None = None,
                 session: AgentSession | dict[str, Any] | None = None,
                 attempts: list[Attempt] | None = None, seen: dict[str, Any] | None = None,
                 trace: bool = True) -> dict[str, Any]:
    """The MIME bundle for a run from its events (deltas are dropped: the completed steps carry the text).

    ``attempts`` (this run's family) feed the attempt selector; the fallbacks show the equivalent commands.
    ``seen`` (:func:`~.debug_marks.seen_payload`) is what each model call saw, shown under it.
    ``trace=False`` leaves out the trace graph (Graphviz), as the snapshots of a running run do.
    """
    dicts = [e.to_dict() if isinstance(e, StepEvent) else e for e in events]
    dicts = [e for e in dicts if e["type"] != StepEventType.STEP_DELTA.value and not _nested_delta(e)]
    run_dict = run.to_dict() if isinstance(run, AgentRun) else run
    if run_dict is None:
        run_dict = next((e["payload"]["run"] for e in reversed(dicts) if "run" in e["payload"]), None)
    session_dict = session.to_dict() if isinstance(session, AgentSession) else session
    payload = mask({"version": BUNDLE_VERSION, "run": run_dict, "session": session_dict,
                             "events": dicts, "attempts": attempt_dicts(attempts),
                             **({"seen": seen} if seen else {})})
    view = fold(payload["events"], payload["session"])
    attach_seen(view, payload.get("seen"))
    if run_dict is not None and not view.done and run_dict.get("status") not in (None, "running"):
        # a run with no terminal event (interrupted: its process died) shows its stored status
        view.status, view.error = run_dict["status"], run_dict.get("error")
        view.settle_cards()
    view.superseded_by = (run_dict or {}).get("superseded_by")
    payload["trace_svg"] = trace_svg(view.run_id, payload["events"]) if trace else None  # drawn by the extension
    lines = command_lines(view, payload["attempts"])
    html = to_html(view, commands_html(lines))
    text = to_text(view) + ("\n" + commands_text(lines) if lines else "")
    return {MIME_TYPE: payload, "text/html": html, "text/plain": text}


def add_trace(bundle: dict[str, Any]) -> bool:
    """Draw the trace graph into a bundle built with ``trace=False``; whether there was one to draw.

    A finished run's transcript is shown first and its graph a moment later: Graphviz runs as a program of
    its own, and a Stop should not wait for it."""
    payload = bundle[MIME_TYPE]
    svg = trace_svg((payload.get("run") or {}).get("id"), payload["events"])
    if svg is None:
        return False
    bundle[MIME_TYPE] = {**payload, "trace_svg": svg}
    return True


def _nested_delta(event: dict[str, Any]) -> bool:
    return event["type"] == StepEventType.NESTED.value and event["payload"]["event"]["type"] == "step_delta"


def trace_svg(run_id: str | None, events: list[dict[str, Any]]) -> str | None:
    """The run's trace graph as SVG, or None without steps or without Graphviz."""
    from ..memory.trace import trace_from_events

    if run_id is None or not any(e["type"] == StepEventType.STEP_COMPLETED.value for e in events):
        return None
    try:
        return trace_from_events(run_id, events).svg()
    except (RuntimeError, OSError):
        return None


def bundle_for_run(repository: Repository, run_id: str) -> dict[str, Any]:
    """The bundle of a stored run, rebuilt from the store (e.g. for ``%agio replay``)."""
    run = repository.get_run(run_id)
    session = repository.get_session(run.session_id) if run is not None else None
    attempts = attempts_of(repository, run_id) if run is not None else None
    seen = seen_payload(repository, run_id) if run is not None else None
    return build_bundle([*iter_events(repository, run_id), *nested_events(repository, run_id)], run, session,
                        attempts, seen)

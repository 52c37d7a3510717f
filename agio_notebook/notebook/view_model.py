"""RunView: a pure fold over a run's events — what the live view, the static HTML, the text transcript
and the JupyterLab renderer all draw. Built from the event stream only."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..core import StepEvent, StepEventType
from ..core.conversation import is_memory_step

_E = StepEventType


@dataclass
class ToolCard:
    tool_call_id: str
    name: str
    arguments: str
    status: str = "running"  # running | awaiting_approval | ok | error | rejected | cancelled | interrupted
    result: str | None = None
    error: str | None = None
    error_type: str | None = None
    duration_ms: float | None = None
    attempts: int | None = None
    sequence: int | None = None  # of the tool step
    displays: list[dict[str, Any]] = field(default_factory=list)  # rich action output: PNG, HTML tables
    isolation: str | None = None  # how a sandboxed action was isolated (shown on the card)
    diff: str | None = None  # what a file action changed (unified diff)
    replayed: bool = False  # a side-effect call answered from the record, not run again
    edited: dict[str, Any] = field(default_factory=dict)  # step mode: arguments/result edited, or skipped
    pauses: list[dict[str, Any]] = field(default_factory=list)  # step mode: where the run waited on it
    nested: RunView | None = None  # the run of an agent called as this tool, folded from its nested events
    changes: int = 0  # counts nested events folded in (the live view redraws the card when it moves)


@dataclass
class StepView:
    sequence: int
    role: str
    text: str = ""
    status: str = "ok"
    attempt: int = 1
    superseded: bool = False
    metrics: dict[str, Any] = field(default_factory=dict)
    tool_cards: list[ToolCard] = field(default_factory=list)
    complete: bool = False
    memory: dict[str, Any] | None = None  # a memory_read step: what was retrieved into the prompt
    edited: dict[str, Any] = field(default_factory=dict)  # step mode: the request or the reply was edited
    pauses: list[dict[str, Any]] = field(default_factory=list)  # step mode: before the call, after the reply
    seen: list[dict[str, Any]] | None = None  # the messages this model call received (from the bundle)
    seen_total: dict[str, Any] | None = None  # its prompt's tokens as counted, and as the model reported them


@dataclass
class RunView:
    run_id: str | None = None
    session_id: str | None = None
    status: str = "pending"
    kind: str = "run"
    attempt: int = 1
    retry_of: str | None = None
    superseded_by: str | None = None  # the retry that replaced this attempt, when known
    query: str | None = None
    model_name: str | None = None
    error: str | None = None
    final_text: str | None = None
    run_metrics: dict[str, Any] = field(default_factory=dict)
    steps: list[StepView] = field(default_factory=list)
    forked_from: str | None = None
    forked_at: int | None = None
    agent_name: str | None = None  # the agent answering (it changes at a handoff)
    handoffs: list[dict[str, Any]] = field(default_factory=list)  # {"from", "to", "sequence"} in order
    skipped: int = 0  # malformed events left out
    paused: dict[str, Any] | None = None  # step mode: the pause the run waits at now
    _by_seq: dict[int, StepView] = field(default_factory=dict, repr=False)
    _cards: dict[str, ToolCard] = field(default_factory=dict, repr=False)

    @property
    def done(self) -> bool:
        return self.status not in ("pending", "running")

    def _step(self, sequence: int, role: str) -> StepView:
        view = self._by_seq.get(sequence)
        if view is None:
            view = self._by_seq[sequence] = StepView(sequence=sequence, role=role)
            self.steps.append(view)
        return view

    def apply(self, event: StepEvent | dict[str, Any]) -> None:
        """Fold one event (object or wire dict) into the view; a malformed one is skipped, with a warning."""
        try:
            self._apply(StepEvent.from_dict(event) if isinstance(event, dict) else event)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            self.skipped += 1
            if self.skipped == 1:  # once per view: a damaged record must not become a traceback
                warnings.warn(f"agio: a malformed event was left out of the transcript ({type(exc).__name__}: "
                              f"{exc})", stacklevel=2)

    def _apply(self, event: StepEvent) -> None:
        t, p = event.type, event.payload
        if t is _E.NESTED:
            self._apply_nested(p["path"], p["event"])
            return
        if t is _E.HANDOFF:
            self.agent_name = p["to"]
            self.handoffs.append({"from": p["from"], "to": p["to"], "tool_call_id": p.get("tool_call_id")})
            return
        if t is _E.STEP_DELTA:
            if "content" in p:
                self._step(p["sequence"], "assistant").text += p["content"]
            return
        if t is _E.RUN_STARTED or t.is_terminal:
            run = p["run"]
            self.run_id, self.session_id = run["id"], run["session_id"]
            self.status, self.kind, self.attempt = run["status"], run.get("kind", "run"), run.get("attempt", 1)
            self.retry_of, self.query, self.model_name = run.get("retry_of"), run.get("query"), run.get("model_name")
            self.error, self.final_text = run.get("error"), run.get("final_text")
            self.run_metrics = run.get("metrics") or {}
            self.agent_name = run.get("agent_name") or self.agent_name
            if t.is_terminal:
                self.settle_cards()
        elif t is _E.STEP_COMPLETED:
            step = p["step"]
            view = self._step(step["sequence"], step["role"])
            view.role = step["role"]
            view.text = step.get("content") or ""
            view.status, view.attempt = step.get("status", "ok"), step.get("attempt", 1)
            view.superseded, view.metrics, view.complete = step.get("superseded", False), step.get("metrics") or {}, True
            if is_memory_step(step):
                view.role, view.text = "memory", ""  # shown as a card from its memory_read event
            if step["role"] == "tool" and step.get("tool_call_id") in self._cards:
                card = self._cards[step["tool_call_id"]]  # figures and screenshots come whole with the step
                actions = [a for a in (step.get("extra") or {}).get("actions") or () if isinstance(a, dict)]
                card.displays = [d for a in actions for d in action_displays(a)]
                diffs = [a["output"].get("diff") for a in actions if isinstance(a.get("output"), dict)]
                card.diff = "".join(d for d in diffs if isinstance(d, str)) or None
            extra = step.get("extra") or {}
            edited = dict(extra.get("edited") or {})
            if (extra.get("request") or {}).get("edited"):
                edited["request"] = extra["request"]["edited"]
            if edited and step["role"] == "tool" and step.get("tool_call_id") in self._cards:
                card = self._cards[step["tool_call_id"]]
                card.edited, card.result = edited, step.get("content")
                if "arguments" in edited:
                    card.arguments = edited["arguments"]["sent"]
            elif edited:
                view.edited = edited
            if step["role"] == "assistant":
                for call in step.get("tool_calls") or ():
                    if call["id"] not in self._cards:
                        card = ToolCard(call["id"], call["function"]["name"], call["function"]["arguments"])
                        self._cards[call["id"]] = card
                        view.tool_cards.append(card)
        elif t is _E.TOOL_CALL_STARTED:
            card = self._cards.get(p["tool_call_id"])
            if card is None:
                card = self._cards[p["tool_call_id"]] = ToolCard(p["tool_call_id"], p["name"], p["arguments"])
                self._step(p["sequence"], "assistant").tool_cards.append(card)
            card.status = "running"
        elif t is _E.APPROVAL_REQUESTED:
            card = self._cards.get(p["tool_call_id"])
            if card is not None:
                card.status = "awaiting_approval"
        elif t is _E.APPROVAL_RESOLVED:
            card = self._cards.get(p["tool_call_id"])
            if card is not None:
                card.arguments = p.get("arguments", card.arguments)
                card.status = "running" if p["approved"] else "rejected"
        elif t in (_E.TOOL_CALL_COMPLETED, _E.TOOL_CALL_FAILED):
            card = self._cards.get(p["tool_call_id"])
            if card is None:
                return
            card.duration_ms, card.attempts, card.sequence = p.get("duration_ms"), p.get("attempts"), p.get("sequence")
            if t is _E.TOOL_CALL_COMPLETED:
                card.status, card.result = "ok", p.get("content")
                card.replayed = bool(p.get("replayed"))
            else:
                card.status = "rejected" if p.get("error_type") == "rejected" else "error"
                card.error, card.error_type = p.get("error"), p.get("error_type")
        elif t is _E.MEMORY_READ:
            self._step(p["sequence"], "memory").memory = p
        elif t in (_E.ACTION_COMPLETED, _E.ACTION_FAILED):
            card = self._cards.get(p.get("tool_call_id") or "")
            if card is not None:
                isolation = (p.get("input") or {}).get("isolation")
                card.isolation = isolation if isinstance(isolation, str) else card.isolation
        elif t is _E.RUN_PAUSED:
            self.paused = dict(p)
        elif t is _E.RUN_RESUMED:
            self.paused = None
            record = dict(p)
            card = self._cards.get(p.get("tool_call_id") or "")
            if card is not None:
                card.pauses.append(record)
            else:
                self._step(p["sequence"], "assistant").pauses.append(record)
        elif t is _E.METRICS:
            self.run_metrics = p.get("run") or self.run_metrics
            view = self._by_seq.get(p["sequence"])
            if view is not None:
                view.metrics = p.get("step") or view.metrics

    def _apply_nested(self, path: list[dict[str, Any]], event: dict[str, Any]) -> None:
        """An event of a run nested under one of this run's tool cards (at any depth, by its path)."""
        view: RunView = self
        for hop in path:
            card = view._cards.get(hop["tool_call_id"])
            if card is None:  # the card is not known yet: nothing to hang it on
                return
            card.changes += 1
            if card.nested is None or card.nested.run_id not in (None, hop.get("run_id")):
                card.nested = RunView()
            view = card.nested
        view._apply(StepEvent.from_dict(event))

    def settle_cards(self) -> None:
        """The run is over: a call still running or awaiting approval never finished (cancelled with its
        run, or its process died), so its card must not go on saying it runs."""
        ended = "cancelled" if self.status == "cancelled" else "interrupted"
        if self.paused is not None:  # ended while it waited at a pause
            self.paused = dict(self.paused, action="ended")
            card = self._cards.get(self.paused.get("tool_call_id") or "")
            (card.pauses if card is not None else self._step(self.paused["sequence"], "assistant").pauses).append(
                self.paused)
            self.paused = None
        for card in self._cards.values():
            if card.status in ("running", "awaiting_approval"):
                card.status = ended
            if card.nested is not None and not card.nested.done:  # its end never reached this stream
                card.nested.status = ended
                card.nested.settle_cards()

    def conversation(self) -> list[StepView]:
        """Steps in sequence order, tool steps folded into their cards (they are shown there)."""
        return [s for s in sorted(self.steps, key=lambda s: s.sequence) if s.role != "tool"]


def action_displays(action: dict[str, Any]) -> list[dict[str, Any]]:
    """The rich outputs of an action record: its displays, and a browser screenshot as a PNG."""
    out = action.get("output")
    if not isinstance(out, dict):
        return []
    shown = [d for d in out.get("displays") or () if isinstance(d, dict) and d.get("mime") in ("image/png", "text/html")]
    if isinstance(out.get("screenshot"), str):
        shown.append({"mime": "image/png", "data": out["screenshot"]})
    return shown


def fold(events: Iterable[StepEvent | dict[str, Any]], session: dict[str, Any] | None = None) -> RunView:
    view = RunView()
    for event in events:
        view.apply(event)
    if session:
        view.forked_from, view.forked_at = session.get("forked_from"), session.get("forked_at")
    return view

"""RunView: a pure fold over a run's events — what the live view, the static HTML, the text transcript
and the JupyterLab renderer all draw. Built from the event stream only.

One handler per event type (``_HANDLERS``). The extension folds the same events in TypeScript
(``labextension/src/fold.ts``); ``tests/fixtures/fold_cases.json`` holds events with the state both
folds must reach, and the tests of both languages read it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ..core import StepEvent, StepEventType, gave_answer
from ..core.conversation import is_memory_step

_E = StepEventType


@dataclass
class ToolCard:
    tool_call_id: str
    name: str
    arguments: str
    # pending (asked for, not started) | paused (step mode waits before it) | running | awaiting_approval |
    # ok | error | rejected | cancelled | interrupted
    status: str = "pending"
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


UNFINISHED = ("pending", "paused", "running", "awaiting_approval")  # a card in one of these has no outcome yet


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
    agent: str | None = None  # a model step: the agent that made it (it changes at a handoff)


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
    output: Any = None  # a typed agent's answer (JSON data) and its type's name
    output_type: str | None = None
    answered: bool = False  # it gave a typed answer (None included): see core.run.gave_answer
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
    _holder: str | None = field(default=None, repr=False)  # the agent holding the conversation now
    _before_pause: dict[str, str] = field(default_factory=dict, repr=False)  # a paused card's status before

    @property
    def done(self) -> bool:
        return self.status not in ("pending", "running")

    def _step(self, sequence: int, role: str) -> StepView:
        view = self._by_seq.get(sequence)
        if view is None:
            view = self._by_seq[sequence] = StepView(sequence=sequence, role=role)
            self.steps.append(view)
        return view

    def _card(self, payload: dict[str, Any]) -> ToolCard | None:
        return self._cards.get(payload.get("tool_call_id") or "")

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
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            handler(self, event)

    def settle_cards(self) -> None:
        """The run is over: a call still running or awaiting approval never finished (cancelled with its
        run, or its process died), so its card must not go on saying it runs."""
        ended = "cancelled" if self.status == "cancelled" else "interrupted"
        if self.paused is not None:  # ended while it waited at a pause
            self.paused = dict(self.paused, action="ended")
            card = self._card(self.paused)
            (card.pauses if card is not None else self._step(self.paused["sequence"], "assistant").pauses).append(
                self.paused)
            self.paused = None
        for card in self._cards.values():
            if card.status in UNFINISHED:
                card.status = ended
            if card.nested is not None and not card.nested.done:  # its end never reached this stream
                card.nested.status = ended
                card.nested.settle_cards()

    def counted_metrics(self) -> dict[str, Any]:
        """The run's metrics as its footer shows them: counts and tokens the run never reported are taken
        from the steps shown (a nested run cancelled with its caller: its end, and its totals, never
        reached this stream), and every tool card counts, with those that never finished."""
        steps = [s for s in self.steps if s.complete]
        models = [s for s in steps if s.role == "assistant"]
        cards = list(self._cards.values())
        counted: dict[str, Any] = {"steps": len(steps), "model_calls": len(models)}
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            known = [s.metrics[key] for s in models if s.metrics.get(key) is not None]
            counted[key] = sum(known) if known else None
        shown = dict(self.run_metrics)
        for key, value in counted.items():
            if not shown.get(key) and value:
                shown[key] = value
        shown["tool_calls"] = max(shown.get("tool_calls") or 0, len(cards))
        unfinished = sum(c.status in ("cancelled", "interrupted") for c in cards)
        if unfinished:
            shown["tool_unfinished"] = unfinished
        return shown

    def conversation(self) -> list[StepView]:
        """Steps in sequence order, tool steps folded into their cards (they are shown there)."""
        return [s for s in sorted(self.steps, key=lambda s: s.sequence) if s.role != "tool"]


# -- one handler per event type -------------------------------------------------------------------

Handler = Callable[[RunView, StepEvent], None]
_HANDLERS: dict[StepEventType, Handler] = {}


def _on(*types: StepEventType) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        for t in types:
            _HANDLERS[t] = handler
        return handler
    return register


@_on(_E.NESTED)
def _nested(view: RunView, event: StepEvent) -> None:
    """An event of a run nested under one of this run's tool cards (at any depth, by its path)."""
    for hop in event.payload["path"]:
        card = view._cards.get(hop["tool_call_id"])
        if card is None:  # the card is not known yet: nothing to hang it on
            return
        card.changes += 1
        if card.nested is None or card.nested.run_id not in (None, hop.get("run_id")):
            card.nested = RunView()
        view = card.nested
    view._apply(StepEvent.from_dict(event.payload["event"]))


@_on(_E.HANDOFF)
def _handoff(view: RunView, event: StepEvent) -> None:
    p = event.payload
    view.agent_name = view._holder = p["to"]
    view.handoffs.append({"from": p["from"], "to": p["to"], "tool_call_id": p.get("tool_call_id")})


@_on(_E.STEP_DELTA)
def _delta(view: RunView, event: StepEvent) -> None:
    p = event.payload
    if "content" in p:
        view._step(p["sequence"], "assistant").text += p["content"]


@_on(_E.RUN_STARTED, _E.RUN_COMPLETED, _E.RUN_FAILED, _E.RUN_CANCELLED, _E.RUN_MAX_STEPS, _E.RUN_BUDGET_EXCEEDED)
def _run_record(view: RunView, event: StepEvent) -> None:
    run = event.payload["run"]
    view.run_id, view.session_id = run["id"], run["session_id"]
    view.status, view.kind, view.attempt = run["status"], run.get("kind", "run"), run.get("attempt", 1)
    view.retry_of, view.query, view.model_name = run.get("retry_of"), run.get("query"), run.get("model_name")
    view.error, view.final_text = run.get("error"), run.get("final_text")
    view.output, view.output_type, view.answered = run.get("output"), run.get("output_type"), gave_answer(run)
    view.run_metrics = run.get("metrics") or {}
    view.agent_name = run.get("agent_name") or view.agent_name
    if view._holder is None:
        view._holder = view.agent_name
    if event.type.is_terminal:
        view.settle_cards()


@_on(_E.STEP_COMPLETED)
def _step_completed(view: RunView, event: StepEvent) -> None:
    step = event.payload["step"]
    extra = step.get("extra") or {}
    shown = view._step(step["sequence"], step["role"])
    shown.role, shown.text = step["role"], step.get("content") or ""
    shown.status, shown.attempt = step.get("status", "ok"), step.get("attempt", 1)
    shown.superseded, shown.metrics, shown.complete = step.get("superseded", False), step.get("metrics") or {}, True
    if is_memory_step(step):
        shown.role, shown.text = "memory", ""  # shown as a card from its memory_read event
    card = view._card(step) if step["role"] == "tool" else None
    if card is not None:  # figures and screenshots come whole with the step
        actions = [a for a in extra.get("actions") or () if isinstance(a, dict)]
        card.displays = [d for a in actions for d in action_displays(a)]
        diffs = [a["output"].get("diff") for a in actions if isinstance(a.get("output"), dict)]
        card.diff = "".join(d for d in diffs if isinstance(d, str)) or None
    edited = dict(extra.get("edited") or {})
    if (extra.get("request") or {}).get("edited"):
        edited["request"] = extra["request"]["edited"]
    if edited and card is not None:
        card.edited = edited
        if "result" in edited or "skipped" in edited:  # what the model read instead of the tool's own result
            card.result = step.get("content")
        if "arguments" in edited:
            card.arguments = edited["arguments"]["sent"]
    elif edited:
        shown.edited = edited
    if step["role"] == "assistant":
        shown.agent = view._holder
        for call in step.get("tool_calls") or ():
            if call["id"] not in view._cards:
                new = view._cards[call["id"]] = ToolCard(call["id"], call["function"]["name"],
                                                         call["function"]["arguments"])
                shown.tool_cards.append(new)


@_on(_E.TOOL_CALL_STARTED)
def _tool_started(view: RunView, event: StepEvent) -> None:
    p = event.payload
    card = view._card(p)
    if card is None:
        card = view._cards[p["tool_call_id"]] = ToolCard(p["tool_call_id"], p["name"], p["arguments"])
        view._step(p["sequence"], "assistant").tool_cards.append(card)
    card.status = "running"


@_on(_E.APPROVAL_REQUESTED)
def _approval_requested(view: RunView, event: StepEvent) -> None:
    card = view._card(event.payload)
    if card is not None:
        card.status = "awaiting_approval"


@_on(_E.APPROVAL_RESOLVED)
def _approval_resolved(view: RunView, event: StepEvent) -> None:
    p = event.payload
    card = view._card(p)
    if card is not None:
        card.arguments = p.get("arguments", card.arguments)
        card.status = "running" if p["approved"] else "rejected"


@_on(_E.TOOL_CALL_COMPLETED, _E.TOOL_CALL_FAILED)
def _tool_ended(view: RunView, event: StepEvent) -> None:
    p = event.payload
    card = view._card(p)
    if card is None:
        return
    card.duration_ms, card.attempts, card.sequence = p.get("duration_ms"), p.get("attempts"), p.get("sequence")
    if event.type is _E.TOOL_CALL_COMPLETED:
        card.status, card.result = "ok", p.get("content")
        card.replayed = bool(p.get("replayed"))
    else:
        card.status = "rejected" if p.get("error_type") == "rejected" else "error"
        card.error, card.error_type = p.get("error"), p.get("error_type")


@_on(_E.MEMORY_READ)
def _memory_read(view: RunView, event: StepEvent) -> None:
    view._step(event.payload["sequence"], "memory").memory = event.payload


@_on(_E.ACTION_COMPLETED, _E.ACTION_FAILED)
def _action_ended(view: RunView, event: StepEvent) -> None:
    card = view._card(event.payload)
    if card is not None:
        isolation = (event.payload.get("input") or {}).get("isolation")
        card.isolation = isolation if isinstance(isolation, str) else card.isolation


@_on(_E.RUN_PAUSED)
def _paused(view: RunView, event: StepEvent) -> None:
    view.paused = dict(event.payload)
    card = view._card(event.payload)
    if card is not None and event.payload.get("kind") == "tool" and card.status in ("pending", "running"):
        view._before_pause[card.tool_call_id] = card.status
        card.status = "paused"  # waiting before the tool runs: it has not run yet


@_on(_E.RUN_RESUMED)
def _resumed(view: RunView, event: StepEvent) -> None:
    p = event.payload
    view.paused = None
    card = view._card(p)
    if card is not None:
        card.pauses.append(dict(p))
        if card.status == "paused":
            card.status = view._before_pause.pop(card.tool_call_id, "pending")
    else:
        view._step(p["sequence"], "assistant").pauses.append(dict(p))


@_on(_E.METRICS)
def _metrics(view: RunView, event: StepEvent) -> None:
    p = event.payload
    view.run_metrics = p.get("run") or view.run_metrics
    shown = view._by_seq.get(p["sequence"])
    if shown is not None:
        shown.metrics = p.get("step") or shown.metrics


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

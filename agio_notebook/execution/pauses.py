"""Pauses of step mode: what a paused run shows, what a person may change, and where it stops.

A :class:`Pause` is one stop of the loop at one of four points: before a model call (``model``: the
exact request), after the model's reply before its tools run (``reply``), before a tool call
(``tool``) and after a tool's result (``result``). It is decided once: :meth:`Pause.cont`,
:meth:`Pause.step`, :meth:`Pause.skip` or :meth:`Pause.abort`, after any number of
:meth:`Pause.edit` calls. Every edit is checked here, before anything is sent or stored, and a bad one
raises :class:`DebugError` with one line.
"""

from __future__ import annotations

import concurrent.futures
import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Iterable, Mapping, Union

from ..core import AgioError
from ..core.messages import MessageError, check_tool_calls
from ..core.messages import check_messages as _check_messages
from ..models.settings import SettingsError, check_settings
from ..tools import Tool
from .approval import check_arguments
from ..models.tokens import TokenCount, message_counts, prompt_total


class DebugError(AgioError, ValueError):
    """A step-mode request that cannot be honoured (a bad edit, a pause decided twice)."""


class PauseKind(str, Enum):
    MODEL = "model"  # before a model call: the request as it will be sent
    REPLY = "reply"  # after the model's reply, before its tool calls run
    TOOL = "tool"  # before one tool call runs
    RESULT = "result"  # after one tool call's result, before it is stored


_EDITS = {PauseKind.MODEL: ("messages", "system", "settings"), PauseKind.REPLY: ("reply",),
          PauseKind.TOOL: ("arguments",), PauseKind.RESULT: ("result",)}


def _parsed(value: Any, what: str) -> Any:
    """Edits typed in an editor arrive as JSON text; Python callers pass values."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise DebugError(f"{what}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


def check_messages(messages: Any) -> list[dict[str, Any]]:
    """An edited request's messages, by the rules every conversation is checked by (``core.messages``)."""
    try:
        return _check_messages(_parsed(messages, "messages"), allow_empty=False)
    except MessageError as exc:
        raise DebugError(str(exc)) from None


MAX_EDIT_CHARS = 1_000_000  # an edit is stored with the step (and what was proposed beside it): keep it sane


def _check_size(key: str, value: Any) -> None:
    size = len(value) if isinstance(value, str) else len(json.dumps(value, default=str))
    if size > MAX_EDIT_CHARS:
        raise DebugError(f"{key}: the edit is {size:,} characters; at most {MAX_EDIT_CHARS:,} can be stored "
                         "with a step")


def check_reply(reply: Any) -> dict[str, Any]:
    """The model's reply as ``{"content", "tool_calls"}``; plain text is a reply without tool calls."""
    reply = reply if not (isinstance(reply, str) and reply.lstrip()[:1] == "{") else _parsed(reply, "reply")
    if isinstance(reply, str):
        return {"content": reply, "tool_calls": []}
    if not isinstance(reply, dict):
        raise DebugError(f"reply must be text or {{\"content\", \"tool_calls\"}}, got {type(reply).__name__}")
    content = reply.get("content")
    if content is not None and not isinstance(content, str):
        raise DebugError(f"reply: content must be text or null, got {type(content).__name__}")
    try:
        calls = check_tool_calls(reply.get("tool_calls") or [], "reply")
    except MessageError as exc:
        raise DebugError(str(exc)) from None
    if content is None and not calls:
        raise DebugError("reply: needs content or tool_calls")
    return {"content": content, "tool_calls": calls}


@dataclass(slots=True)
class Pause:
    """One stop of a run in step mode. Read it, :meth:`edit` it, then decide once."""

    kind: PauseKind
    run_id: str
    session_id: str
    sequence: int  # the step this point produces: the model call's step, or the tool call's result step
    index: int  # 1 for the run's first pause point, counting the points that did not stop too
    request: dict[str, Any] | None = None  # model: {"model", "messages", "tools", "settings", "stream"}
    _tokens: list[TokenCount] | None = field(default=None, repr=False)  # counted when first asked for
    reply: dict[str, Any] | None = None  # reply: {"content", "tool_calls"}
    tool_call: dict[str, Any] | None = None  # tool/result: {"id", "name", "arguments"} (arguments as text)
    result: str | None = None  # result: the tool's result text
    status: str | None = None  # result: "ok", "error", "rejected"
    tool: Tool | None = field(default=None, repr=False)
    edits: dict[str, Any] = field(default_factory=dict)
    action: str | None = None  # continue | step | skip | abort, once decided
    skipped_result: str | None = None
    ended: bool = False  # the run ended (cancelled, interrupted) before this pause was decided
    _future: concurrent.futures.Future | None = field(default=None, repr=False)

    @property
    def _decided(self) -> concurrent.futures.Future:
        """Made when first needed: a point where no breakpoint fires never pays for it."""
        if self._future is None:
            self._future = concurrent.futures.Future()
        return self._future

    # -- reading -----------------------------------------------------------------------
    @property
    def tokens(self) -> list[TokenCount]:
        """Before a model call: one count per message (the model's tokenizer, or an estimate)."""
        if self._tokens is None:
            self._tokens = request_tokens(self.request) if self.request else []
        return self._tokens

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.request["messages"]) if self.request else []

    @property
    def name(self) -> str | None:
        return self.tool_call["name"] if self.tool_call else None

    @property
    def arguments(self) -> dict[str, Any] | None:
        if not self.tool_call:
            return None
        try:
            value = json.loads(self.tool_call["arguments"] or "{}")
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None

    @property
    def token_total(self) -> int:
        """The whole prompt: every message with the chat format around it, and the reply's priming (what a
        budget counts for this call)."""
        return prompt_total(self.tokens).tokens

    @property
    def decided(self) -> bool:
        return self._decided.done()

    def describe(self) -> str:
        """One line: where the run stands."""
        if self.kind is PauseKind.MODEL:
            est = any(t.estimated for t in self.tokens)
            return (f"before model call (step {self.sequence}): {len(self.messages)} messages, "
                    f"{'~' if est else ''}{self.token_total} tokens{' (estimated)' if est else ''}")
        if self.kind is PauseKind.REPLY:
            calls = ", ".join(c["function"]["name"] for c in (self.reply or {}).get("tool_calls", ()))
            return f"after the model's reply (step {self.sequence})" + (f": calls {calls}" if calls else "")
        if self.kind is PauseKind.TOOL:
            return f"before tool call {self.name}({self.tool_call['arguments']}) (step {self.sequence})"
        return f"after tool result of {self.name} (step {self.sequence}, {self.status})"

    # -- changing ------------------------------------------------------------------------
    def edit(self, **changes: Any) -> Pause:
        """Change what happens next; checked at once. Before a model call: ``messages``, ``system``,
        ``settings``; after a reply: ``reply``; before a tool call: ``arguments``; after a result: ``result``."""
        self._open()
        allowed = _EDITS[self.kind]
        wrong = [k for k in changes if k not in allowed]
        if wrong:
            raise DebugError(f"cannot edit {', '.join(wrong)} {self._where()}; editable here: {', '.join(allowed)}")
        checked: dict[str, Any] = {}
        for key, value in changes.items():
            _check_size(key, value)
            if key == "messages":
                checked[key] = check_messages(value)
            elif key == "system":
                if not isinstance(value, str):
                    raise DebugError(f"system must be text, got {type(value).__name__}")
                checked[key] = value
            elif key == "settings":
                try:
                    checked[key] = check_settings(_parsed(value, "settings"), "settings")
                except SettingsError as exc:
                    raise DebugError(str(exc)) from None
            elif key == "reply":
                checked[key] = check_reply(value)
            elif key == "arguments":
                args = _parsed(value, "arguments")
                problem = check_arguments(self.tool, args)
                if problem is not None:
                    raise DebugError(problem)
                checked[key] = args
            elif key == "result":
                if not isinstance(value, str):
                    value = json.dumps(value)
                checked[key] = value
        self.edits.update(checked)
        return self

    # -- deciding ------------------------------------------------------------------------
    def cont(self) -> None:
        """Go on to the next pause where a breakpoint fires."""
        self._decide("continue")

    def step(self) -> None:
        """Go on to the very next pause point."""
        self._decide("step")

    def skip(self, result: Any) -> None:
        """Before a tool call: do not run it; ``result`` (typed by hand) is its result."""
        if self.kind is not PauseKind.TOOL:
            self._open()
            raise DebugError(f"skip answers a tool call by hand; this pause is {self._where()}")
        self._open()
        self.skipped_result = result if isinstance(result, str) else json.dumps(result)
        self._decide("skip")

    def abort(self) -> None:
        """End the run here, cancelled; its stored steps stay."""
        self._decide("abort")

    def _decide(self, action: str) -> None:
        self._open()
        self.action = action
        try:
            self._decided.set_result(action)
        except concurrent.futures.InvalidStateError:
            raise DebugError(self._closed_reason()) from None

    def _open(self) -> None:
        if self.ended or self._decided.done():
            raise DebugError(self._closed_reason())

    def _closed_reason(self) -> str:
        if self.ended:
            return "the run has ended; this pause can no longer be resumed"
        return f"this pause was already resumed ({self.action}); the run has moved on"

    def _where(self) -> str:
        return {PauseKind.MODEL: "before a model call", PauseKind.REPLY: "after a reply",
                PauseKind.TOOL: "before a tool call", PauseKind.RESULT: "after a tool result"}[self.kind]

    def _close(self) -> None:
        """The run ended while this pause waited: any later decision gets one clear line."""
        self.ended = True
        self._decided.cancel()


class ModelCall:
    """The model call about to be made: what the executor sends once the debugger is done with it."""

    __slots__ = ("messages", "settings", "request")

    def __init__(self, messages: list[dict[str, Any]], settings: dict[str, Any], request: dict[str, Any]):
        self.messages, self.settings, self.request = messages, settings, request


Predicate = Callable[[Pause], bool]
BreakpointSpec = Union[str, int, Predicate]


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """Where a run in step mode stops by itself: ``model`` (every model call), ``tool`` (every tool call),
    ``tool:NAME`` (that tool), ``step:N`` or an int (the point that produces step N), or a predicate."""

    spec: str
    predicate: Predicate | None = None

    def fires(self, pause: Pause) -> bool:
        if self.predicate is not None:
            return bool(self.predicate(pause))
        return self.fires_at(pause.kind, pause.sequence, pause.name)

    def fires_at(self, kind: PauseKind, sequence: int, name: str | None) -> bool:
        """For a breakpoint that is not a predicate: whether it fires at this point (no Pause needed)."""
        what, _, arg = self.spec.partition(":")
        if what == "model":
            return kind is PauseKind.MODEL
        if what == "tool":
            return kind is PauseKind.TOOL and (not arg or name == arg)
        if what == "step":
            return sequence == int(arg)
        return kind.value == what  # reply, result


DEFAULT_BREAKPOINTS: tuple[str, ...] = ("model", "tool")


def parse_breakpoints(specs: Iterable[BreakpointSpec] | str | None) -> list[Breakpoint]:
    """Breakpoints from strings (``"model,tool:search,step:5"``), ints (step numbers) and predicates."""
    if specs is None:
        specs = DEFAULT_BREAKPOINTS
    if isinstance(specs, str):
        specs = [s.strip() for s in specs.split(",") if s.strip()]
    out = []
    for spec in specs:
        if callable(spec):
            out.append(Breakpoint(getattr(spec, "__name__", "predicate"), spec))
            continue
        if isinstance(spec, bool) or not isinstance(spec, (str, int)):
            raise DebugError(f"a breakpoint is 'model', 'tool', 'tool:NAME', 'step:N', 'reply', 'result', "
                             f"a step number or a function of the pause; got {type(spec).__name__}")
        if isinstance(spec, int):
            spec = f"step:{spec}"
        kind, sep, arg = spec.partition(":")
        ok = (kind in ("model", "reply", "result") and not sep) or (kind == "tool" and (not sep or arg)) or (
            kind == "step" and arg.isdigit() and int(arg) >= 1)
        if not ok:
            raise DebugError(f"unknown breakpoint {spec!r}: use model, tool, tool:NAME, step:N, reply or result")
        out.append(Breakpoint(spec))
    return out


def request_tokens(request: Mapping[str, Any]) -> list[TokenCount]:
    return message_counts(request.get("messages") or (), request.get("model"))

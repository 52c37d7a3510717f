"""ReplayModel: a stored run (or session, or cassette file) becomes a model, for offline regression tests.

Each recorded model call is matched on its exact request — the messages and the tool schemas, by the
digests the executor stored with the assistant step (``step.extra["request"]``; the replaying model
stands in for the model, so its name and settings are not compared). A call that matches
nothing raises one clear :class:`ReplayMismatchError` naming the first message that differs from the
call the recording expected next, with a short diff; ``strict=False`` replays in recorded order instead.

Recordings are read through the ``Repository`` protocol passed in, or from a cassette file: a JSON
file holding the recorded steps (``export_cassette``), so a test needs no store.
"""

from __future__ import annotations

import difflib
import json
import os
from collections import defaultdict, deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Iterable

from ..core import ModelError, NotFoundError, Step, StepRole, run_tree
from ..core.conversation import current_at, to_messages
from ..storage import current_store
from ..storage.ids import resolve_run_id, resolve_session_id
from .base import Finish, ModelChunk, TextDelta, ToolCallDelta, Usage
from .recording import Recording
from .request import MessageChain, canonical_json, fingerprint_parts, tools_digest

if TYPE_CHECKING:
    from ..storage.base import Repository

CASSETTE_VERSION = 1


class ReplayMismatchError(ModelError):
    """A replayed call whose request the recording does not have."""


def step_response(step: Step) -> dict[str, Any]:
    """What a recorded assistant step answered, as the replay needs it."""
    m = step.metrics
    return {"content": step.content, "tool_calls": [c.to_dict() for c in step.tool_calls],
            "usage": {"prompt_tokens": m.prompt_tokens, "completion_tokens": m.completion_tokens,
                      "total_tokens": m.total_tokens, "cached_tokens": m.cached_tokens}}


async def response_chunks(response: dict[str, Any]) -> AsyncIterator[ModelChunk]:
    """A recorded answer as the chunks a provider would stream (text in one piece)."""
    if response.get("content"):
        yield TextDelta(response["content"])
    calls = response.get("tool_calls") or []
    for i, call in enumerate(calls):
        fn = call.get("function") or {}
        yield ToolCallDelta(i, call.get("id"), fn.get("name"), fn.get("arguments") or "")
    usage = response.get("usage") or {}
    if any(v is not None for v in usage.values()):
        yield Usage(usage.get("prompt_tokens"), usage.get("completion_tokens"), usage.get("total_tokens"),
                    usage.get("cached_tokens"))
    yield Finish("tool_calls" if calls else "stop")


@dataclass(slots=True)
class RecordedCall:
    """One recorded model call: its request fingerprint, where it sits, and what it answered."""

    index: int
    fingerprint: str
    step: Step
    steps: list[Step]  # its session's steps, every attempt: what it saw is rebuilt from them on demand
    system: str | None

    def messages(self) -> list[dict[str, Any]]:
        """The recorded request's messages, rebuilt from the steps the model had seen."""
        head = [{"role": "system", "content": self.system}] if self.system is not None else []
        # a memory_read step is not a message: its text is part of the stored system prompt
        return head + to_messages(current_at(self.steps, self.step))


def recorded_calls(steps: Iterable[Step], run_ids: set[str] | None = None, *,
                   current_only: bool = False) -> list[RecordedCall]:
    """The model calls recorded in a session's steps (every attempt), optionally of some runs only.

    A call's messages are rebuilt on demand (for a mismatch report): per earlier sequence, the latest
    attempt that existed when the call was made — exactly what the model was sent, across retries
    and forks. Matching needs only the stored fingerprints.
    """
    steps = list(steps)
    targets = sorted((s for s in steps if s.role is StepRole.ASSISTANT
                      and (run_ids is None or s.run_id in run_ids) and not (current_only and s.superseded)),
                     key=lambda s: (s.created_at, s.sequence))
    calls: list[RecordedCall] = []
    for step in targets:
        request = step.extra.get("request") or {}
        ref = request.get("messages") if isinstance(request.get("messages"), dict) else None
        if ref is None or not ref.get("sha256"):
            raise NotFoundError(f"step {step.sequence} of session {step.session_id} was recorded without its "
                                "request; record the run again to replay it")
        key = request.get("content") or content_key(ref["sha256"], tools_digest(request.get("tools") or ()))
        calls.append(RecordedCall(len(calls), key, step, steps, ref.get("system")))
    return calls


def _tree_steps(repository: Repository, run_id: str) -> tuple[set[str], list[Step]]:
    """The ids of run ``run_id`` and of the runs nested in it, and the steps of their sessions."""
    runs = run_tree(repository.iter_run_dicts(), run_id)
    steps = [s for sid in dict.fromkeys(r["session_id"] for r in runs)
             for s in repository.get_steps(sid, include_superseded=True)]
    return {r["id"] for r in runs}, steps


def tree_calls(steps: Iterable[Step], run_ids: set[str] | None) -> list[RecordedCall]:
    """``recorded_calls`` over steps of several sessions (a run and its nested runs), in the order made."""
    by_session: dict[str, list[Step]] = defaultdict(list)
    for step in steps:
        by_session[step.session_id].append(step)
    calls = [c for group in by_session.values() for c in recorded_calls(group, run_ids)]
    calls.sort(key=lambda c: (c.step.created_at, c.step.sequence))
    for i, call in enumerate(calls):
        call.index = i
    return calls


def content_key(messages_sha256: str, tools_sha256: str) -> str:
    """The request's ``content`` fingerprint (messages and tools, no settings), as the executor stores it."""
    return fingerprint_parts(messages_sha256, tools_sha256, None)


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def message_diff(expected: list[dict[str, Any]], actual: list[dict[str, Any]]) -> str:
    """Names the first message that differs between two requests, with a one-line diff."""
    for i, (want, got) in enumerate(zip(expected, actual)):
        if canonical_json(want) == canonical_json(got):
            continue
        role = got.get("role")
        for key in ("role", "content", "tool_calls", "tool_call_id", "name"):
            if want.get(key) != got.get(key):
                a, b = _short(want.get(key) or "", 2000), _short(got.get(key) or "", 2000)
                matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
                ops = [op for op in matcher.get_opcodes() if op[0] != "equal"]
                tag, i1, i2, j1, j2 = ops[0]
                start = max(0, i1 - 15)
                return (f"message {i + 1} ({role}) differs in {key}: recorded {_short(a[start:i2 + 25])!r}, "
                        f"got {_short(b[max(0, j1 - 15):j2 + 25])!r}")
        return f"message {i + 1} ({role}) differs"
    if len(expected) != len(actual):
        longer, which = (actual, "got") if len(actual) > len(expected) else (expected, "recorded")
        extra = longer[min(len(expected), len(actual))]
        return (f"message {min(len(expected), len(actual)) + 1} ({extra.get('role')}) is only in the "
                f"{which} request: {_short(extra.get('content') or extra.get('tool_calls') or '')!r}")
    return "the messages are equal; the tool schemas differ"


class ReplayModel:
    """Answers each call with the recorded answer to the same request.

    ``strict=False``: a call that matches nothing gets the next recorded answer in order.
    ``match_settings=True``: the call's model settings must equal the recorded ones too (off by default:
    a recording made with a provider's own defaults, e.g. its temperature, still replays).
    ``recording`` also lets the engine replay recorded results of ``side_effects=True`` tools.
    """

    cost_free = True  # a replayed answer spends nothing
    replays_tree = True  # agents called as tools in a replayed run are answered from the recording too

    def __init__(self, calls: list[RecordedCall], *, strict: bool = True, name: str = "replay",
                 steps: Iterable[Step] = (), match_settings: bool = False):
        if not calls:
            raise NotFoundError("the recording has no model calls to replay")
        self.calls = calls
        self.strict = strict
        self.match_settings = match_settings
        self.name = name
        self.recording = Recording.from_steps(steps)
        self._by_fingerprint: dict[str, deque[RecordedCall]] = defaultdict(deque)
        for call in calls:
            self._by_fingerprint[call.fingerprint].append(call)
        self._used: set[int] = set()
        self._chain = MessageChain()
        self._chained: list[dict[str, Any]] | None = None  # the list the chain follows
        self._tools: tuple[list[dict[str, Any]], str] | None = None
        self.replayed = 0

    def __repr__(self) -> str:
        return f"ReplayModel({len(self.calls)} calls, strict={self.strict})"

    # -- constructors ------------------------------------------------------------
    @classmethod
    def from_run(cls, run_id: str, repository: Repository | None = None, *, strict: bool = True,
                 match_settings: bool = False) -> ReplayModel:
        """The model calls of a stored run (in the current store unless ``repository`` is given)."""
        repository = current_store(repository)
        run_id = resolve_run_id(repository, run_id)  # a unique prefix of 6+ characters works too
        run = repository.get_run(run_id)
        if run is None:
            raise NotFoundError(f"no run {run_id!r} in the store")
        runs, steps = _tree_steps(repository, run_id)
        own = [s for s in steps if s.run_id in runs]
        return cls(tree_calls(steps, runs), strict=strict, name=f"replay:{run.model_name or 'model'}",
                   steps=own, match_settings=match_settings)

    @classmethod
    def from_session(cls, session_id: str, repository: Repository | None = None, *, strict: bool = True,
                     match_settings: bool = False) -> ReplayModel:
        repository = current_store(repository)
        session_id = resolve_session_id(repository, session_id)
        steps = repository.get_steps(session_id, include_superseded=True)
        if not steps:
            raise NotFoundError(f"no session {session_id!r} with steps in the store")
        current = [s for s in steps if not s.superseded]
        runs = {s.run_id for s in current if s.run_id}
        return cls(recorded_calls(steps, runs, current_only=True), strict=strict, steps=current,
                   match_settings=match_settings)

    @classmethod
    def from_cassette(cls, path: str | os.PathLike[str], *, strict: bool = True,
                      match_settings: bool = False) -> ReplayModel:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise NotFoundError(f"no cassette file {os.fspath(path)!r}") from None
        except json.JSONDecodeError as exc:
            raise ModelError(f"cassette {os.fspath(path)!r} is not valid JSON: {exc}") from None
        if not isinstance(data, dict) or data.get("version") != CASSETTE_VERSION:
            raise ModelError(f"cassette {os.fspath(path)!r} is not a version-{CASSETTE_VERSION} agio cassette")
        steps = [Step.from_dict(d) for d in data.get("steps") or ()]
        runs = set(data.get("runs") or ()) or None
        return cls(tree_calls(steps, runs), strict=strict, name=data.get("name") or "replay",
                   steps=[s for s in steps if runs is None or s.run_id in runs], match_settings=match_settings)

    # -- the model protocol --------------------------------------------------------
    def _next_in_order(self) -> RecordedCall | None:
        return next((c for c in self.calls if c.index not in self._used), None)

    def _key(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        """The call's content key; the digest extends by new messages while a run's list grows."""
        if messages is not self._chained:  # a new run: keep the digest if it continues the same conversation
            seen = self._chain.count
            if self._chained is None or len(messages) < seen or messages[:seen] != self._chained[:seen]:
                self._chain = MessageChain()
            self._chained = messages
        if self._tools is None or self._tools[0] is not tools:
            self._tools = (tools, tools_digest(tools))
        return content_key(self._chain.update(messages), self._tools[1])

    def _match(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
               settings: dict[str, Any] | None = None) -> RecordedCall:
        queue = self._by_fingerprint.get(self._key(messages, tools))
        while queue:
            call = queue.popleft()
            if call.index in self._used:
                continue
            recorded = (call.step.extra.get("request") or {}).get("settings") or {}
            if self.match_settings and self.strict and recorded != (settings or {}):
                raise ReplayMismatchError(
                    f"replay: call {len(self._used) + 1} matches the recorded messages and tools but not the "
                    f"settings: recorded {json.dumps(recorded, sort_keys=True)}, got "
                    f"{json.dumps(settings or {}, sort_keys=True)}")
            return call
        expected = self._next_in_order()
        if expected is None:
            raise ReplayMismatchError(f"replay: the recording has no more model calls (all {len(self.calls)} "
                                      "were replayed)")
        if not self.strict:
            return expected
        raise ReplayMismatchError(f"replay: no recorded request matches call {len(self._used) + 1}: "
                                  f"{message_diff(expected.messages(), messages)}")

    async def stream(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                     stream: bool = True, settings: dict[str, Any] | None = None) -> AsyncIterator[ModelChunk]:
        call = self._match(messages, tools, settings)
        self._used.add(call.index)
        self.replayed += 1
        async for chunk in response_chunks(step_response(call.step)):
            yield chunk


def export_cassette(path: str | os.PathLike[str], repository: Repository | None = None, *,
                    run_id: str | None = None, session_id: str | None = None) -> Path:
    """Write the steps of a run (or a session's current runs) to a cassette file; returns its path.

    A cassette is plain JSON: the recorded steps with their request fingerprints, nothing secret (the
    store never holds keys), small enough to commit beside a test.
    """
    if (run_id is None) == (session_id is None):
        raise ValueError("export_cassette needs exactly one of run_id or session_id")
    repository = current_store(repository)
    if run_id is not None:
        run_id = resolve_run_id(repository, run_id)
        run = repository.get_run(run_id)
        if run is None:
            raise NotFoundError(f"no run {run_id!r} in the store")
        session_id = run.session_id
        tree, steps = _tree_steps(repository, run_id)  # the run and the runs nested in it
        runs = [run_id, *sorted(tree - {run_id})]
    else:
        session_id = resolve_session_id(repository, session_id)
        steps = repository.get_steps(session_id, include_superseded=True)  # type: ignore[arg-type]
    if not steps:
        raise NotFoundError(f"no session {session_id!r} with steps in the store")
    if run_id is None:
        runs = sorted({s.run_id for s in steps if s.run_id and not s.superseded})
    target = Path(path)
    data = {"version": CASSETTE_VERSION, "session_id": session_id, "runs": runs,
            "steps": [s.to_dict() for s in steps]}
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    os.replace(tmp, target)
    return target

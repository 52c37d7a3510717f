"""What %agio does, as plain Python: runs in the worker thread, live views, transcripts, sessions.

The magics only parse arguments and call this. Without a kernel (``shell=None``) nothing is
displayed, so everything here is testable from plain pytest.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import sys
import threading
from typing import Any, AsyncIterator, Callable

import pandas as pd

from .. import frames
from ..agent import Agent
from ..core import (AgentRun, ExecutionConfig, InvalidOperationError, NotFoundError, StepEvent, StepEventType,
                    StepRole, new_id)
from ..execution import StepRunner, fork_session
from ..execution.debug import Debugger
from ..execution.pauses import parse_breakpoints
from ..execution.attempts import attempts_of, use_attempt
from ..execution.feedback import feedback_and_proposal
from ..execution.fork import attempt_steps
from ..execution.result import output_of
from ..execution.retry import check_step_of_run, plan_retry
from ..execution.session_claims import active_run_ids
from ..models import OpenAIModel, ScriptedModel, default_model
from ..models.settings import merge_settings
from ..storage import iter_events, open_repository
from ..storage.base import Repository
from ..storage.ids import resolve_filter, resolve_run_id, resolve_session_id
from ..frames import attempts_frame
from .approval import ask as ask_approval
from .live_output import LiveOutput
from .live_view import LiveView
from .stores import own_store as own_store_path
from .pause_view import show_pause
from .pause_view import warm_up as warm_pause_views
from .debug_marks import seen_payload
from .transcript import add_trace, build_bundle, bundle_for_run
from .worker import capture_parent, clicks_reach_a_busy_cell, restore_parent, submit

_E = StepEventType
DEFAULT_AGENT = "default"  # the name of the agent a cell without AGENT uses
_MOVED = " (was the store moved or deleted? %agio config --store PATH points at it)"


class MissingDepsError(InvalidOperationError):
    """A run of an agent that needs deps, given none: a retry of a run this kernel did not start (after a
    restart, a Run All re-runs the Retry cells of the kernel before) says so in a line and runs nothing."""


def _check_deps(agent: Agent, deps: Any, how: str) -> None:
    """The wrong deps (or none, where the agent needs some) are one line before anything runs, saying how to
    give them; a class defined again since the agent was made is said as such."""
    try:
        agent.check_deps(deps)
    except (TypeError, ValueError) as exc:
        wanted = getattr(agent, "deps_type", None)
        if deps is not None and isinstance(wanted, type) and type(deps).__qualname__ == wanted.__qualname__:
            raise InvalidOperationError(f"{exc}: the class {wanted.__qualname__} was defined again since the agent "
                                        "was made; run the agent's cell again") from None
        if deps is None:
            raise MissingDepsError(f"{exc} (in a notebook: {how})") from None
        raise InvalidOperationError(str(exc)) from None


class RunHandle:
    """The value of a ``%%agio`` cell: the run's id, its text, its frames, and what you can do next."""

    def __init__(self, controller: Controller, session_id: str | None, agent: Agent | None = None, deps: Any = None):
        self._controller = controller
        self.session_id = session_id
        self.agent = agent  # the agent that ran it: a retry uses it again unless told otherwise
        self.deps = deps  # its dependencies, kept in this kernel (never stored): a retry here uses them again
        self.run_id: str | None = None
        self.events_list: list[StepEvent] = []
        self._future: concurrent.futures.Future[Any] | None = None
        self._finished = threading.Event()
        self.approval_pending = threading.Event()
        self.error: BaseException | None = None
        self.live: LiveView | None = None
        self.stopped = False  # cancel() was called (the Stop button, or Python)
        self.foreground = False  # the cell that started it waits for it (not --background)
        self.debugger: Debugger | None = None  # step mode: its current pause is ``debugger.current``
        self.pause_view: Any = None  # step mode: the pause view shown now (notebook.pause_view)
        self.pause_note: Any = None  # step mode: the line a bad edit or a late click leaves
        self._started = threading.Event()  # run_id is known (or the run ended before starting)
        self._repr_ids: list[str] = []  # where this handle's repr is shown while the run goes on
        self.display_id: str | None = None  # where its live view, then its transcript, is shown
        # the cell that started the run shows its live view and transcript: no Out[n] repr beside them
        self._cell = getattr(controller.shell, "execution_count", None) if controller.shell is not None else None

    @property
    def live_flushes(self) -> int:
        """How many times the live view was redrawn (coalesced: at most ~20 a second)."""
        return self.live.flushes if self.live is not None else 0

    # -- outcome ----------------------------------------------------------------
    @property
    def run(self) -> AgentRun | None:
        return self._controller.repository.get_run(self.run_id) if self.run_id else None

    @property
    def status(self) -> str:
        run = self.run
        return run.status.value if run is not None else "pending"

    @property
    def final_text(self) -> str | None:
        run = self.run
        return run.final_text if run is not None else None

    @property
    def output(self) -> Any:
        """A typed agent's answer as its ``output_type`` (see ``RunResult.output``); else the final text."""
        run = self.run
        return output_of(run, None, self.agent) if run is not None else None

    @property
    def done(self) -> bool:
        return self._finished.is_set()

    def wait(self, timeout: float | None = None) -> RunHandle:
        """Block until a background run ends (or ``timeout`` seconds pass)."""
        self._finished.wait(timeout)
        return self

    def cancel(self) -> None:
        self.stopped = True
        if self._future is not None:
            self._future.cancel()

    # -- data -------------------------------------------------------------------
    @property
    def steps(self) -> pd.DataFrame:
        return frames.steps(run_id=self.run_id, repository=self._controller.repository)

    @property
    def events(self) -> pd.DataFrame:
        evs = list(iter_events(self._controller.repository, self.run_id)) if self.run_id else []
        return pd.DataFrame({
            "seq": pd.Series([e.seq for e in evs], dtype="Int64"),
            "type": pd.Series(pd.Categorical([e.type.value for e in evs],
                                             categories=[t.value for t in StepEventType])),
            "ts": pd.to_datetime(pd.Series([e.ts for e in evs], dtype="float64"), unit="s", utc=True),
            "payload": [e.payload for e in evs],
        })

    # -- next steps ---------------------------------------------------------------
    def retry(self, from_seq: int | None = None, *, agent: Agent | None = None,
              background: bool = False, deps: Any = None) -> RunHandle:
        """This run again from ``from_seq``; ``deps``: the retry's dependencies (never stored, so never
        taken from the run retried)."""
        return self._controller.retry(self._require_id(), from_seq, agent=agent or self.agent,
                                      background=background, deps=deps)

    def fork(self, at: int) -> str:
        """A new session with steps 1..at as this attempt wrote them (even if a retry replaced it since)."""
        return self._controller.fork(self.session_id, at, attempt=self._require_id())

    @property
    def attempts(self) -> pd.DataFrame:
        """This run and its retries: one row per attempt, ``current`` marks the one in use."""
        return self._controller.attempts(self._require_id())

    def use_attempt(self, number: int) -> AgentRun:
        """Make attempt ``number`` of this run current again (its steps are what the model sees next)."""
        return self._controller.use_attempt(self._require_id(), number)

    def feedback(self, rating: Any, comment: str = "", *, step: int | str | None = None,
                 propose: bool = True, correction: str | None = None) -> Any:
        """+1 or -1 (and a comment) on this run or one of its steps, or -1 with the right answer as
        ``correction``; returns the proposed experience (review it with
        ``agio_notebook.memory.accept/reject``), or the feedback with ``propose=False``."""
        item, proposal = self._controller.feedback(self._require_id(), rating, comment, step=step, propose=propose,
                                                   correction=correction)
        return proposal if proposal is not None else item

    def trace(self) -> Any:
        """This run's trace graph (shows as a drawing; ``.nodes`` and ``.edges`` are DataFrames)."""
        from ..memory.trace import trace

        return trace(self._require_id(), repository=self._controller.repository)

    def _require_id(self) -> str:
        if self.run_id is None:
            raise InvalidOperationError("this run has not started yet")
        return self.run_id

    def __repr__(self) -> str:
        text = (self.final_text or "").replace("\n", " ")
        text = text if len(text) <= 80 else text[:79] + "…"
        return f"<agio run {(self.run_id or '?')[:8]} {self.status}: {text!r}>"

    @property
    def _ipython_display_(self) -> Callable[[], None] | None:
        """In the cell that started the run: nothing (the transcript says it all; ``_`` and ``_agio``
        still hold the handle). Elsewhere, while the run goes on, the repr under a display id that is
        updated when it ends; a finished run elsewhere is a plain ``Out[n]`` value (no method here then).
        """
        shell = self._controller.shell
        if self._cell is not None and getattr(shell, "execution_count", None) == self._cell:
            return _show_nothing
        return None if self.done else self._display_live_repr

    def _display_live_repr(self) -> None:
        from IPython.display import display

        display_id = new_id()
        self._repr_ids.append(display_id)
        display({"text/plain": repr(self)}, raw=True, display_id=display_id)
        if self.done:  # ended meanwhile: the update in _refresh_reprs may have been missed
            self._refresh_reprs()

    def _refresh_reprs(self) -> None:
        from IPython.display import update_display

        text = repr(self)
        for display_id in self._repr_ids:
            update_display({"text/plain": text}, raw=True, display_id=display_id)


def _show_nothing() -> None:
    """Displays nothing: the value's cell already shows its run."""


class Controller:
    """agio's state in one kernel: the store, the current session, the default agent."""

    def __init__(self, shell: Any = None, *, store: str | None = None):
        self.shell = shell
        self.store = store
        # the default store this kernel started with: own stores sit beside it (notebook/stores.py)
        self.base_store = store if store is not None else os.environ.get("AGIO_STORE") or ".agio"
        self.model: str | None = None
        self.base_url: str | None = None
        self.session_id: str | None = None
        self.handles: dict[str, RunHandle] = {}
        self._default_agent: Agent | None = None
        self.defer_waits = False  # a cell that awaits its run is starting it: _start must not block

    # -- configuration -------------------------------------------------------------
    @property
    def repository(self) -> Repository:
        return open_repository(self.store)

    def configure(self, *, model: str | None = None, base_url: str | None = None, store: str | None = None,
                  own_store: str | None = None) -> str:
        """``store`` (a path or URL) or ``own_store`` (a name: ``<default store>.NAME``, "" for the default
        store again) becomes the kernel's store, for the magics and the Python API alike (``AGIO_STORE``)."""
        if store is not None and own_store is not None:
            raise InvalidOperationError("give --store or --own-store, not both")
        if own_store is not None:
            store = str(own_store_path(self.base_store, own_store).absolute()) if own_store else self.base_store
        if store is not None:
            self.store = store or None
            self.session_id = None
            if store:
                os.environ["AGIO_STORE"] = store  # frames, memory and runners with no repository use it too
            else:
                os.environ.pop("AGIO_STORE", None)
        if model is not None:
            self.model = model
        if base_url is not None:
            self.base_url = base_url
        if model is not None or base_url is not None:
            self._default_agent = None
        return self.describe()

    def describe(self) -> str:
        """Current settings, never the key (only whether one is set)."""
        agent = self.default_agent()
        key = "set" if os.environ.get("OPENAI_API_KEY") else "not set"
        return (f"model: {agent.model_name}" + (f" at {self.base_url}" if self.base_url else "")
                + f" · store: {_shown_path(self.repository.root)} · session: {(self.session_id or '')[:8] or '(new on next run)'}"
                + f" · OPENAI_API_KEY {key}")

    def default_agent(self) -> Agent:
        if self._default_agent is None:
            model = (OpenAIModel(self.model, base_url=self.base_url) if (self.model or self.base_url)
                     else default_model())
            self._default_agent = Agent(model=model, name=DEFAULT_AGENT)
        return self._default_agent

    def agent_with_model(self, agent: Agent, model: str | None) -> Agent:
        if model is None:
            return agent
        return agent.with_model(OpenAIModel(model, base_url=self.base_url))

    # -- sessions ----------------------------------------------------------------------
    def use(self, session_id: str) -> str:
        session_id = resolve_session_id(self.repository, session_id)  # ids shown cut to 8 characters work
        self.session_id = session_id
        return session_id

    def fork(self, session_id: str | None, at: int, *, attempt: str | None = None) -> str:
        """A new session with steps 1..at of ``session_id``; with ``attempt`` (a run id), of the
        conversation as that attempt wrote it, even when a retry has replaced it since."""
        source = session_id or self.session_id
        if source is not None:
            source = resolve_session_id(self.repository, source)
        if attempt is not None:
            attempt = resolve_run_id(self.repository, attempt)
            run = self.repository.get_run(attempt)
            if run is None:
                raise NotFoundError(f"no run {attempt!r} in the store at {self.repository.root}{_MOVED}")
            if source is not None and run.session_id != source:
                raise InvalidOperationError(f"run {attempt[:8]} is in session {run.session_id[:8]}, not {source[:8]}")
            source = run.session_id
        if source is None:
            raise InvalidOperationError("no current session to fork; pass a session id")
        if self.repository.get_session(source) is None:
            raise NotFoundError(f"no session {source!r} in the store at {self.repository.root}{_MOVED}")
        new = fork_session(source, at, self.repository, attempt=attempt)
        self.session_id = new
        return new

    # -- runs ------------------------------------------------------------------------------
    def run_query(self, query: str, *, agent: Agent | None = None, session: str | None = None,
                  new_session: bool = False, max_steps: int | None = None, background: bool = False,
                  settings: dict[str, Any] | None = None, wait: float | None = None,
                  step: bool = False, breakpoints: Any = None, deps: Any = None) -> RunHandle:
        """``step``: step mode, pausing at ``breakpoints`` (default: every model and tool call) in a view
        in the cell (see docs/debugger.md). ``deps``: the run's dependencies (never stored)."""
        if not query.strip():
            raise InvalidOperationError("the cell is empty: write the query in the cell body")
        if step:
            parse_breakpoints(breakpoints)  # a bad breakpoint is one line before anything runs
        agent = agent or self.default_agent()
        check_can_answer(agent, "this cell")
        _check_deps(agent, deps, "%%agio AGENT --deps NAME")
        if new_session:
            session_id = new_id()
        elif session is not None:  # an existing session's prefix continues it; any other id starts one
            session_id = resolve_filter(resolve_session_id, self.repository, session)
        else:
            session_id = self.session_id or new_id()
        self.session_id = session_id
        def stream(approver: Any, debugger: Debugger | None = None) -> AsyncIterator[StepEvent]:
            runner = self._runner(agent, max_steps, approver, settings, wait)
            if debugger is not None:
                return runner.debug_stream(session_id, query, debugger, deps=deps)
            return runner.run_stream(session_id, query, deps=deps)

        return self._start(stream, session_id, background, agent, breakpoints if step else None, step, deps=deps)

    def retry(self, run_id: str, from_seq: int | None = None, *, agent: Agent | None = None,
              background: bool = False, reuse: bool = False, deps: Any = None) -> RunHandle:
        run_id = resolve_run_id(self.repository, run_id)
        run = self.repository.get_run(run_id)
        if run is None:
            raise NotFoundError(f"no run {run_id!r} in the store at {self.repository.root}{_MOVED}")
        agent = agent or self.agent_for(run)
        check_can_answer(agent, "a retry")  # before anything changes: a spent script is one line, not a failed run
        if deps is None and run_id in self.handles:  # a run of this kernel: its deps again (Retry from step)
            deps = self.handles[run_id].deps
        _check_deps(agent, deps, "%agio retry RUN --deps NAME")
        restore: Callable[[RunHandle], None] | None = None
        if run.superseded_by is not None and run.start_sequence is not None:
            # a retry of a replaced attempt starts from that attempt's steps, as its transcript shows them;
            # the step is checked against them before anything changes
            steps = attempt_steps(self.repository, run_id)
            own = {s.sequence: s for s in steps}
            if from_seq is not None:
                check_step_of_run(self.repository, run, from_seq, steps, "retry")
            if from_seq is not None and (from_seq not in own or own[from_seq].role is StepRole.TOOL):
                raise InvalidOperationError(f"attempt {run_id[:8]} has no step {from_seq} to retry from "
                                            f"(its steps: {', '.join(map(str, sorted(own)))}; not a tool result)")
            family = attempts_of(self.repository, run_id)
            number = next(a.number for a in family if a.run_id == run_id)
            was = next((a.number for a in family if a.current), None)
            self.use_attempt(run_id, number)
            print(f"agio: attempt {number} of run {run_id[:8]} is current again, so the retry starts from its steps")
            run = self.repository.get_run(run_id) or run
            if was is not None:  # a retry that writes no step leaves the conversation as it was before the click
                restore = functools.partial(self._undo_switch, run_id, was)
        try:
            plan_retry(self.repository, run_id, from_seq, active_run_ids())  # clear errors here, not in the thread
        except Exception:
            if restore is not None:
                restore(None)
            raise
        self.session_id = run.session_id
        return self._start(lambda approver: self._runner(agent, None, approver).retry_stream(run_id, from_seq,
                                                                                               reuse=reuse, deps=deps),
                           run.session_id, background, agent, on_end=restore, deps=deps)

    def _undo_switch(self, run_id: str, number: int, handle: RunHandle | None) -> None:
        """The retry wrote no step (or never started), so it replaced nothing: the attempt that was current
        before the click is current again."""
        retried = self.repository.get_run(handle.run_id) if handle is not None and handle.run_id else None
        if retried is None or not retried.metrics.steps:
            run = use_attempt(self.repository, run_id, number)
            self.session_id = run.session_id
            print(f"agio: the retry wrote no step, so attempt {number} of this run is current again")

    def attempts(self, run_id: str) -> pd.DataFrame:
        return attempts_frame(attempts_of(self.repository, resolve_run_id(self.repository, run_id)))

    def use_attempt(self, run_id: str, number: int) -> AgentRun:
        run = use_attempt(self.repository, resolve_run_id(self.repository, run_id), number)
        self.session_id = run.session_id  # the next %%agio cell continues from this attempt
        self.refresh_family(run_id)
        return run

    def agent_for(self, run: AgentRun) -> Agent:
        """The agent that made ``run``: this kernel's handle of it, else the notebook's Agent of the same
        name, else (only for a run of the default agent) the default agent. Never another model silently:
        a missing agent is one line saying which cell to run."""
        known = self.handles.get(run.id)
        if known is not None and known.agent is not None:
            return known.agent
        named = self._agent_named(run.agent_name)
        if named is not None:
            return named
        if run.agent_name in (None, DEFAULT_AGENT):
            return self.default_agent()
        raise NotFoundError(
            f"run {run.id[:8]} was made by the agent named {run.agent_name!r}, which this kernel does not have; "
            f"run the cell that defines Agent(name={run.agent_name!r}, ...) first, then this cell again "
            "(or pass --agent VARIABLE)")

    def notebook_variable(self, name: str, option: str) -> Any:
        """The value of the notebook variable ``name`` (what ``option`` names), or one line saying there is none."""
        namespace = getattr(self.shell, "user_ns", None) or {}
        if name not in namespace:
            raise NotFoundError(f"{option} {name}: no variable {name!r} in the notebook")
        return namespace[name]

    def agent_variable(self, name: str) -> Agent:
        """The Agent held by the notebook variable ``name``; a wrong name lists the agents there are."""
        namespace = getattr(self.shell, "user_ns", None) or {}
        value = namespace.get(name)
        if isinstance(value, Agent):
            return value
        if value is not None:
            raise InvalidOperationError(f"{name!r} is a {type(value).__name__}, not an agio Agent")
        agents = [(var, v) for var, v in namespace.items() if isinstance(v, Agent) and not var.startswith("_")]
        listed = ", ".join(f"{var} (Agent name {v.name!r})" for var, v in agents) or "none yet"
        same = next((var for var, v in agents if v.name == name), None)
        hint = f"; did you mean {same}? (its Agent.name is {name!r})" if same else ""
        raise NotFoundError(f"no agent named {name!r} in the notebook: give the variable's name, not Agent.name. "
                            f"Agents in this kernel, by variable: {listed}{hint}")

    def _agent_named(self, name: str | None) -> Agent | None:
        """The notebook's agent that ran a stored run (by its name), e.g. after a kernel restart."""
        namespace = getattr(self.shell, "user_ns", None) or {}
        return next((v for v in namespace.values() if isinstance(v, Agent) and name and v.name == name), None)

    def feedback(self, run_id: str, rating: Any, comment: str = "", *, step: int | str | None = None,
                 propose: bool = True, correction: str | None = None) -> tuple[Any, Any]:
        """Store feedback; with ``propose``, the agent's extractor proposes an experience from it."""
        run_id = resolve_run_id(self.repository, run_id)
        return feedback_and_proposal(self.repository, run_id, rating, comment, step=step, propose=propose,
                                     agent=self._agent_of(run_id), correction=correction)

    def _agent_of(self, run_id: str) -> Agent:
        known = self.handles.get(run_id)
        return known.agent if known is not None and known.agent is not None else self.default_agent()

    def replay(self, run_id: str) -> dict[str, Any]:
        run_id = resolve_run_id(self.repository, run_id)
        if self.repository.get_run(run_id) is None:
            raise NotFoundError(f"no run {run_id!r} in the store at {self.repository.root}{_MOVED}")
        return bundle_for_run(self.repository, run_id)

    def _runner(self, agent: Agent, max_steps: int | None, approver: Any = None,
                settings: dict[str, Any] | None = None, wait: float | None = None) -> StepRunner:
        config = agent.config or ExecutionConfig()
        if max_steps is not None:
            config = ExecutionConfig(**{**config.to_dict(), "max_steps": max_steps})
        if wait is not None:  # %%agio --wait: wait for another kernel's run in the session
            config = ExecutionConfig(**{**config.to_dict(), "session_wait": wait})
        if settings:  # the cell's settings, over the agent's and its config's
            config = ExecutionConfig(**{**config.to_dict(),
                                        "model_settings": merge_settings(config.model_settings, settings)})
        return StepRunner(agent, config=config, repository=self.repository, approver=approver)

    # -- the live part -----------------------------------------------------------------------
    def _start(self, make_stream: Callable[..., AsyncIterator[StepEvent]], session_id: str,
               background: bool, agent: Agent, breakpoints: Any = None, step: bool = False,
               on_end: Callable[[RunHandle], None] | None = None, deps: Any = None) -> RunHandle:
        """Run the stream on the worker loop, shown live then as a transcript; ``on_end(handle)`` runs once
        the run has ended, before its transcript is drawn."""
        handle = RunHandle(self, session_id, agent, deps)
        live = LiveView(on_stop=handle.cancel, stop_hint=None if background or clicks_reach_a_busy_cell() else
                        "this kernel hears Stop only after the cell ends: interrupt the kernel (■) to stop now")
        shell = self.shell
        output = LiveOutput(live.widget) if shell is not None else None
        handle.display_id = output.display_id if output is not None else new_id()
        parent = capture_parent(shell) if shell is not None else None
        if output is not None:
            output.show(build_bundle([], trace=False))
        handle.live = live
        if shell is not None:
            shell.user_ns["_agio"] = handle  # the latest run's handle, whatever the cell displays
        approver = functools.partial(ask_approval, handle, live) if shell is not None else None
        if step:  # step mode: each pause shows as a view in the cell (or, without a kernel, waits for Python)
            handle.debugger = Debugger(functools.partial(show_pause, handle, live), breakpoints)
            if shell is not None:
                warm_pause_views()

        async def drive() -> None:
            restore_parent(shell, parent)
            loop = asyncio.get_running_loop()
            ticker = loop.create_task(_tick(live, _snapshots(output, handle.events_list)))
            cancelled = False
            try:
                async for event in (make_stream(approver, handle.debugger) if step else make_stream(approver)):
                    if handle.run_id is None:
                        handle.run_id = event.run_id
                        self.handles[event.run_id] = handle
                        handle._started.set()
                    if event.type is not _E.STEP_DELTA:
                        handle.events_list.append(event)
                    live.feed(event)
            except asyncio.CancelledError:
                cancelled = True
            except Exception as exc:  # noqa: BLE001 - reported in the cell, never lost
                handle.error = exc
            finally:
                ticker.cancel()
                live.flush()
                if on_end is not None:
                    restore_parent(shell, parent)
                    try:
                        on_end(handle)
                    except Exception as exc:  # noqa: BLE001 - said in the cell; the transcript is still drawn
                        print(f"agio: {exc}", file=sys.stderr)
                self._finish_display(handle, live, output, parent)
                handle._finished.set()
                handle._started.set()
                if shell is not None:
                    handle._refresh_reprs()
            if cancelled:
                raise asyncio.CancelledError

        handle._future = submit(drive())
        handle.foreground = not background
        if background or self.defer_waits:
            handle._started.wait(10)  # so the cell's value shows the run's id, not "?"
            return handle
        return self._wait(handle)

    def _wait(self, handle: RunHandle) -> RunHandle:
        try:
            while not handle._finished.wait(0.05):
                if handle.approval_pending.is_set():
                    print("agio: the run waits for your approval below; the cell is released so you can "
                          "click (the run goes on in this output)")
                    return handle
        except KeyboardInterrupt:
            return self._interrupted(handle)
        return self._waited(handle)

    async def wait_async(self, handle: RunHandle) -> RunHandle:
        """Like ``_wait``, for a cell that awaits: the kernel's loop keeps handling clicks meanwhile.

        A kernel interrupt reaches an awaiting cell as a cancellation (ipykernel turns SIGINT into
        ``CancelledError``), which cancels the run the same way.
        """
        try:
            while not handle._finished.is_set():
                if handle.approval_pending.is_set():
                    return self._wait(handle)  # releases the cell (ipykernel 6 queues clicks otherwise)
                await asyncio.sleep(0.02)
        except (asyncio.CancelledError, KeyboardInterrupt):
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            return self._interrupted(handle)
        return self._waited(handle)

    def _interrupted(self, handle: RunHandle) -> RunHandle:
        paused = handle.debugger.current if handle.debugger is not None else None
        if paused is not None:
            print(f"agio: interrupted while paused {paused.describe()}")  # a status, like the note below
        handle.cancel()
        handle._finished.wait(30)
        kept = len(self.repository.get_steps(handle.session_id)) if handle.session_id else 0
        # a status, not an error: stdout (no red background)
        print(f"agio: run {(handle.run_id or '?')[:8]} cancelled by the interrupt; "
              f"its completed steps are kept ({kept} in the session)")
        return handle

    def _waited(self, handle: RunHandle) -> RunHandle:
        spent = spent_script(handle.agent) if handle.agent is not None and handle.status == "failed" else None
        if spent is not None:  # the script ran out in the middle of the run: say what to do
            print(f"agio: {spent}", file=sys.stderr)
        if handle.error is not None:
            print(f"agio: {handle.error}", file=sys.stderr)
        elif handle.stopped and handle.status == "cancelled":
            print(f"agio: run {(handle.run_id or '?')[:8]} stopped; its completed steps and the partial answer "
                  "are kept")
        return handle

    def _finish_display(self, handle: RunHandle, live: LiveView, output: LiveOutput | None, parent: Any) -> None:
        """The live widget gives way to the transcript bundle: no widget stays in a finished cell."""
        if self.shell is None or output is None:
            return
        restore_parent(self.shell, parent)
        if handle.run_id is None:  # it failed before it started: say so where the live view was
            note = f"agio: the run did not start: {handle.error}" if handle.error else "agio: the run did not start"
            output.finish({"text/plain": note})
            live.close()
            return
        repo = self.repository
        run = repo.get_run(handle.run_id)
        session = repo.get_session(handle.session_id) if handle.session_id else None
        attempts = attempts_of(repo, handle.run_id) if run is not None else None
        seen = seen_payload(repo, handle.run_id) if run is not None else None
        bundle = build_bundle(handle.events_list, run, session, attempts, seen, trace=False)
        if run is not None and run.retry_of:  # the attempts it replaced say so (before its own, which ends the cell)
            self.refresh_family(handle.run_id, skip=handle.run_id)
        output.finish(bundle)  # the transcript at once, then its trace graph
        live.close()
        if add_trace(bundle):
            output.redraw(bundle)

    def refresh_family(self, run_id: str, skip: str | None = None) -> None:
        """Redraw the transcripts of ``run_id``'s attempts that this kernel shows, so each says whether it
        is superseded now (after a retry, or a change of the current attempt)."""
        if self.shell is None:
            return
        from IPython.display import update_display

        for attempt in attempts_of(self.repository, run_id):
            shown = self.handles.get(attempt.run_id)
            if attempt.run_id != skip and shown is not None and shown.display_id and shown.done:
                update_display(bundle_for_run(self.repository, attempt.run_id), display_id=shown.display_id,
                               raw=True)


def spent_script(agent: Agent) -> str | None:
    """What to do when ``agent`` answers from a ScriptedModel that has played every reply (None otherwise)."""
    model = agent.model
    if not isinstance(model, ScriptedModel) or model.loop or len(model.calls) < len(model.replies):
        return None
    return (f"agent {agent.name!r} answers from a ScriptedModel that has played all {len(model.replies)} of its "
            "replies. Give it a new script (agent.model = ScriptedModel([...])), loop=True to play it again, or a "
            "FunctionModel that answers from the conversation; then run this again")


def check_can_answer(agent: Agent, what: str) -> None:
    """One line, before anything runs or changes, when ``agent`` has no reply left for ``what``."""
    spent = spent_script(agent)
    if spent is not None:
        raise InvalidOperationError(f"{what} needs the model to answer, but {spent}")


async def _tick(live: LiveView, snapshot: Callable[[], None]) -> None:
    """Flush coalesced updates when a stream pauses (no event arrives to trigger the flush), and keep
    the snapshot a save would keep up to date."""
    while True:
        await asyncio.sleep(live.min_interval)
        live.flush_if_due()
        snapshot()


def _snapshots(output: LiveOutput | None, events: list[StepEvent]) -> Callable[[], None]:
    """Write the run's transcript so far (its completed steps) as ``output``'s snapshot, when it changed."""
    written = [0]

    def make() -> dict[str, Any] | None:
        n = len(events)
        if n == written[0]:
            return None
        written[0] = n
        return build_bundle(events[:n], trace=False)

    def snapshot() -> None:
        if output is not None:
            output.snapshot(make)

    return snapshot


def _shown_path(root: Any) -> str:
    """A store's place as a person reads it: relative to the notebook's folder when it lies inside it."""
    text = str(root)
    if "://" in text:
        return text
    try:
        relative = os.path.relpath(text)
    except ValueError:  # another drive
        return text
    return text if relative.startswith("..") else relative


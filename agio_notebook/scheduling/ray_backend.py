"""The Ray backend: the same executor, with each run executing as a Ray task.

Ray has no task priorities, so the queue, the priorities, the caps and the rate limits stay in the
driver's :class:`Executor`; Ray only executes. A worker runs the agent against an in-memory store and
streams the run's events back (a Ray generator); the driver writes them to the TinyDB store as they
arrive, so workers never touch the store files and what the driver announces is already on disk.
An agent that calls agents as tools runs its nested runs on the same worker: their events come back
inside the run's own (``nested`` events), with each nested session's record before its first event, and
the driver stores each nested run, its steps and events in its own session, linked to its parent, exactly
as a local run would.
A worker that dies mid-run leaves a run the driver marks failed (its nested runs that had not ended are
marked ``interrupted``, and resume like any interrupted run), and the item is retried per its policy (the
task itself is never retried by Ray: a replayed generator would repeat events).

Needs the ``ray`` extra: ``pip install agio-notebook[ray]``.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any, Iterator

from ..agent import Agent
from ..core import (AgentRun, AgentSession, ExecutionConfig, RunStatus, Step, StepEvent, StepEventType, now)
from ..storage import Repository
from .errors import SchedulingError

_E = StepEventType
_init_lock = threading.Lock()


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise SchedulingError("backend='ray' needs Ray: pip install 'agio-notebook[ray]'") from None
    return ray


def ensure_ray(address: str | None = None) -> Any:
    """Connect to ``address`` (an existing cluster) or start a local Ray, once per process."""
    ray = _ray()
    with _init_lock:
        if not ray.is_initialized():
            _start(ray, address)
        elif address and address != "auto" and not address.startswith("ray://"):
            current = ray.get_runtime_context().gcs_address
            if current != address:
                raise SchedulingError(f"this process is already connected to Ray at {current}; one process "
                                      f"joins one cluster, so address={address!r} cannot be used here")
    return ray


_START_ATTEMPTS = 3


def _start(ray: Any, address: str | None) -> None:
    """``ray.init``, again if a local start timed out.

    Ray gives a starting raylet a fixed 30 s to register; on a busy machine it can take longer, and a
    second start (files now in the page cache) usually does not. A start that timed out leaves its
    processes running (Ray raises before it records them, so ``ray.shutdown`` cannot stop them):
    they are stopped before the next attempt. Other failures are not retried.
    """
    for attempt in range(1, _START_ATTEMPTS + 1):
        before = _children()
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True,
                     configure_logging=False, **({} if address else {"num_cpus": max(os.cpu_count() or 1, 2)}))
            return
        except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception for this timeout
            if "timed out during startup" not in str(exc):
                raise
            ray.shutdown()
            _stop(_children() - before)
            if attempt == _START_ATTEMPTS:
                raise SchedulingError(f"Ray did not start in {_START_ATTEMPTS} attempts (its raylet did not "
                                      "register within Ray's 30 s); the machine may be overloaded") from None


def _children() -> set[Any]:
    """This process's descendants that belong to Ray (its GCS, raylet, workers), as they are now."""
    import psutil

    found = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if "ray" in " ".join(p.cmdline()).lower():
                found.add(p)
        except psutil.Error:
            continue
    return found


def _stop(processes: set[Any]) -> None:
    import psutil

    for p in processes:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(processes, timeout=5)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass


def check_picklable(agent: Agent) -> None:
    """An agent that cannot cross to a Ray worker gets one clear line, before anything runs."""
    ray = _ray()
    try:
        ray.cloudpickle.dumps(agent)
    except Exception as exc:  # noqa: BLE001 - any pickling failure is the same user error
        raise SchedulingError(f"agent {agent.name!r} cannot be pickled for Ray ({type(exc).__name__}: "
                              f"{str(exc).splitlines()[0] if str(exc) else ''}); define its model and tools "
                              "at module level or use backend='local'") from None


class WorkerLost(Exception):
    """The Ray worker running an execution died; another attempt may succeed."""

    retryable = True


def run_on_worker(agent: Agent, config: ExecutionConfig, session_id: str, query: str) -> Iterator[dict[str, Any]]:
    """In the Ray worker: run against an in-memory store, yield each stored event as a dict."""
    from ..execution import AgentHook, StepRunner
    from ..storage import InMemoryRepository

    class Catch(AgentHook):
        error: BaseException | None = None

        async def on_error(self, run: Any, error: BaseException) -> None:
            Catch.error = error

    yield {"_agio_worker": {"pid": os.getpid()}}
    loop = asyncio.new_event_loop()
    repository = InMemoryRepository()
    runner = StepRunner(agent, hooks=[Catch()], config=config, repository=repository)
    stream = runner.run_stream(session_id, query).__aiter__()
    try:
        while True:
            try:
                event = loop.run_until_complete(stream.__anext__())
            except StopAsyncIteration:
                break
            own = event.payload["event"] if event.type is _E.NESTED else event.to_dict()
            if own["type"] == _E.STEP_DELTA.value:
                continue  # the driver stores completed steps; deltas are for a live view
            if own["type"] == _E.RUN_STARTED.value:  # the session's record (its title, links, owner) first
                session = repository.get_session(own["session_id"])
                if session is not None:
                    yield {"_agio_session": session.to_dict()}
            yield event.to_dict()
        if Catch.error is not None:
            from .limits import is_retryable

            yield {"_agio_error": {"retryable": is_retryable(Catch.error), "message": str(Catch.error)}}
    finally:
        loop.run_until_complete(stream.aclose())
        loop.run_until_complete(loop.shutdown_asyncgens())  # what asyncio.run does: per-loop clients close
        loop.close()


class RayBackend:
    """Executes runs on Ray; the driver (this process) persists what the workers stream back."""

    def __init__(self, address: str | None = None):
        self.address = address
        self._remote: Any = None
        self.worker_pids: dict[str, int] = {}  # execution id -> pid of the worker running it

    def remote(self) -> Any:
        if self._remote is None:
            ray = ensure_ray(self.address)
            self._remote = ray.remote(max_retries=0, num_cpus=0.5)(run_on_worker)
        return self._remote

    async def run(self, executor: Any, agent: Agent, config: ExecutionConfig, rec: Any, catcher: Any) -> AgentRun:
        ray = _ray()
        repo: Repository = executor.repository
        # the driver holds the session while it writes the worker's run, as a local run would
        claim = getattr(repo, "claim_session", None)
        if claim is not None:
            claim(rec.session_id, "a run on Ray")
        try:
            return await self._stream(ray, repo, rec, catcher, agent, config)
        finally:
            if claim is not None:
                repo.release_session(rec.session_id)

    async def _stream(self, ray: Any, repo: Repository, rec: Any, catcher: Any, agent: Agent,
                      config: ExecutionConfig) -> AgentRun:
        gen = self.remote().remote(agent, config, rec.session_id, rec.request.get("query", ""))
        run: AgentRun | None = None
        writer = _Writer(repo, rec.session_id)
        try:
            async for ref in gen:
                item = await ref
                if "_agio_worker" in item:
                    self.worker_pids[rec.id] = item["_agio_worker"]["pid"]
                    continue
                if "_agio_error" in item:
                    err = item["_agio_error"]
                    catcher.error = _RemoteError(err["message"], err["retryable"])
                    continue
                if "_agio_session" in item:
                    writer.sessions[item["_agio_session"]["session_id"]] = AgentSession.from_dict(item["_agio_session"])
                    continue
                event = StepEvent.from_dict(item)
                if event.type is _E.NESTED:
                    writer.persist(StepEvent.from_dict(event.payload["event"]))
                    continue
                run = writer.persist(event) or run
                if event.type is _E.RUN_STARTED:
                    catcher.started(event.run_id)
        except asyncio.CancelledError:
            ray.cancel(gen, force=True)
            if run is not None and not run.status.is_terminal:
                _close(repo, run, RunStatus.CANCELLED, "cancelled")
            writer.close_nested(RunStatus.CANCELLED, "cancelled")
            raise
        except (ray.exceptions.RayError, OSError) as exc:
            if run is not None and not run.status.is_terminal:
                _close(repo, run, RunStatus.FAILED, f"the Ray worker running it was lost: {type(exc).__name__}")
            writer.close_nested(RunStatus.INTERRUPTED, "the Ray worker running it was lost")
            raise WorkerLost(f"the Ray worker running this execution was lost ({type(exc).__name__})") from None
        finally:
            self.worker_pids.pop(rec.id, None)
        if run is None or not run.status.is_terminal:  # the stream ended early: a worker that died quietly
            if run is not None:
                _close(repo, run, RunStatus.FAILED, "the Ray worker running it was lost before the run's end")
            writer.close_nested(RunStatus.INTERRUPTED, "the Ray worker running it was lost")
            raise WorkerLost("the Ray worker ended the run without its final event")
        return run


class _RemoteError(Exception):
    def __init__(self, message: str, retryable: bool):
        super().__init__(message)
        self.retryable = retryable


class _Writer:
    """The driver's side of a worker's stream: each event's run and step stored with the event, in one
    commit, for the run itself and every run nested in it (each in its own session)."""

    def __init__(self, repo: Repository, session_id: str):
        self.repo = repo
        self.known = {session_id} if repo.get_session(session_id) is not None else set()
        self.sessions: dict[str, AgentSession] = {}  # records the worker sent, written with their first event
        self.runs: dict[str, AgentRun] = {}  # every run seen start, by id

    def persist(self, event: StepEvent) -> AgentRun | None:
        """Store one event of the run or of a nested run; the run it carries, if any."""
        p = event.payload
        session = None
        if event.session_id not in self.known:
            session = self.sessions.pop(event.session_id, None) or AgentSession(session_id=event.session_id)
            self.known.add(event.session_id)
        run = None
        if event.type is _E.RUN_STARTED or event.type.is_terminal:
            run = self.runs[event.run_id] = AgentRun.from_dict(p["run"])
            self.repo.commit(session=session, run=run, events=[event])
        elif event.type is _E.STEP_COMPLETED:
            self.repo.commit(session=session, steps=[Step.from_dict(p["step"])], events=[event])
        else:
            self.repo.commit(session=session, events=[event])
        return run

    def close_nested(self, status: RunStatus, error: str) -> None:
        """The worker is gone: its nested runs that had not ended end here (a dead process's runs are
        ``interrupted``, as the store reports them locally, and resume like them)."""
        for run in self.runs.values():
            if run.parent_run_id and not run.status.is_terminal:
                _close(self.repo, run, status, error)


def _close(repo: Repository, run: AgentRun, status: RunStatus, error: str) -> None:
    run.status, run.error, run.ended_at = status, error, now()
    repo.commit(run=run)


_executors: dict[tuple[Any, str | None], Any] = {}


def ray_executor(repository: Repository | None, address: str | None, agent: Agent) -> Any:
    """The process's Ray executor for a store (and cluster address); checks ``agent`` can travel."""
    from ..storage import open_repository
    from .executor import Executor

    check_picklable(agent)
    repo = repository if repository is not None else open_repository()
    key = (getattr(repo, "root", None) or id(repo), address)
    ex = _executors.get(key)
    if ex is None:
        backend = RayBackend(address)
        backend.remote()  # start or join Ray now, not inside the first execution
        ex = _executors[key] = Executor(repo, backend=backend)
    return ex

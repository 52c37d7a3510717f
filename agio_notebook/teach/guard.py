"""The learner's code, run where it can be abandoned: a daemon thread per call, stopped when it overruns.

A tool that sleeps, a model function that loops forever, a function that waits for ``input()``: the call
is given up after its cap, the thread is told to stop (an exception raised inside it at its next Python
instruction; a thread blocked in C finishes on its own, never joined), and the scenario fails with the
reason. Nothing waits for an abandoned thread, neither the check nor the interpreter at exit. An async
solution runs on a loop of its own in that thread, so blocking calls inside it are stopped the same way.
"""

from __future__ import annotations

import asyncio
import builtins
import ctypes
import inspect
import os
import shutil
import tempfile
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

DEFAULT_CAP = 3.0  # seconds one call of the learner's code may take (offline code takes milliseconds)
HUNG = "did not return within"  # the words of an overrun's reason


class Abandoned(BaseException):
    """Raised inside an overrunning learner thread so it stops (a BaseException: ``except Exception``
    in the learner's code does not swallow it)."""


class AskedForInput(RuntimeError):
    """``input()`` was called by learner code while a check ran: nobody can answer it."""


@dataclass
class Watch:
    """What the learner's code did wrong in one scenario beyond its answer: overran, asked for input.
    The first incident is the scenario's reason, before any expectation's. ``calls`` keeps every model
    call's messages (for probes that replay a call with another tool result)."""

    incidents: list[str] = field(default_factory=list)
    calls: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = field(default_factory=list)

    def note(self, line: str) -> None:
        if line not in self.incidents:
            self.incidents.append(line)


def _raise_in(thread: threading.Thread) -> None:
    if thread.ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(Abandoned))


def _deliver(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if not future.done():
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)


async def call_guarded(fn: Callable[..., Any], *args: Any, what: str, watch: Watch | None = None,
                       cap: float = DEFAULT_CAP) -> Any:
    """``fn(*args)`` (sync or async) in a thread of its own; its value, or what it raised. After ``cap``
    seconds it is abandoned: :class:`TimeoutError` with the learner's reason, noted in ``watch``."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()
    inner: dict[str, Any] = {}

    def post(ok: bool, value: Any) -> None:
        try:
            loop.call_soon_threadsafe(_deliver, done, ok, value)
        except RuntimeError:  # the check is over and its loop closed: nobody is waiting
            pass

    def work() -> None:
        try:
            value = fn(*args)
            if inspect.isawaitable(value):
                value = _run_here(value, inner)
            post(True, value)
        except Abandoned:
            return
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting scenario as it is
            if isinstance(exc, AskedForInput) and watch is not None:
                watch.note(f"your {what} called input(), which nobody can answer during a check: take what it "
                           "needs from its arguments")
            _close_unawaited(exc)
            post(False, exc)

    thread = threading.Thread(target=work, name=f"agio-learner {what}", daemon=True)
    thread.start()
    try:
        return await asyncio.wait_for(asyncio.shield(done), cap)
    except TimeoutError:
        _stop(thread, inner)
        line = (f"your {what} {HUNG} {cap:g} s and was stopped: does it wait for something "
                "(input(), a sleep, a lock) or loop forever?")
        if watch is not None:
            watch.note(line)
        raise TimeoutError(line) from None
    except asyncio.CancelledError:
        _stop(thread, inner)
        raise


def forgot_await(exc: BaseException) -> bool:
    """The learner used a coroutine as if it were its result: an async function called without await."""
    return isinstance(exc, (AttributeError, TypeError)) and "'coroutine' object" in str(exc)


def explain(exc: BaseException, what: str) -> str:
    """One line naming what the learner's code did: a forgotten ``await`` is said as that."""
    if forgot_await(exc):
        return (f"your {what} called an async function without `await` ({exc}): write `await` before the call, "
                f"and make your {what.split('(')[0]} an `async def`")
    if isinstance(exc, TimeoutError) and str(exc).startswith("your "):
        return str(exc)
    return f"your {what} raised {type(exc).__name__}: {exc}".splitlines()[0][:300]


def _close_unawaited(exc: BaseException) -> None:
    """Close the coroutines the learner's frames created and never awaited, so Python does not add a
    RuntimeWarning to a reason that already says it."""
    if not forgot_await(exc):
        return
    def close(value: Any) -> None:
        if inspect.iscoroutine(value) and inspect.getcoroutinestate(value) == inspect.CORO_CREATED:
            value.close()

    tb = exc.__traceback__
    while tb is not None:
        for value in list(tb.tb_frame.f_locals.values()):
            close(value)
            if isinstance(value, (list, tuple, set)):
                for item in value:
                    close(item)
            elif isinstance(value, dict):
                for item in value.values():
                    close(item)
        tb = tb.tb_next


def _run_here(awaitable: Any, inner: dict[str, Any]) -> Any:
    """An awaitable run to the end on a new loop in this (the learner's) thread."""
    loop = asyncio.new_event_loop()
    inner["loop"] = loop

    async def main() -> Any:
        inner["task"] = asyncio.current_task()
        return await awaitable

    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


def _stop(thread: threading.Thread, inner: dict[str, Any]) -> None:
    loop, task = inner.get("loop"), inner.get("task")
    if loop is not None and task is not None:
        try:
            loop.call_soon_threadsafe(task.cancel)  # wakes a loop asleep in await
        except RuntimeError:
            pass
    _raise_in(thread)


_input_lock = threading.Lock()
_input_depth = 0
_real_input: Callable[..., str] | None = None


def _no_input(prompt: Any = "") -> str:
    raise AskedForInput("input() was called while check() ran, and nobody can answer it: a tool or model "
                        "function gets what it needs from its arguments")


@contextmanager
def no_input() -> Iterator[None]:
    """``input()`` raises :class:`AskedForInput` at once while a check runs (nested checks share it)."""
    global _input_depth, _real_input
    with _input_lock:
        if _input_depth == 0:
            _real_input = builtins.input
            builtins.input = _no_input
        _input_depth += 1
    try:
        yield
    finally:
        with _input_lock:
            _input_depth -= 1
            if _input_depth == 0 and _real_input is not None:
                if builtins.input is _no_input:  # the kernel may have put its own back meanwhile
                    builtins.input = _real_input
                _real_input = None


_sandbox_lock = threading.Lock()
_sandbox_depth = 0
_sandbox_saved: str | None = None
_scratch: str | None = None


def scratch_store() -> str | None:
    """The scratch directory the default store points at while a check runs (None outside a check)."""
    return _scratch


@contextmanager
def sandboxed() -> Iterator[None]:
    """While a check runs: ``input()`` raises at once, the default store (``AGIO_STORE``) is a scratch
    directory (a solution that forgets ``repository=`` writes nothing to yours), and Python's warning
    about a coroutine never awaited is left out (the reason says it)."""
    global _sandbox_depth, _sandbox_saved, _scratch
    scratch = None
    with _sandbox_lock:
        if _sandbox_depth == 0:
            scratch = _scratch = tempfile.mkdtemp(prefix="agio-check-store-")
            _sandbox_saved = os.environ.get("AGIO_STORE")
            os.environ["AGIO_STORE"] = scratch
        _sandbox_depth += 1
    try:
        with no_input(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"coroutine .* was never awaited", category=RuntimeWarning)
            yield
    finally:
        with _sandbox_lock:
            _sandbox_depth -= 1
            if _sandbox_depth == 0:
                if _sandbox_saved is None:
                    os.environ.pop("AGIO_STORE", None)
                else:
                    os.environ["AGIO_STORE"] = _sandbox_saved
                _sandbox_saved = _scratch = None
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


@contextmanager
def environment(values: dict[str, str | None]) -> Iterator[None]:
    """Environment variables set (None: removed) for the length of a check, then put back."""
    saved = {name: os.environ.get(name) for name in values}
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

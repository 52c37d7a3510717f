"""``%agio batch`` and ``%agio executions``: run an agent over a list or a DataFrame, see the records.

``%agio batch`` waits for the batch in the cell (awaiting it, so the monitor's Cancel button is heard
while it runs; see :mod:`agio_notebook.notebook.batch_cell`), unless ``--background``.
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError

from ...agent import Agent
from ... import scheduling
from ..batch_monitor import display_handle
from . import arg, command


def _lookup(c: Any, name: str, what: str) -> Any:
    ns = c.shell.user_ns if c.shell is not None else {}
    if name not in ns:
        raise UsageError(f"%agio batch: no variable {name!r} for the {what} in the notebook")
    return ns[name]


@command(
    "batch", "run an agent over every item of INPUTS (a list of strings or a DataFrame; --prompt fills "
    "{column} placeholders), each item its own session; shows a live monitor with Cancel, then a summary. "
    "The value is the batch handle: _.results(), _.metrics(). --resume NAME runs what a batch left unfinished.",
    arg("inputs", nargs="?", default=None, help="variable holding the inputs"),
    arg("--agent", default=None, help="variable holding the Agent (default: the notebook's default agent)"),
    arg("--prompt", default=None, help="template, e.g. 'Translate: {text}'"),
    arg("--name", default=None, help="name to resume it by"),
    arg("--resume", default=None, metavar="NAME", help="resume the stored batch NAME"),
    arg("--concurrency", type=int, default=8),
    arg("--priority", type=int, default=0),
    arg("--timeout", type=float, default=None, help="seconds per execution"),
    arg("--retries", type=int, default=0),
    arg("--retry-delay", type=float, default=1.0),
    arg("--rpm", type=float, default=None, help="model calls per minute, shared per endpoint"),
    arg("--tpm", type=float, default=None, help="tokens per minute, shared per endpoint"),
    arg("--endpoint", default=None, help="rate-limit key (default: the model name)"),
    arg("--max-tokens", type=int, default=None, help="token budget per execution"),
    arg("--batch-max-tokens", type=int, default=None, help="token budget of the whole batch"),
    arg("--batch-max-cost", type=float, default=None, help="USD budget of the whole batch"),
    arg("--backend", default=None, choices=["local", "ray"]),
    arg("--address", default=None, help="Ray cluster to join (default: a local Ray)"),
    arg("--background", action="store_true", help="return at once; the monitor keeps updating"),
)
def batch(c: Any, args: Any) -> Any:
    agent = _lookup(c, args.agent, "agent") if args.agent else c.default_agent()
    if not isinstance(agent, Agent):
        raise UsageError(f"%agio batch: {args.agent!r} is a {type(agent).__name__}, not an agio Agent")
    if args.resume:
        return _shown(c, scheduling.resume_batch(args.resume, agent if args.agent else None,
                                                 repository=c.repository))
    if args.inputs is None:
        raise UsageError("%agio batch: name the variable holding the inputs, e.g. %agio batch questions")
    inputs = _lookup(c, args.inputs, "inputs")
    rate = None
    if args.rpm is not None or args.tpm is not None:
        rate = scheduling.RateLimit(rpm=args.rpm, tpm=args.tpm, endpoint=args.endpoint)
    return _shown(c, scheduling.batch(agent, inputs, prompt=args.prompt, name=args.name,
                                      concurrency=args.concurrency, priority=args.priority, timeout=args.timeout,
                                      retries=args.retries, retry_delay=args.retry_delay, rate_limit=rate,
                                      max_tokens=args.max_tokens, batch_max_tokens=args.batch_max_tokens,
                                      batch_max_cost=args.batch_max_cost,
                                      repository=c.repository, backend=args.backend, address=args.address))


def _shown(c: Any, handle: scheduling.BatchHandle) -> scheduling.BatchHandle:
    """The monitor goes up now, before the cell awaits the batch (the cell's value then shows nothing more)."""
    if c.shell is not None:
        display_handle(handle, c.shell)
    return handle


@command("executions", "execution records (batch items, plan tasks, single executions) as a DataFrame",
         arg("--batch", default=None), arg("--status", default=None, choices=scheduling.EXEC_STATUSES),
         arg("--agent", default=None))
def executions(c: Any, args: Any) -> Any:
    batch_name = None if args.batch is None else scheduling.default_executor(c.repository).store.resolve_batch(args.batch)
    return scheduling.executions(args.status, batch_name, args.agent, repository=c.repository)

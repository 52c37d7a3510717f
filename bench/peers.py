"""Engine overhead per agent turn: agio-notebook against LangGraph, pydantic-ai and the OpenAI Agents SDK.

The same work everywhere: one run of K model turns against a zero-latency fake model; turns 1..K-1
each return one tool call ``add(a=i, b=1)`` (an ``async def`` tool), turn K returns "done". Each
variant checks that its run did the work (K model calls, K-1 tool calls, final text "done").

Timed: the whole run (a per-run fixed cost is included, amortised over K). Not timed: building the
agent, graph or database (once per variant), and starting a fresh conversation (once per run).
Variants alternate within each repetition (round robin, rotating the order), after a warm-up run
each. Persisted variants run twice: stores on disk and stores on tmpfs (/dev/shm), so framework CPU
cost and fsync cost are seen apart.

    python -m venv .bench-venv && .bench-venv/bin/pip install -e '.[bench]'
    .bench-venv/bin/python bench/peers.py            # K = 10 50 200, 5 repetitions
    .bench-venv/bin/python bench/peers.py --quick    # K = 10 200, 3 repetitions

agio-notebook variants: durable TinyDB store (every step fsynced before the engine goes on),
all events consumed, one hook attached; and the same with an in-memory repository.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.metadata
import itertools
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

warnings.filterwarnings("ignore")

Go = Callable[[], Awaitable[tuple[str, int]]]
Prepare = Callable[[], Go]
Cleanup = Callable[[], Awaitable[None]] | None
Setup = Callable[[int], Awaitable[tuple[Prepare, Cleanup]]]

TOOL_CALLS = [0]
_ids = itertools.count()
DISK_DIR = os.environ.get("BENCH_DISK_DIR", "/var/tmp")
TMPFS_DIR = "/dev/shm"


async def add(a: int, b: int) -> int:
    """Add two integers."""
    TOOL_CALLS[0] += 1
    return a + b


@dataclass
class Variant:
    framework: str
    name: str
    setup: Setup
    medium: str = "-"  # "-" (nothing persisted), "disk" or "tmpfs"

    @property
    def label(self) -> str:
        return f"{self.framework}: {self.name}" + ("" if self.medium == "-" else f" [{self.medium}]")


def tmp_dir(medium: str) -> tuple[str, Callable[[], None]]:
    d = tempfile.mkdtemp(prefix="agio_bench_", dir=TMPFS_DIR if medium == "tmpfs" else DISK_DIR)
    return d, lambda: shutil.rmtree(d, ignore_errors=True)


# --------------------------------------------------------------------------------------------- #
# agio-notebook
# --------------------------------------------------------------------------------------------- #
def agio_variants() -> list[Variant]:
    from agio_notebook import Agent, AgentHook, ExecutionConfig, StepRunner, tool
    from agio_notebook.core import StepEventType
    from agio_notebook.models import Reply, ScriptedModel
    from agio_notebook.storage import InMemoryRepository, TinyDBRepository

    add_tool = tool(add)

    class StepCounter(AgentHook):
        def __init__(self) -> None:
            self.steps = 0

        async def on_step_end(self, run: Any, step: Any) -> None:
            self.steps += 1

    def make(medium: str, backend: str = "tinydb") -> Setup:
        async def setup(k: int):
            cleanup: Cleanup = None
            if medium == "memory":
                repo = InMemoryRepository()
            else:
                path, rm = tmp_dir(medium)
                if backend == "sqlite":
                    from agio_notebook.storage import SQLiteRepository

                    repo = SQLiteRepository(os.path.join(path, "agio.db"))
                elif backend == "postgres":
                    from agio_notebook.storage import PostgresRepository

                    repo = PostgresRepository(postgres().new_database())
                else:
                    repo = TinyDBRepository(path)

                async def cleanup() -> None:
                    repo.close()
                    rm()
            model = ScriptedModel([Reply.call("add", a=i, b=1) for i in range(1, k)] + ["done"])
            hook = StepCounter()
            runner = StepRunner(Agent(model=model, tools=[add_tool]), hooks=[hook],
                                config=ExecutionConfig(max_steps=k + 10), repository=repo)

            def prepare() -> Go:
                model.reset()
                session = f"conv-{next(_ids)}"

                async def go() -> tuple[str, int]:
                    final = ""
                    events = 0
                    async for event in runner.run_stream(session, "go"):
                        events += 1
                        if event.type is StepEventType.RUN_COMPLETED:
                            final = event.payload["run"]["final_text"]
                    assert events >= 4 * k, events
                    return final, len(model.calls)
                return go

            return prepare, cleanup
        return setup

    return [Variant("agio-notebook", "durable TinyDB store + events + hook", make("disk"), "disk"),
            Variant("agio-notebook", "durable TinyDB store + events + hook", make("tmpfs"), "tmpfs"),
            Variant("agio-notebook", "SQLite store (WAL) + events + hook", make("disk", "sqlite"), "disk"),
            Variant("agio-notebook", "SQLite store (WAL) + events + hook", make("tmpfs", "sqlite"), "tmpfs"),
            Variant("agio-notebook", "PostgreSQL store (loopback) + events + hook", make("disk", "postgres"), "disk"),
            Variant("agio-notebook", "in-memory repository + events + hook", make("memory"))]


_postgres: list[Any] = []


def postgres() -> Any:
    """A PostgreSQL server for the PostgreSQL rows, started once (Debian's postgresql, as in the tests)."""
    if not _postgres:
        import atexit
        import sys

        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
        from store_backends import running_postgres

        context = running_postgres()
        _postgres.append(context.__enter__())
        atexit.register(context.__exit__, None, None, None)
    return _postgres[0]


# --------------------------------------------------------------------------------------------- #
# The floor: a plain asyncio loop, with and without one sqlite3 commit per turn
# --------------------------------------------------------------------------------------------- #
def baseline_variants() -> list[Variant]:
    def make(medium: str | None) -> Setup:
        async def setup(k: int):
            conn, rm = None, None
            if medium is not None:
                d, rm = tmp_dir(medium)
                conn = sqlite3.connect(os.path.join(d, "db.sqlite"))
                conn.execute("CREATE TABLE msgs (conv TEXT, seq INTEGER, body TEXT)")
                conn.commit()

            def prepare() -> Go:
                state = {"i": 0}
                conv = f"conv-{next(_ids)}"

                async def fake_model(messages: list[dict]) -> dict:
                    state["i"] += 1
                    i = state["i"]
                    if i < k:
                        return {"role": "assistant", "content": None, "tool_calls": [
                            {"id": f"call_{i}", "name": "add", "arguments": json.dumps({"a": i, "b": 1})}]}
                    return {"role": "assistant", "content": "done"}

                async def go() -> tuple[str, int]:
                    messages: list[dict] = [{"role": "user", "content": "go"}]
                    while True:
                        msg = await fake_model(messages)
                        messages.append(msg)
                        new = [msg]
                        for call in msg.get("tool_calls") or ():
                            result = await add(**json.loads(call["arguments"]))
                            out = {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)}
                            messages.append(out)
                            new.append(out)
                        if conn is not None:
                            base = len(messages) - len(new)
                            conn.executemany("INSERT INTO msgs VALUES (?, ?, ?)",
                                             [(conv, base + j, json.dumps(m)) for j, m in enumerate(new)])
                            conn.commit()
                        if not msg.get("tool_calls"):
                            return msg["content"], state["i"]
                return go

            async def cleanup() -> None:
                if conn is not None:
                    conn.close()
                    rm()

            return prepare, cleanup
        return setup

    return [Variant("floor", "plain asyncio loop", make(None)),
            Variant("floor", "plain loop + sqlite3 commit per turn", make("disk"), "disk"),
            Variant("floor", "plain loop + sqlite3 commit per turn", make("tmpfs"), "tmpfs")]


# --------------------------------------------------------------------------------------------- #
# pydantic-ai
# --------------------------------------------------------------------------------------------- #
def pydantic_ai_variants() -> list[Variant]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage, UsageLimits

    no_limits = UsageLimits(request_limit=None)

    async def setup(k: int):
        state = {"i": 0}

        async def respond(messages: Any, info: AgentInfo) -> ModelResponse:
            state["i"] += 1
            i = state["i"]
            usage = RequestUsage(input_tokens=1, output_tokens=1)
            if i < k:
                return ModelResponse(parts=[ToolCallPart("add", {"a": i, "b": 1}, tool_call_id=f"call_{i}")],
                                     usage=usage)
            return ModelResponse(parts=[TextPart("done")], usage=usage)

        agent = Agent(FunctionModel(respond))
        agent.tool_plain(add)

        def prepare() -> Go:
            state["i"] = 0

            async def go() -> tuple[str, int]:
                result = await agent.run("go", usage_limits=no_limits)
                return result.output, state["i"]
            return go

        return prepare, None

    return [Variant("pydantic-ai", "Agent.run (FunctionModel)", setup)]


# --------------------------------------------------------------------------------------------- #
# OpenAI Agents SDK
# --------------------------------------------------------------------------------------------- #
def openai_agents_variants() -> list[Variant]:
    from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    set_tracing_disabled(True)
    add_tool = function_tool(add)

    class FakeModel(Model):
        def __init__(self, k: int):
            self.k, self.i = k, 0

        async def get_response(self, system_instructions, input, model_settings, tools, output_schema,
                               handoffs, tracing, *, previous_response_id=None, conversation_id=None,
                               prompt=None, **kwargs):
            self.i += 1
            i = self.i
            if i < self.k:
                output = [ResponseFunctionToolCall(id=f"fc_{i}", call_id=f"call_{i}", type="function_call",
                                                   name="add", arguments=json.dumps({"a": i, "b": 1}))]
            else:
                output = [ResponseOutputMessage(
                    id=f"msg_{i}", type="message", role="assistant", status="completed",
                    content=[ResponseOutputText(text="done", type="output_text", annotations=[], logprobs=[])])]
            return ModelResponse(output=output, response_id=None,
                                 usage=Usage(requests=1, input_tokens=1, output_tokens=1, total_tokens=2))

        def stream_response(self, *args, **kwargs):
            raise NotImplementedError

    def make(medium: str | None) -> Setup:
        async def setup(k: int):
            model = FakeModel(k)
            agent = Agent(name="bench", model=model, tools=[add_tool])
            d, rm = tmp_dir(medium) if medium else (None, None)
            sessions: list[Any] = []

            def prepare() -> Go:
                model.i = 0
                session = SQLiteSession(f"conv-{next(_ids)}", db_path=os.path.join(d, "db.sqlite")) if d else None
                if session is not None:
                    sessions.append(session)

                async def go() -> tuple[str, int]:
                    result = await Runner.run(agent, "go", max_turns=k + 10, session=session)
                    return result.final_output, model.i
                return go

            async def cleanup() -> None:
                for s in sessions:
                    s.close()
                if rm:
                    rm()

            return prepare, cleanup
        return setup

    return [Variant("openai-agents", "Runner.run", make(None)),
            Variant("openai-agents", "Runner.run + SQLiteSession", make("disk"), "disk"),
            Variant("openai-agents", "Runner.run + SQLiteSession", make("tmpfs"), "tmpfs")]


# --------------------------------------------------------------------------------------------- #
# LangGraph
# --------------------------------------------------------------------------------------------- #
def langgraph_variants() -> list[Variant]:
    from typing import Annotated, TypedDict

    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool as lc_tool
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages
    from langgraph.prebuilt import create_react_agent

    add_tool = lc_tool(add)

    class FakeChatModel(BaseChatModel):
        k: int
        i: int = 0

        @property
        def _llm_type(self) -> str:
            return "fake-bench"

        def bind_tools(self, tools, **kwargs):
            return self

        def _next(self) -> ChatResult:
            self.i += 1
            i = self.i
            if i < self.k:
                msg = AIMessage(content="", tool_calls=[
                    {"name": "add", "args": {"a": i, "b": 1}, "id": f"call_{i}", "type": "tool_call"}])
            else:
                msg = AIMessage(content="done")
            return ChatResult(generations=[ChatGeneration(message=msg)])

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            return self._next()

        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            return self._next()

    State = TypedDict("State", {"messages": Annotated[list, add_messages]})

    def hand_built(model: FakeChatModel):
        async def call_model(state):
            return {"messages": [await model.ainvoke(state["messages"])]}

        async def call_tools(state):
            calls = state["messages"][-1].tool_calls
            return {"messages": [ToolMessage(content=str(await add(**c["args"])), tool_call_id=c["id"])
                                 for c in calls]}

        def route(state):
            return "tools" if state["messages"][-1].tool_calls else END

        g = StateGraph(State)
        g.add_node("model", call_model)
        g.add_node("tools", call_tools)
        g.add_edge(START, "model")
        g.add_conditional_edges("model", route, ["tools", END])
        g.add_edge("tools", "model")
        return g.compile()

    def make(kind: str, medium: str | None) -> Setup:
        async def setup(k: int):
            model = FakeChatModel(k=k)
            saver, cleanup = None, None
            if medium is not None:
                d, rm = tmp_dir(medium)
                cm = AsyncSqliteSaver.from_conn_string(os.path.join(d, "db.sqlite"))
                saver = await cm.__aenter__()
                await saver.setup()

                async def cleanup() -> None:
                    await cm.__aexit__(None, None, None)
                    rm()
            graph = hand_built(model) if kind == "hand" else create_react_agent(model, [add_tool], checkpointer=saver)

            def prepare() -> Go:
                model.i = 0
                config: dict[str, Any] = {"recursion_limit": 2 * k + 10}
                if saver is not None:
                    config["configurable"] = {"thread_id": f"conv-{next(_ids)}"}

                async def go() -> tuple[str, int]:
                    out = await graph.ainvoke({"messages": [HumanMessage("go")]}, config)
                    return out["messages"][-1].content, model.i
                return go

            return prepare, cleanup
        return setup

    return [Variant("langgraph", "hand-built StateGraph, no checkpointer", make("hand", None)),
            Variant("langgraph", "create_react_agent, no checkpointer", make("prebuilt", None)),
            Variant("langgraph", "create_react_agent + AsyncSqliteSaver", make("prebuilt", "disk"), "disk"),
            Variant("langgraph", "create_react_agent + AsyncSqliteSaver", make("prebuilt", "tmpfs"), "tmpfs")]


# --------------------------------------------------------------------------------------------- #
# Harness
# --------------------------------------------------------------------------------------------- #
async def run_once(go: Go, k: int) -> float:
    TOOL_CALLS[0] = 0
    gc.collect()
    t0 = time.perf_counter()
    final, model_calls = await go()
    elapsed = time.perf_counter() - t0
    assert final == "done", final
    assert model_calls == k, (model_calls, k)
    assert TOOL_CALLS[0] == k - 1, (TOOL_CALLS[0], k)
    return elapsed / k * 1e3  # ms per turn


async def measure(variants: list[Variant], k: int, reps: int) -> dict[str, list[float]]:
    prepared: list[tuple[Variant, Prepare, Cleanup]] = []
    for v in variants:
        prepare, cleanup = await v.setup(k)
        prepared.append((v, prepare, cleanup))
    samples: dict[str, list[float]] = {v.label: [] for v in variants}
    try:
        for _, prepare, _ in prepared:  # warm-up
            await run_once(prepare(), k)
        for rep in range(reps):
            order = prepared[rep % len(prepared):] + prepared[:rep % len(prepared)]
            for v, prepare, _ in order:
                samples[v.label].append(await run_once(prepare(), k))
    finally:
        for _, _, cleanup in prepared:
            if cleanup is not None:
                await cleanup()
    return samples


def versions() -> str:
    pkgs = ["agio-notebook", "pydantic-ai-slim", "openai-agents", "langgraph", "langgraph-checkpoint-sqlite",
            "langchain-core", "tinydb"]
    out = [f"python {sys.version.split()[0]}"]
    for p in pkgs:
        try:
            out.append(f"{p} {importlib.metadata.version(p)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{p} (not installed)")
    return ", ".join(out)


def fsync_probe(directory: str, n: int = 50) -> float:
    """Median ms of write+fsync of 600 bytes on that medium (to read disk figures as ratios)."""
    path = os.path.join(directory, f".fsync-probe-{os.getpid()}")
    times = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            os.write(fd, b"x" * 600)
            os.fsync(fd)
            times.append((time.perf_counter() - t0) * 1e3)
    finally:
        os.close(fd)
        os.remove(path)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, nargs="+", default=[10, 50, 200])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="K = 10 200 and 3 repetitions")
    ap.add_argument("--only", default=None, help="substring filter on variant labels (floors and agio always run)")
    args = ap.parse_args()
    if args.quick:
        args.k, args.reps = [10, 200], 3
    variants: list[Variant] = []
    for fn in (baseline_variants, agio_variants, langgraph_variants, pydantic_ai_variants, openai_agents_variants):
        try:
            variants += fn()
        except Exception as exc:  # noqa: BLE001 - a missing peer is reported, not fatal
            print(f"SKIPPED {fn.__name__}: {type(exc).__name__}: {exc}")
    if args.only:
        variants = [v for v in variants if v.framework in ("floor", "agio-notebook") or args.only.lower() in v.label.lower()]
    print(versions())
    print(f"fsync of 600 B: disk ({DISK_DIR}) {fsync_probe(DISK_DIR):.2f} ms, tmpfs {fsync_probe(TMPFS_DIR):.3f} ms")
    print(f"K={args.k}, {args.reps} repetitions after 1 warm-up, variants alternating; ms per model turn\n")
    results: dict[tuple[str, int], list[float]] = {}
    t_start = time.perf_counter()
    for k in args.k:
        for label, s in (asyncio.run(measure(variants, k, args.reps))).items():
            results[(label, k)] = s
    print_table(variants, args.k, results)
    print_targets(args.k, results)
    print(f"\n(total benchmark time {time.perf_counter() - t_start:.0f} s)")


def median(results: dict[tuple[str, int], list[float]], label: str, k: int) -> float:
    return statistics.median(results[(label, k)])


AGIO_DISK = "agio-notebook: durable TinyDB store + events + hook [disk]"
AGIO_TMPFS = "agio-notebook: durable TinyDB store + events + hook [tmpfs]"
AGIO_MEM = "agio-notebook: in-memory repository + events + hook"


def print_table(variants: list[Variant], ks: list[int], results: dict[tuple[str, int], list[float]]) -> None:
    width = max(len(v.label) for v in variants)
    header = f"{'variant':<{width}}" + "".join(f" | K={k:<4} median    min    max  ×agio" for k in ks)
    print(header)
    print("-" * len(header))
    for v in variants:
        row = f"{v.label:<{width}}"
        for k in ks:
            s = results[(v.label, k)]
            ref = AGIO_TMPFS if v.medium == "tmpfs" else AGIO_DISK if v.medium == "disk" else AGIO_MEM
            ratio = statistics.median(s) / median(results, ref, k)
            row += f" |     {statistics.median(s):7.3f} {min(s):6.3f} {max(s):6.3f} {ratio:6.1f}"
        print(row)
    print("\n×agio: the variant's median over agio-notebook's on the same medium (durable store for disk and "
          "tmpfs rows, in-memory repository for rows that persist nothing).")


def print_targets(ks: list[int], results: dict[tuple[str, int], list[float]]) -> None:
    k_hi, k_lo = max(ks), min(ks)
    checks: list[tuple[str, float, str, float, bool]] = []

    def check(text: str, value: float, bound_text: str, bound: float, ok: bool) -> None:
        checks.append((text, value, bound_text, bound, ok))

    agio_tmpfs = median(results, AGIO_TMPFS, k_hi)
    for peer in ("langgraph: create_react_agent + AsyncSqliteSaver [tmpfs]", "openai-agents: Runner.run + SQLiteSession [tmpfs]"):
        if (peer, k_hi) in results:
            ratio = median(results, peer, k_hi) / agio_tmpfs
            check(f"tmpfs K={k_hi}: {peer.split(':')[0]} with its store / agio durable", ratio, ">= 10", 10, ratio >= 10)
    peer = "langgraph: create_react_agent, no checkpointer"
    if (peer, k_hi) in results:
        ratio = median(results, peer, k_hi) / agio_tmpfs
        check(f"tmpfs K={k_hi}: LangGraph with no checkpointer / agio durable", ratio, "> 1", 1, ratio > 1)
    floor = median(results, "floor: plain loop + sqlite3 commit per turn [disk]", k_hi)
    ratio = median(results, AGIO_DISK, k_hi) / floor
    check(f"disk K={k_hi}: agio durable / plain loop + sqlite3 commit", ratio, "<= 2.5", 2.5, ratio <= 2.5)
    for label in (AGIO_DISK, AGIO_TMPFS, AGIO_MEM):
        ratio = median(results, label, k_hi) / median(results, label, k_lo)
        check(f"flat: {label.split(': ')[1]} K={k_hi} / K={k_lo}", ratio, "<= 1.3", 1.3, ratio <= 1.3)
    for medium, tiny in (("disk", AGIO_DISK), ("tmpfs", AGIO_TMPFS)):
        sqlite = f"agio-notebook: SQLite store (WAL) + events + hook [{medium}]"
        if (sqlite, k_hi) in results:
            ratio = median(results, sqlite, k_hi) / median(results, tiny, k_hi)
            check(f"{medium} K={k_hi}: agio on SQLite / agio on TinyDB", ratio, "<= 1.5", 1.5, ratio <= 1.5)
    ratio = median(results, AGIO_MEM, k_hi) / median(results, "floor: plain asyncio loop", k_hi)
    check(f"K={k_hi}: agio in-memory / plain asyncio loop", ratio, "<= 20", 20, ratio <= 20)
    print("\ntargets")
    for text, value, bound_text, _, ok in checks:
        print(f"  {'PASS' if ok else 'FAIL'}  {text}: {value:.2f} (target {bound_text})")


if __name__ == "__main__":
    main()

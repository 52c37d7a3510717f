"""One real endpoint from every event loop a user reaches, against LiteLLM's proxy (uvicorn keeps
connections alive, so a client reused across loops fails): in one script (``loop_mix.py``: run_sync,
asyncio.run, a batch, threads, a cancel, run_coroutine, Ray workers) and in one real kernel (``%%agio``,
top-level ``await``, a batch, a worker thread, a kernel interrupt mid-request), with no error and no
"Task exception was never retrieved" anywhere; and an MCP server's tools from the same loops. (The other
clients are not bound to a loop: memory's embeddings client is synchronous, and web_fetch opens a
synchronous client per call.)"""

from __future__ import annotations

import asyncio
import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from agio_notebook.models import OpenAIModel
from agio_notebook.models.per_loop import PerLoop
from kernel_support import Kernel, install_kernelspec, of_type
from litellm_proxy import MASTER_KEY, MODEL, LiteLLMProxy
from scheduling_support import wait_until

HERE = Path(__file__).resolve().parent
NOISE = ("Task exception was never retrieved", "Event loop is closed", "bound to a different event loop",
         "ResourceWarning", "Traceback", "Exception ignored")


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    p = LiteLLMProxy(tmp_path_factory.mktemp("litellm")).start()
    yield p
    p.stop()


def test_every_loop_of_a_script_with_ray_workers(proxy):
    done = subprocess.run([sys.executable, "-W", "always::ResourceWarning", str(HERE / "loop_mix.py"), proxy.base_url,
                           MASTER_KEY, MODEL, "--ray"], capture_output=True, text=True, timeout=600, cwd=HERE)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    calls = {c["where"]: c for c in lines if "where" in c}
    assert len(calls) == 17, list(calls)
    expected = {w: ("cancelled", None) if w == "cancelled call" else
                ("completed", "after the cancel" if "after a cancel" in w else "pong") for w in calls}
    assert {w: (c["status"], c["text"]) for w, c in calls.items()} == expected, [c for c in lines if c.get("error")]
    assert any(w.startswith("ray item") for w in calls) and any(w.startswith("batch item") for w in calls)
    # the clients of closed loops were closed with them: only the scheduler's loop (still running) holds one
    assert lines[-1] == {"clients": 1}
    assert not [n for n in NOISE if n in done.stderr], done.stderr[-3000:]


KERNEL_SETUP = r'''
%load_ext agio_notebook
import asyncio, pathlib
import agio_notebook as agio
from agio_notebook import Agent, ExecutionConfig, StepRunner
from agio_notebook.explore.runner import run_coroutine
from agio_notebook.models import OpenAIModel
from openai import AsyncOpenAI, DefaultAsyncHttpxClient

FLAG = pathlib.Path("request-sent")
config = ExecutionConfig(enable_retry=False)
llm = Agent(model=OpenAIModel(MODEL, base_url=URL, api_key=KEY, settings={"extra_body": {"mock_response": "pong"}}),
            name="llm", config=config)

async def _sent(request):
    FLAG.write_text("sent")

def _client():
    return AsyncOpenAI(api_key=KEY, base_url=URL, max_retries=0,
                       http_client=DefaultAsyncHttpxClient(event_hooks={"request": [_sent]}))

hooked = OpenAIModel(MODEL, client=_client)
slow = Agent(model=hooked, name="slow", config=config,
             model_settings={"extra_body": {"mock_response": "late", "mock_delay": 30}})
after = Agent(model=hooked, name="after", config=config, model_settings={"extra_body": {"mock_response": "after"}})
'''


def test_every_loop_of_a_kernel_and_an_interrupt_mid_request(proxy, tmp_path_factory):
    root = tmp_path_factory.mktemp("loops-kernel")
    install_kernelspec(root / "jupyter")
    kernel = Kernel(root, env={"OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "AGIO_MODEL": ""})
    seen: list = []

    def cell(code: str, timeout: float = 120) -> dict:
        res = kernel.execute(code, timeout)
        seen.extend(res["messages"])
        assert res["reply"]["content"]["status"] == "ok", res["reply"]["content"]
        return res

    def last() -> list:
        return kernel.value("[_agio.status, _agio.final_text]")

    try:
        cell(f"MODEL, URL, KEY = {MODEL!r}, {proxy.base_url!r}, {MASTER_KEY!r}\n" + KERNEL_SETUP)
        for _ in range(2):  # the worker's loop, then the kernel's own, twice over: every switch
            cell("%%agio llm --new-session\nfirst")
            assert last() == ["completed", "pong"]
            cell("r = await StepRunner(llm).run(None, 'awaited')")
            assert kernel.value("[r.status.value, r.final_text]") == ["completed", "pong"]
        cell("h = agio.batch(llm, ['a', 'b', 'c'], concurrency=2).wait(120)")
        assert kernel.value("h.results()['final_text'].tolist()") == ["pong"] * 3
        cell("j = run_coroutine(StepRunner(llm).run(None, 'on a thread'))")
        assert kernel.value("[j.status.value, j.final_text]") == ["completed", "pong"]
        cell("%%agio llm\nafter the batch")
        assert last() == ["completed", "pong"]

        msg_id = kernel.kc.execute("%%agio slow --new-session\nnever answered")
        wait_until((root / "request-sent").exists, 60, "the request to leave")
        kernel.km.interrupt_kernel()
        seen.extend(kernel.drain(60, stop=lambda m: m["msg_type"] == "status" and m["content"]["execution_state"]
                                 == "idle" and m["parent_header"].get("msg_id") == msg_id))
        kernel.reply_to(msg_id)
        assert last()[0] == "cancelled"
        cell("%%agio after\nthe same model, after the interrupt")
        assert last() == ["completed", "after"]
        cell("r = await StepRunner(after).run(None, 'and on the kernel loop')")
        assert kernel.value("[r.status.value, r.final_text]") == ["completed", "after"]
        cell("import gc; gc.collect()\n%agio runs")
        text = " ".join(m["content"].get("text", "") for m in of_type(seen, "stream", "error"))
        text += " ".join(json.dumps(m["content"]) for m in of_type(seen, "error"))
        assert not [n for n in NOISE if n in text], text[-3000:]
    finally:
        kernel.close()


def test_a_loop_closed_without_its_shutdown_leaves_nothing_behind():
    closed: list[int] = []

    async def close(value: int) -> None:
        closed.append(value)

    made = iter(range(100))
    values = PerLoop(lambda: next(made), close)

    async def take() -> int:
        return await values.get()

    assert asyncio.run(take()) == 0 and closed == [0]  # asyncio.run shuts its generators down: closed there
    loop = asyncio.new_event_loop()
    assert loop.run_until_complete(take()) == 1 and loop.run_until_complete(take()) == 1  # one per loop
    loop.close()  # no shutdown_asyncgens: the value is dropped when the next loop asks
    assert len(values) == 0
    assert asyncio.run(take()) == 2 and closed == [0, 2]


def test_the_model_pickles_without_its_clients_and_works_on_the_other_side(proxy):
    model = OpenAIModel(MODEL, base_url=proxy.base_url, api_key=MASTER_KEY,
                        settings={"extra_body": {"mock_response": "pickled"}})

    async def answer(m: OpenAIModel) -> str:
        return "".join(c.text for c in [c async for c in m.stream([{"role": "user", "content": "hi"}], [])]
                       if hasattr(c, "text"))

    assert asyncio.run(answer(model)) == "pickled"
    copy = pickle.loads(pickle.dumps(model))
    assert asyncio.run(answer(copy)) == "pickled" and copy.base_url == model.base_url
    with pytest.raises(TypeError, match="client object cannot be pickled"):
        pickle.dumps(OpenAIModel(MODEL, client=model._client))


def test_an_mcp_server_answers_every_loop():
    """MCP sessions live on a thread of their own: a tool of one server from run_sync (twice), asyncio.run on
    two threads at once and a batch (the scheduler's loop)."""
    import threading

    from agio_notebook import Agent, FunctionModel, Reply, StepRunner
    from agio_notebook.scheduling import batch
    from agio_notebook.storage import InMemoryRepository
    from agio_notebook.tools.mcp import close_mcp_servers, mcp_tools

    def reply(messages, tools):
        if messages[-1]["role"] == "tool":
            return "it is " + json.loads(messages[-1]["content"])["timezone"]
        return Reply.call("get_current_time", timezone="UTC")

    repo = InMemoryRepository()
    try:
        agent = Agent(model=FunctionModel(reply), tools=mcp_tools([sys.executable, "-m", "mcp_server_time"]),
                      name="clock")
        runner = StepRunner(agent, repository=repo)
        answers = [runner.run_sync(None, "time?").final_text for _ in range(2)]
        box: list[str] = []
        threads = [threading.Thread(target=lambda: box.append(asyncio.run(runner.run(None, "time?")).final_text))
                   for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        answers += box
        answers += batch(agent, ["time?", "time?"], repository=repo).wait(60).results()["final_text"].tolist()
        assert answers == ["it is UTC"] * 6
    finally:
        close_mcp_servers()

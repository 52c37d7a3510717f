"""Secrets never reach an error, event, store or output, even when the server echoes them back."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from agio_notebook import Agent, StepRunner
from agio_notebook.core import RunStatus, scrub
from agio_notebook.models import OpenAIModel
from agio_notebook.storage import open_repository

from kernel_support import FAKE_KEY, KERNEL_NAME
from openai_sse_server import FakeOpenAIServer, Stream, chunk, text_chunks

KEY = "sk-proj-ECHOED-0123456789abcdefXYZ"


def echo_401(request: dict) -> tuple[int, dict]:
    """What OpenAI and many proxies answer to a wrong key: the key itself, quoted back."""
    sent = request["headers"]["authorization"].removeprefix("Bearer ")
    return 401, {"error": {"message": f"Incorrect API key provided: {sent}. You can find your API key at "
                                      "https://platform.openai.com/account/api-keys.",
                           "type": "invalid_request_error", "code": "invalid_api_key"}}


def echo_header_500(request: dict) -> tuple[int, dict]:
    return 500, {"error": {"message": f"upstream rejected headers {{'Authorization': "
                                      f"'{request['headers']['authorization']}'}}"}}


def leaks(text: str, key: str) -> list[str]:
    """Any recognisable part of the key: the whole, or the distinctive middle a server may half-mask."""
    return [part for part in (key, key[8:-4], key[-10:]) if part in text]


def store_text(root: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("reply", [echo_401, echo_header_500], ids=["401-echoes-key", "500-echoes-header"])
def test_echoed_key_reaches_no_error_event_or_store_file(tmp_path, reply):
    with FakeOpenAIServer() as server:
        server.script = [reply] * 3
        repo = open_repository(str(tmp_path / "store"))
        model = OpenAIModel("fake-model", base_url=server.base_url, api_key=KEY, max_retries=2)
        runner = StepRunner(Agent(model=model), repository=repo)

        async def go():
            return [e async for e in runner.run_stream(None, "hi")]
        events = asyncio.run(go())
    assert KEY in json.dumps(server.requests[0]["headers"])  # the server really had it to echo
    final = events[-1].payload["run"]
    assert final["status"] == RunStatus.FAILED.value
    status = "401" if reply is echo_401 else "500"
    assert f"returned HTTP {status}" in final["error"] and "***" in final["error"]
    assert leaks(json.dumps([e.to_dict() for e in events]), KEY) == []
    assert leaks(store_text(tmp_path / "store"), KEY) == []
    assert leaks(json.dumps(repo.get_run(final["id"]).to_dict()), KEY) == []


def test_partly_cut_off_stream_error_is_scrubbed_on_the_failed_step(tmp_path):
    with FakeOpenAIServer() as server:
        server.script = [Stream([chunk({"content": "Working on it"}), chunk({}, finish="stop")], cut_after=1)]
        repo = open_repository(str(tmp_path / "store"))
        model = OpenAIModel("fake-model", base_url=server.base_url.replace("http://", f"http://u:{KEY}@"),
                            api_key=KEY, max_retries=0)
        result = asyncio.run(StepRunner(Agent(model=model), repository=repo).run(None, "hi"))
    assert result.status is RunStatus.FAILED and "lost mid-stream" in result.error
    failed = repo.get_steps(result.session_id)[-1]
    assert failed.content == "Working on it" and "lost mid-stream" in failed.error
    assert leaks(store_text(tmp_path / "store"), KEY) == [] and leaks(repr(model), KEY) == []


def test_tool_and_model_errors_are_scrubbed_too(tmp_path):
    """Not only the provider's: a tool quoting its request headers, a model failing after some text."""
    from agio_notebook import FunctionModel, tool
    from agio_notebook.core import ModelError
    from agio_notebook.models import Finish, ToolCallDelta

    @tool
    def fetch(url: str) -> str:
        """Fetch a page."""
        raise RuntimeError(f"GET {url} failed; sent headers {{'Authorization': 'Bearer {KEY}'}}")

    turns = iter(["tool", "fail"])

    async def model(messages, tools):
        if next(turns) == "tool":
            yield ToolCallDelta(0, "c1", "fetch", '{"url": "http://127.0.0.1:9/x"}')
            yield Finish("tool_calls")
            return
        yield "Half an answer"
        raise ModelError(f"upstream said: Authorization: Bearer {KEY}")

    repo = open_repository(str(tmp_path / "store"))
    result = asyncio.run(StepRunner(Agent(model=FunctionModel(model), tools=[fetch]), repository=repo).run(None, "go"))
    assert result.status is RunStatus.FAILED
    steps = repo.get_steps(result.session_id)
    tool_step = [s for s in steps if s.tool_call_id][0]
    assert tool_step.status == "error" and "Bearer ***" in tool_step.error and "Bearer ***" in tool_step.content
    assert steps[-1].content == "Half an answer" and steps[-1].error == "upstream said: Authorization: Bearer ***"
    assert leaks(json.dumps([e.to_dict() for e in result.events]), KEY) == []
    assert leaks(store_text(tmp_path / "store"), KEY) == []


def test_scrub_masks_credential_shapes_and_keeps_the_rest():
    text = ("401 for sk-abcdef123456 with Authorization: Bearer tok_0123456789abc at "
            "http://me:pw1234@host:8000/v1 api_key=zzz999yyy; 'x-api-key': 'k-777777'")
    out = scrub(text, ["tok_0123456789abc"])
    for secret in ("sk-abcdef123456", "tok_0123456789abc", "pw1234", "zzz999yyy", "k-777777"):
        assert secret not in out
    assert out.startswith("401 for sk-*** with Authorization: Bearer *** at http://***@host:8000/v1")
    assert scrub("nothing secret: 12 tokens") == "nothing secret: 12 tokens"


def test_prose_that_names_a_scheme_is_never_taken_for_a_credential(tmp_path):
    """"Basic arithmetic", "bearer bonds": masked text must not shred ordinary words, in what is shown and in
    an export, while a bare token after "Bearer" or "Basic" still goes."""
    from agio_notebook import Agent, ScriptedModel, StepRunner
    from agio_notebook.core import mask
    from agio_notebook.storage import open_repository
    from agio_notebook.storage.export import export_jsonl, load_export

    prose = ["Basic arithmetic says 3", "Bearer bonds and basic understanding", "basic authentication explained",
             "Basic Understanding of well-known things", "Basic JavaScript tutorial", "a basic PostgreSQL setup",
             "Basic McDonalds menu", "Basic 2023-2024 figures", "Bearer ACTION_COMPLETED events"]
    assert mask(prose) == prose
    assert mask("Basic dXNlcjpwYXNz") == "Basic ***"  # base64 of user:pass: a capital inside, no digit
    assert mask("send Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0 now") == "send Bearer *** now"
    assert mask("Basic dXNlcjpwYXNzd29yZDEyMw==") == "Basic ***"
    repo = open_repository(str(tmp_path / "store"))
    result = StepRunner(Agent(model=ScriptedModel([prose[0]])), repository=repo).run_sync(None, "Basic arithmetic?")
    export_jsonl(repo, tmp_path / "out.jsonl")
    loaded = load_export(tmp_path / "out.jsonl")
    assert loaded.get_run(result.run_id).query == "Basic arithmetic?"
    assert [s.content for s in loaded.get_steps(result.session_id)] == ["Basic arithmetic?", prose[0]]
    repo.close()


def test_a_basic_credential_is_masked_wherever_it_sits_and_however_it_was_encoded():
    """Basic's credential is base64 of user:password: masked at the end of a sentence (the full stop is not
    base64), in brackets, unpadded, with a Latin-1 password (as older clients send it) or a tab in it; the
    words of this project's own docs and code after "Basic" stay as they are."""
    import base64
    import re

    from agio_notebook.core import mask

    def basic(pair: bytes) -> str:
        return base64.b64encode(pair).decode()

    assert mask("server rejected Basic dXNlcjpwYXNzd29yZA==.") == "server rejected Basic ***."
    assert mask("rejected credentials (Basic dXNlcjpwYXNzd29yZA==).") == "rejected credentials (Basic ***)."
    assert mask("header was Basic dXNlcjpwYXNzd29yZA") == "header was Basic ***"
    assert mask(f"got Basic {basic('user:pässwort'.encode('latin-1'))}, refused") == "got Basic ***, refused"
    assert mask(f"got Basic {basic(b'admin:s3cr3t' + bytes([9]) + b'x')}!") == "got Basic ***!"
    assert mask(f"got Basic {basic(b':personal-access-token')}") == "got Basic ***"  # a token as the password
    assert mask("Basic -----BEGIN, Basic ==abc=defgh") == "Basic -----BEGIN, Basic ==abc=defgh"
    root = Path(__file__).resolve().parent.parent
    words = set()
    for path in [*root.glob("docs/*.md"), root / "README.md", *root.glob("agio_notebook/**/*.py")]:
        words.update(re.findall(r"\b[A-Za-z][a-zA-Z]{5,}\b", path.read_text()))
    assert len(words) > 3000
    assert [w for w in sorted(words) if mask(f"Basic {w}") != f"Basic {w}"] == []


def test_notebook_with_an_echoing_server_saves_no_key(kernelspec_dir, tmp_path):
    """A real kernel runs %%agio cells against the echoing server; the saved notebook and store stay clean."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext agio_notebook"),
                nbformat.v4.new_code_cell('%%agio --settings \'{"temperature": 0, "max_tokens": 50}\'\nhello'),
                nbformat.v4.new_code_cell("%%agio\nand now?"),
                nbformat.v4.new_code_cell("%%agio --settings '{\"temprature\": 0}'\nmisspelt"),
                nbformat.v4.new_code_cell("%%agio --settings '{oops'\nbad json")]
    with FakeOpenAIServer() as server:
        server.script = [text_chunks("Hi there.", usage={"prompt_tokens": 3, "completion_tokens": 3,
                                                         "total_tokens": 6}), echo_401]
        env = {"AGIO_STORE": str(tmp_path / "store"), "OPENAI_API_KEY": FAKE_KEY,
               "OPENAI_BASE_URL": server.base_url, "AGIO_MODEL": "fake-model"}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            NotebookClient(nb, kernel_name=KERNEL_NAME, timeout=120, allow_errors=True,
                           resources={"metadata": {"path": str(tmp_path)}}).execute()
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    path = tmp_path / "echo.ipynb"
    nbformat.write(nb, path)
    assert len(server.requests) == 2 and FAKE_KEY in server.requests[1]["headers"]["authorization"]
    first = server.requests[0]["body"]
    assert first["temperature"] == 0 and first["max_tokens"] == 50  # the cell's settings were sent
    assert "temperature" not in server.requests[1]["body"]  # and only for that cell
    text = path.read_text()
    assert leaks(text, FAKE_KEY) == [] and leaks(store_text(tmp_path / "store"), FAKE_KEY) == []
    failed_cell = json.dumps(nb.cells[2].outputs)
    assert "returned HTTP 401" in failed_cell and "***" in failed_cell
    for cell, needle in ((nb.cells[3], "unknown setting(s) 'temprature'"), (nb.cells[4], "not a JSON object")):
        # IPython shows a UsageError as one line on stderr, no traceback
        assert [o.output_type for o in cell.outputs] == ["stream"] and cell.outputs[0].name == "stderr"
        line = cell.outputs[0].text
        assert line.startswith("UsageError: %agio: --settings: ") and needle in line and line.count("\n") == 1


def test_live_output_of_a_failing_cell_carries_no_key(tmp_path):
    """Every iopub message of the cell (the live widget's comm updates, the final transcript) is clean."""
    from kernel_support import Kernel, install_kernelspec

    install_kernelspec(tmp_path / "jupyter")
    partial = Stream([chunk({"content": "Started, "}), chunk({"content": "then"}), chunk({}, finish="stop")],
                     cut_after=2)
    with FakeOpenAIServer() as server:
        server.script = [partial, echo_401]
        kernel = Kernel(tmp_path, env={"OPENAI_API_KEY": FAKE_KEY, "OPENAI_BASE_URL": server.base_url,
                                       "AGIO_MODEL": "fake-model"})
        try:
            kernel.execute("%load_ext agio_notebook")
            cut = kernel.execute("%%agio\nfirst")
            denied = kernel.execute("%%agio\nsecond")
        finally:
            kernel.close()
    assert FAKE_KEY in server.requests[1]["headers"]["authorization"]
    live = json.dumps(cut["messages"] + denied["messages"], default=str)
    assert "comm_msg" in live and "lost mid-stream" in live and "Started, then" in live
    assert "returned HTTP 401" in live
    assert leaks(live, FAKE_KEY) == []

"""A tutorial never hides a failed tool: with every tool call failing, each tutorial stops at an assert.

Each tutorial runs (as nbval runs it, in a real kernel, from notebooks/) after a first cell that makes
every tool call return an error, the way a broken sandbox, a missing file or a dead MCP server would.
The scripted agents would still answer; the tutorial must not go on as if the tool had worked.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from kernel_support import KERNEL_NAME

ROOT = Path(__file__).resolve().parent.parent
# every tutorial whose agents call tools (openai_endpoint needs a key to call any; code_interpreter is tested
# with its sandbox)
WITH_TOOLS = ["compare_and_choose", "evaluate_a_prompt", "function_model", "learn_from_feedback", "mcp_tools",
              "metrics_and_plots", "quickstart", "retry_and_fork"]

BREAK_TOOLS = """import time
from agio_notebook.execution.tool_executor import ToolExecutor

async def _broken(self, call, *_context):
    return self._fail(call, "exception", "RuntimeError: the tool broke", time.perf_counter())

ToolExecutor._execute = _broken  # every tool call now fails, as a broken tool would"""

pytestmark = pytest.mark.timeout(600)


@pytest.mark.parametrize("name", WITH_TOOLS)
def test_a_failed_tool_stops_the_tutorial(name, kernelspec_dir, tmp_path, monkeypatch):
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(BREAK_TOOLS))
    monkeypatch.setenv("AGIO_STORE", str(tmp_path / "store"))
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL"):
        monkeypatch.delenv(key, raising=False)
    client = NotebookClient(nb, kernel_name=KERNEL_NAME, timeout=300,
                            resources={"metadata": {"path": str(ROOT / "notebooks")}})
    with pytest.raises(CellExecutionError) as failed:
        client.execute()
    assert failed.value.ename == "AssertionError", str(failed.value)[-600:]
    assert "failed" in failed.value.evalue or "went wrong" in failed.value.evalue

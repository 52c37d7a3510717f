"""The default offline model: deterministic, no network, enough to show the whole loop.

It calls a tool when the user writes the call, e.g. ``add(a=2, b=3)`` or ``now()``, then reports what
the tool returned; otherwise it echoes the question and lists the tools it knows. Notebooks and the
terminal demo work without any key.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from .scripted import FunctionModel, Reply, ToolCallSpec

_CALL = re.compile(r"\b([A-Za-z_]\w*)\(([^()]*)\)")


def _parse_kwargs(text: str) -> dict[str, Any] | None:
    try:
        node = ast.parse(f"f({text})", mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Call) or node.args:
        return None
    try:
        return {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
    except ValueError:
        return None


def offline_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    last = messages[-1] if messages else {"role": "user", "content": ""}
    if last["role"] == "tool":
        results = []
        for m in reversed(messages):
            if m["role"] != "tool":
                break
            results.append(f"{m.get('name') or 'tool'} returned {m.get('content')}")
        return Reply(text="The tool " + "; ".join(reversed(results)) + ".")
    question = (last.get("content") or "").strip()
    names = {t["function"]["name"] for t in tools}
    calls = [ToolCallSpec(name, args) for name, raw in _CALL.findall(question)
             if name in names and (args := _parse_kwargs(raw)) is not None]
    if calls:
        return Reply(tool_calls=calls)
    return Reply(text=offline_answer(question, sorted(names)))


def offline_answer(question: str, tools: list[str]) -> str:
    """What the stand-in says: what it is, and how to give the cell a real model or a script."""
    tooling = (f" It calls one of this cell's tools ({', '.join(tools)}) when your question writes the call out, "
               f"e.g. `{tools[0]}(arg=value)`." if tools else "")
    return (f"This is agio's offline stand-in model, not a language model: it only repeats your question "
            f"({question!r}).{tooling} For real answers, set OPENAI_API_KEY (and OPENAI_BASE_URL for another "
            "OpenAI-compatible server) or run `%agio config --model NAME --base-url URL`; for fixed answers, "
            "make an agent with a script, `bot = Agent(model=ScriptedModel([\"Hi!\"]))`, and run `%%agio bot`.")


def offline_model() -> FunctionModel:
    return FunctionModel(offline_reply, name="offline", chunk_size=2)

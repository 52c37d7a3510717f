"""A real ipykernel for tests, on this interpreter, and helpers that read its iopub messages."""

from __future__ import annotations

import json
import os
import queue
import sys
import time
from pathlib import Path
from typing import Any

from jupyter_client.manager import start_new_kernel

KERNEL_NAME = "agio-test"
FAKE_KEY = "sk-agio-test-DO-NOT-LEAK-0123456789"  # set in kernels under test; must never be saved


def install_kernelspec(root: Path) -> None:
    """A kernelspec for this interpreter, found through JUPYTER_PATH (no user-level install needed)."""
    spec = root / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "agio test", "language": "python"}))
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(root), os.environ.get("JUPYTER_PATH")]))


class Kernel:
    def __init__(self, workdir: Path, env: dict[str, str] | None = None):
        kernel_env = {**os.environ, "AGIO_STORE": str(workdir / "store"), **(env or {})}
        self.km, self.kc = start_new_kernel(kernel_name=KERNEL_NAME, cwd=str(workdir), env=kernel_env)

    def execute(self, code: str, timeout: float = 60) -> dict[str, Any]:
        """Run code; return the reply and every iopub message up to the cell's idle status."""
        msg_id = self.kc.execute(code)

        def idle(msg: dict[str, Any]) -> bool:
            return (msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle"
                    and msg["parent_header"].get("msg_id") == msg_id)

        messages = self.drain(timeout, stop=idle)
        assert messages and idle(messages[-1]), f"cell did not finish in {timeout}s: {code[:80]!r}"
        return {"msg_id": msg_id, "reply": self.reply_to(msg_id), "messages": messages, "idle_at": messages[-1]["_t"]}

    def silent(self, code: str, timeout: float = 60) -> dict[str, Any]:
        """Run code as a frontend does behind the scenes (``silent``: no outputs shown, no history); its reply."""
        return self.reply_to(self.kc.execute(code, silent=True, store_history=False), timeout)

    def reply_to(self, msg_id: str, timeout: float = 30) -> dict[str, Any]:
        """The shell reply to ``msg_id``, skipping others (start-up can leave extra kernel_info replies)."""
        deadline = time.time() + timeout
        while True:
            reply = self.kc.get_shell_msg(timeout=max(0.1, deadline - time.time()))
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply

    def drain(self, seconds: float, stop=None) -> list[dict[str, Any]]:
        """Collect iopub messages for a while (e.g. after a background cell returned)."""
        out: list[dict[str, Any]] = []
        deadline = time.time() + seconds
        while time.time() < deadline:
            try:
                msg = self.kc.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                continue
            msg["_t"] = time.time()
            out.append(msg)
            if stop is not None and stop(msg):
                break
        return out

    def value(self, expr: str) -> Any:
        """Evaluate ``expr`` in the kernel and return it (through JSON)."""
        res = self.execute(f"import json as _j; print(_j.dumps({expr}))")
        text = "".join(m["content"]["text"] for m in res["messages"] if m["msg_type"] == "stream")
        return json.loads(text.strip().splitlines()[-1])

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def offline_kernel(tmp_path_factory, name: str, setup: str, env: dict[str, str] | None = None):
    """A module's kernel: offline (no endpoint in its env, plus ``env``), with ``setup`` already executed."""
    root = tmp_path_factory.mktemp(name)
    install_kernelspec(root / "jupyter")
    k = Kernel(root, env={"OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "AGIO_MODEL": "", **(env or {})})
    k.execute(setup)
    return k


def of_type(messages: list[dict[str, Any]], *types: str) -> list[dict[str, Any]]:
    return [m for m in messages if m["msg_type"] in types]


def stream_text(messages: list[dict], name: str) -> str:
    """What the cell wrote to ``name`` (stdout, stderr), joined: the kernel sends a line in pieces when
    its flush timer fires between the text and its newline (seen on a loaded machine)."""
    return "".join(m["content"]["text"] for m in of_type(messages, "stream") if m["content"]["name"] == name)


def placed(messages: list[dict[str, Any]]) -> set[str]:
    """comm ids of widgets a frontend can show: held by a box (``IPY_MODEL_<id>`` among its children) or
    displayed as an output. A person clicks a widget only once it is shown, and by then the kernel
    listens to it; ipywidgets hooks a widget's messages only after its comm_open went out, so a click
    sent on seeing comm_open alone can fall in between and be dropped (seen on a loaded machine)."""
    ids = set()
    for m in messages:
        data = m["content"].get("data")
        if not isinstance(data, dict):
            continue
        if m["msg_type"] in ("comm_open", "comm_msg"):
            ids.update(ref.removeprefix("IPY_MODEL_") for ref in (data.get("state") or {}).get("children") or ())
        elif m["msg_type"] in ("display_data", "update_display_data", "execute_result"):
            view = data.get("application/vnd.jupyter.widget-view+json")
            if isinstance(view, dict) and "model_id" in view:
                ids.add(view["model_id"])
    return ids


def widget_ids(messages: list[dict[str, Any]], **state: Any) -> list[str]:
    """comm ids of shown widgets (``placed``) opened with the given state values (e.g. description='Approve')."""
    shown = placed(messages)
    ids = []
    for m in of_type(messages, "comm_open"):
        s = m["content"]["data"].get("state", {})
        if all(s.get(k) == v for k, v in state.items()) and m["content"]["comm_id"] in shown:
            ids.append(m["content"]["comm_id"])
    return ids


def collect_until(kernel: Any, seen: list[dict[str, Any]], predicate: Any, timeout: float = 60) -> bool:
    """Read iopub into ``seen`` until ``predicate(seen)`` holds (a generous limit, not a fixed wait)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate(seen):
            return True
        seen.extend(kernel.drain(0.3, stop=lambda m: True))
    return bool(predicate(seen))


def shown_widgets(kernel: Any, messages: list[dict[str, Any]], timeout: float = 60, **state: Any) -> list[str]:
    """Read iopub into ``messages`` until a widget with ``state`` is shown (``placed``); their comm ids."""
    collect_until(kernel, messages, lambda seen: widget_ids(seen, **state), timeout)
    return widget_ids(messages, **state)

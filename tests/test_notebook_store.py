"""`%agio store ...` and an interrupted run, in a real ipykernel."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_support import of_type, offline_kernel, stream_text

ENGINE = [sys.executable, str(Path(__file__).with_name("engine_writer.py"))]

SETUP = r'''
%load_ext agio_notebook
def _agio_repo():
    return get_ipython().magics_manager.registry["AgioMagics"].controller.repository
'''


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = offline_kernel(tmp_path_factory, "store-kernel", SETUP)
    yield k
    k.close()


def out(res) -> str:
    return "".join(m["content"]["text"] for m in of_type(res["messages"], "stream"))


def plain(res) -> str:
    return "".join(m["content"]["data"].get("text/plain", "")
                   for m in of_type(res["messages"], "execute_result", "display_data"))


def error_of(res) -> dict:
    """A UsageError: the reply names it, and stderr shows exactly its one line."""
    reply = res["reply"]["content"]
    assert reply["status"] == "error", reply
    assert stream_text(res["messages"], "stderr") == f"UsageError: {reply['evalue']}\n"
    return reply


def test_store_commands_and_an_interrupted_run(kernel):
    root = Path(kernel.value("str(_agio_repo().root.absolute())"))
    done = subprocess.run([*ENGINE, str(root), "ok", "loop", "2"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    killed = subprocess.run([*ENGINE, str(root), "crashed", "die:tool", "1"], capture_output=True, text=True,
                            timeout=60)
    assert killed.returncode == -signal.SIGKILL
    run_id = killed.stdout.split()[1]

    runs = kernel.execute("%agio runs")
    assert "interrupted" in plain(runs)  # found when the kernel reads the store, nobody asked
    replay = kernel.execute(f"%agio replay {run_id}")
    assert "[interrupted]" in plain(replay)

    stats = kernel.execute("%agio store stats")
    assert out(stats).splitlines()[0] == "sessions 2" and "interrupted 1" in out(stats)
    assert "0 problem(s) found" in out(kernel.execute("%agio store verify"))

    (root / "sessions" / "ok.jsonl").open("ab").write(b"garbage\n")
    verify = kernel.execute("%agio store verify")
    assert f"damaged: store file {root / 'sessions' / 'ok.jsonl'}" in out(verify)
    assert "repaired ok.jsonl" in out(kernel.execute("%agio store repair"))
    assert "0 problem(s) found" in out(kernel.execute("%agio store verify"))

    export = kernel.execute(f"%agio store export {root.parent / 'out.jsonl'}")
    assert "records to" in out(export) and (root.parent / "out.jsonl").exists()
    assert "removed 1 sessions" in out(kernel.execute("%agio store delete --session crashed"))
    assert out(kernel.execute("%agio store compact")).strip() == "compacted"  # the same lines as `agio store compact`

    bad = kernel.execute("%agio store prune")
    err = error_of(bad)
    assert err["ename"] == "UsageError" and "needs --superseded and/or --older-than" in err["evalue"]
    assert "\n" not in err["evalue"]
    bad = kernel.execute("%agio store delete --run nope")
    assert error_of(bad)["evalue"].startswith("%agio: no run 'nope' in the store")


def test_a_cell_in_a_session_another_process_runs_gets_one_line_or_waits(kernel, tmp_path):
    root = Path(kernel.value("str(_agio_repo().root.absolute())"))
    first = subprocess.run([*ENGINE, str(root), "shared", "loop", "1"], capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    release = tmp_path / "release"  # the holder's tools wait for it: a run in progress, however busy the machine
    holder = subprocess.Popen([*ENGINE, str(root), "shared", f"hold:{release}", "8", "120"], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().startswith("run ")
        busy = kernel.execute("%%agio --session shared\nhello")
        stderr = stream_text(busy["messages"], "stderr")
        assert stderr.count("\n") == 1 and stderr.startswith(
            f"agio: session shared is in use by a run in process {holder.pid} on ")
        release.touch()
        waited = kernel.execute("%%agio --session shared --wait 120\nhello again", timeout=180)
    finally:
        holder.wait(timeout=120)
    assert holder.returncode == 0  # the other process's runs all completed too (it waits its turn as well)
    assert "[completed]" in "".join(m["content"]["data"].get("text/plain", "")
                                    for m in of_type(waited["messages"], "update_display_data"))
    steps = kernel.value("[s.sequence for s in _agio_repo().get_steps('shared')]")
    assert steps == list(range(1, len(steps) + 1))  # one run after another: no duplicate sequences

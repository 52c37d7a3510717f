"""The terminal demo and replay, as a user runs them."""

from __future__ import annotations

import re
import subprocess
import sys


def agio(*args, store):
    return subprocess.run([sys.executable, "-m", "agio_notebook", "--store", str(store), *args],
                          capture_output=True, text=True, timeout=60)


def test_demo_prints_the_event_stream_and_replay_shows_the_same_run(tmp_path):
    store = tmp_path / "store"
    demo = agio("demo", store=store)
    assert demo.returncode == 0, demo.stderr
    out = demo.stdout
    assert out.startswith("▶ run ")
    assert "⚙ weather({\"city\": \"Paris\"})" in out and "✓ add → 35.0" in out
    assert "■ completed — 7 steps, 3 model calls, 3 tool calls (0 errors)" in out
    run_id = re.search(r"replay ([0-9a-f]{32})", out).group(1)
    replay = agio("replay", run_id, store=store)
    assert replay.returncode == 0, replay.stderr
    assert replay.stdout.splitlines()[0] == out.splitlines()[0]
    assert "■ completed — 7 steps" in replay.stdout


def test_unknown_run_is_one_clear_line(tmp_path):
    res = agio("replay", "nope", store=tmp_path / "store")
    assert res.returncode == 1
    assert res.stderr.strip().startswith("agio: no run 'nope' in the store at ") and res.stderr.count("\n") == 1

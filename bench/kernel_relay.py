"""How long a kernel's messages take through a real JupyterLab to a websocket client, with Nagle's
algorithm on (jupyter_server's default) and off (the ``agio_notebook_server`` extension).

A cell sends what a step-mode run sends a browser: a burst of small messages (the run's live view),
10 ms of work, then one more message (the pause view), several times over. Each message's delay is
its arrival at the client minus the time the kernel made it (its header's date; one machine, one
clock). The two servers are started alternately, ``--rounds`` times each, in the same run.

    .venv/bin/python bench/kernel_relay.py [--rounds 3] [--bursts 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from kernel_support import install_kernelspec  # noqa: E402
from lab_support import kernel_iopub, running_lab  # noqa: E402

CELL = """
import time
from IPython.display import HTML, display
for burst in range({bursts}):
    shown = display(HTML('live view'), display_id=True)
    for i in range(10):
        shown.update(HTML(f'<b>part {{i}}</b>'))
    time.sleep(0.01)
    shown.update(HTML('pause'))  # the message a person waits for
    time.sleep(0.2)
"""
OFF = "--ServerApp.jpserver_extensions=agio_notebook_server=False"


async def delays(base: str, token: str, bursts: int) -> tuple[list[float], list[float]]:
    """(every message's delay, the delay of each burst's last message), in ms."""
    every, last = [], []
    async for arrived, message in kernel_iopub(base, token, CELL.format(bursts=bursts)):
        if message["msg_type"] in ("display_data", "update_display_data"):
            made = datetime.fromisoformat(message["header"]["date"].replace("Z", "+00:00")).timestamp()
            every.append((arrived - made) * 1000)
            if message["content"]["data"].get("text/html") == "pause":
                last.append(every[-1])
    return every, last


def measure(nagle_off: bool, bursts: int) -> tuple[list[float], list[float]]:
    root = Path(tempfile.mkdtemp(prefix="relay-"))
    install_kernelspec(root / "jupyter")
    env = {**os.environ, "AGIO_STORE": str(root / "store")}
    with running_lab(root, env, *(() if nagle_off else (OFF,))) as (base, token):
        return asyncio.run(delays(base, token, bursts))


def quantiles(values: list[float]) -> str:
    values = sorted(values)
    p90 = values[int(0.9 * (len(values) - 1))]
    return f"{statistics.median(values):7.1f} {p90:7.1f} {values[-1]:7.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bursts", type=int, default=20)
    args = ap.parse_args()
    results: dict[bool, tuple[list[float], list[float]]] = {False: ([], []), True: ([], [])}
    for _ in range(args.rounds):
        for nagle_off in (False, True):
            every, last = measure(nagle_off, args.bursts)
            results[nagle_off][0].extend(every)
            results[nagle_off][1].extend(last)
    print(f"kernel -> JupyterLab -> websocket client; {args.rounds} rounds x {args.bursts} bursts of 11 messages")
    print(f"{'server':34s} {'messages':>8s} | {'every message ms: p50     p90     max':>38s} | "
          f"{'last of a burst ms: p50     p90     max':>39s}")
    for nagle_off, label in ((False, "jupyter_server as it ships (Nagle)"), (True, "with agio_notebook_server")):
        every, last = results[nagle_off]
        print(f"{label:34s} {len(every):8d} | {'':14s}{quantiles(every)} | {'':16s}{quantiles(last)}")
    on, off = results[False][1], results[True][1]
    print(f"last of a burst, p90 ratio (Nagle / without): "
          f"{sorted(on)[int(0.9 * (len(on) - 1))] / max(sorted(off)[int(0.9 * (len(off) - 1))], 0.01):.1f}x")


if __name__ == "__main__":
    main()

"""JupyterLab's browser tests under CPU load, with the project's server extension and without it.

In loaded suite runs JupyterLab twice left queued cells unrun or started a second kernel. The one thing
the project changes in the server is the kernel websocket's connection class (``agio_notebook_server``
turns Nagle's algorithm off for it). This runs the same browser tests, under ``--burners`` CPU-bound
processes, alternately with the extension enabled (as installed) and disabled (a private Jupyter
config dir with ``{"ServerApp": {"jpserver_extensions": {"agio_notebook_server": false}}}``, what
``jupyter server extension disable --user`` writes, put first on ``JUPYTER_CONFIG_PATH``), ``--runs``
times each, and prints per mode: runs, passes, failures and what failed, the kernels each lab started
(from the server's log: a second kernel for one notebook shows there), whether the extension was
loaded (also from the log, so a mode is checked, not assumed), wall time and the load average.

    .venv/bin/python bench/lab_extension_under_load.py [--runs 3] [--burners 2] [TEST_FILE ...]

Each pytest run has a private ``TMPDIR`` and ``--basetemp``; the output of every failed run is kept in
``test-output/lab_extension_under_load/``, the table in ``test-output/lab_extension_under_load.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from suite_under_load import LoadSampler, summary

ROOT = Path(__file__).resolve().parent.parent
TESTS = ["tests/test_live_browser.py", "tests/test_transcript_controls_browser.py", "tests/test_debugger_browser.py"]
OUT = ROOT / "test-output" / "lab_extension_under_load"
LOADED = "agio_notebook_server | extension was successfully loaded"
STARTED = "jupyterlab | extension was successfully linked"  # once per server start
DISABLED = {"ServerApp": {"jpserver_extensions": {"agio_notebook_server": False}}}


def disabled_config(work: Path) -> Path:
    """A config dir that disables the extension, checked the way the server reads its extension config
    (``jupyter server extension list`` shows only the user, sys-prefix and system dirs); each lab's log
    then says whether it loaded the extension."""
    config = work / "extension-off"
    config.mkdir()
    (config / "jupyter_server_config.json").write_text(json.dumps(DISABLED))
    probe = ("from jupyter_core.paths import jupyter_config_path\n"
             "from jupyter_server.extension.config import ExtensionConfigManager\n"
             "print(ExtensionConfigManager(read_config_path=jupyter_config_path()).get_jpserver_extensions()"
             ".get('agio_notebook_server'))")
    for path, expected in ((config, "False"), (None, "True")):
        env = {k: v for k, v in os.environ.items() if k != "JUPYTER_CONFIG_PATH"}
        if path is not None:
            env["JUPYTER_CONFIG_PATH"] = str(path)
        seen = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env).stdout.strip()
        if seen != expected:
            raise SystemExit(f"agio_notebook_server enabled={seen!r} with JUPYTER_CONFIG_PATH={path}, not {expected}")
    return config


def lab_logs(basetemp: Path, keep_as: str) -> list[dict[str, int]]:
    """Per JupyterLab the tests started: kernels started and restarted, and whether the extension loaded.
    A test that starts a second server on the same folder appends to the same log: split at each start.
    Each of these tests opens one notebook per server: a log with a second kernel start is kept."""
    found = []
    for i, log in enumerate(sorted(basetemp.rglob("jupyter-lab.log"))):
        for text in log.read_text(errors="replace").split(STARTED)[1:]:
            found.append({"kernels": text.count("Kernel started:"), "restarts": text.count("Kernel restarted:"),
                          "extension": int(LOADED in text)})
            if found[-1]["kernels"] > 1:
                OUT.mkdir(parents=True, exist_ok=True)
                shutil.copy(log, OUT / f"{keep_as}-{i}-{log.parent.name}.jupyter-lab.log")
    return found


def failures(output: str) -> list[str]:
    """The failed tests, each with the first line that says why."""
    named = re.findall(r"^FAILED (\S+)(?: - (.*))?$", output, re.M)
    return [f"{test.split('::')[-1]}: {(why or '').strip()[:160]}" for test, why in named]


def run_once(test: str, mode: str, round_: int, work: Path, config: Path) -> dict[str, object]:
    basetemp = work / f"{mode}-{round_}-{Path(test).stem}"
    tmp = work / "tmp"
    env = {**os.environ, "TMPDIR": str(tmp)}
    if mode == "off":
        env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(filter(None, [str(config), env.get("JUPYTER_CONFIG_PATH")]))
    with LoadSampler() as load:
        t0 = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rf",
                               f"--basetemp={basetemp}", test], cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.monotonic() - t0
    passed, failed = summary(done.stdout)
    labs = lab_logs(basetemp, f"{mode}-{round_}-{Path(test).stem}")
    row = {"mode": mode, "round": round_, "test": Path(test).stem, "passed": passed, "failed": failed,
           "exit": done.returncode, "wall_s": round(wall, 1), "load": load.samples or [os.getloadavg()[0]],
           "labs": labs, "failures": failures(done.stdout)}
    if failed or done.returncode:
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / f"{mode}-{round_}-{Path(test).stem}.log").write_text(done.stdout[-30000:] + done.stderr[-5000:])
    shutil.rmtree(basetemp, ignore_errors=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="runs of each test file in each mode")
    ap.add_argument("--burners", type=int, default=2, help="CPU-bound processes beside the tests (keep to 1-2 on "
                                                            "a shared machine)")
    ap.add_argument("tests", nargs="*", default=TESTS)
    args = ap.parse_args()

    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    idle_load = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="agio-lab-extension-"))
    burners: list[subprocess.Popen[bytes]] = []
    rows: list[dict[str, object]] = []
    try:
        (work / "tmp").mkdir(mode=0o700)
        config = disabled_config(work)
        burners += [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
                    for _ in range(args.burners)]
        for round_ in range(1, args.runs + 1):
            modes = ("on", "off") if round_ % 2 else ("off", "on")  # neither mode always runs first
            for mode in modes:
                for test in args.tests:
                    row = run_once(test, mode, round_, work, config)
                    rows.append(row)
                    print(f"round {round_} extension {mode:<3} {row['test']:<34} passed {row['passed']} failed "
                          f"{row['failed']} in {row['wall_s']:.0f}s, labs {row['labs']}", flush=True)
                    for line in row["failures"]:  # type: ignore[attr-defined]
                        print(f"      {line}", flush=True)
    finally:
        for p in burners:
            os.killpg(p.pid, signal.SIGKILL)  # each burner leads a session of its own
            p.wait()
        shutil.rmtree(work, ignore_errors=True)

    if not rows:
        return
    OUT.parent.mkdir(exist_ok=True)
    (OUT.parent / "lab_extension_under_load.json").write_text(json.dumps(
        {"commit": commit, "burners": args.burners, "cores": os.cpu_count(), "load_before": idle_load,
         "rows": rows}, indent=1))
    print(f"\n{', '.join(Path(t).stem for t in args.tests)}: {args.runs} runs each per mode at {commit}, beside "
          f"{args.burners} CPU burners on {os.cpu_count()} cores (load average before: {idle_load:.1f})")
    print(f"   {'extension':<10} {'runs':>4} {'tests passed':>12} {'failed':>6} {'failed runs':>11} "
          f"{'ext. loaded':>11} {'kernels/lab':>11} {'wall mean':>9} {'load min/mean/max':>18}")
    for mode in ("on", "off"):
        mine = [r for r in rows if r["mode"] == mode]
        labs = [lab for r in mine for lab in r["labs"]]  # type: ignore[attr-defined]
        loads = [x for r in mine for x in r["load"]]  # type: ignore[attr-defined]
        loaded = sum(lab["extension"] for lab in labs)
        print(f"   {mode:<10} {len(mine):>4} {sum(r['passed'] for r in mine):>12} {sum(r['failed'] for r in mine):>6} "
              f"{sum(1 for r in mine if r['failed'] or r['exit']):>11} {f'{loaded}/{len(labs)}':>11} "
              f"{'-'.join(str(k) for k in sorted({lab['kernels'] for lab in labs})):>11} "
              f"{sum(r['wall_s'] for r in mine) / max(1, len(mine)):>8.0f}s "
              f"{min(loads):>7.1f}/{sum(loads) / len(loads):.1f}/{max(loads):.1f}")
    print("\n   kernels started per lab, by test (on | off):")
    for test in dict.fromkeys(r["test"] for r in rows):
        per = {m: [lab["kernels"] for r in rows if r["test"] == test and r["mode"] == m for lab in r["labs"]]
               for m in ("on", "off")}
        print(f"   {test:<40} {per['on']} | {per['off']}")
    failed = [(r["mode"], r["round"], r["test"], f) for r in rows for f in r["failures"]]  # type: ignore[attr-defined]
    if failed:
        print("\n   failures:")
        for mode, round_, test, line in failed:
            print(f"   extension {mode}, round {round_}, {test}: {line}")


if __name__ == "__main__":
    main()

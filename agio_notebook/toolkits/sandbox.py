"""A persistent Python interpreter in a bubblewrap sandbox, one per session.

Why a small loop of our own (``_repl.py``) and not an ipykernel inside the sandbox: the sandbox has no
network, so a kernel's ZeroMQ sockets would need extra plumbing through the namespace, and importing
ipykernel costs about a second, against a cold-start target of three bare ``python -c pass``.  The
loop gives the same things the tool needs (persistent state, the last value, PNG figures, DataFrame
HTML) over three pipes, starts in tens of milliseconds and answers a warm call in well under 10 ms.

Isolation (``isolation="bubblewrap"``, the default): new user, PID, network, IPC, UTS and cgroup
namespaces; a read-only system (``/usr`` and the interpreter's own prefix, bound read-only; ``/etc``
reduced to what the dynamic loader needs; ``/proc/sys`` read-only; no ``/sys``, no home); the
session's workspace as the only writable directory (plus a small private ``/tmp``); rlimits on CPU,
address space, file size, processes and open files; an environment built from nothing (bwrap itself
is started with an empty environment, so even ``/proc/1/environ`` inside shows no secret).  When the
kernel runs as root, sandboxed code runs as ``nobody`` (uid 65534) outside as well as inside: bwrap
is started through ``setpriv``, after binding any directory ``nobody`` cannot reach (e.g. a Python
under ``/root``) onto a staging directory in a private mount namespace.  A wall-clock timeout kills
bwrap, and with ``--die-with-parent`` the namespace's init, which takes every process inside with it.

The interpreter's directories are derived from the running interpreter (``sys.executable``, the
prefixes, symlinks resolved), and the private ``/tmp`` is mounted before them: bubblewrap applies
mounts in order, so a later tmpfs would hide a virtualenv under ``/tmp``.  Each call's processes are
killed before the call returns (``_repl.end_processes``), and where a cgroup can be made
(``cgroups.py``) it caps the memory and processes of the whole sandbox, not of each process.

``isolation="process"`` is the explicit, weaker opt-in for machines without user namespaces: the same
interpreter, limits, timeout and clean environment, but no namespaces, so files and the network are
reachable.  Nothing runs at that level unless asked for by name.
"""

from __future__ import annotations

import atexit
import json
import marshal
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import new_id
from . import cgroups
from .errors import ActionError, IsolationUnavailable, check_positive
from .workspace import SANDBOX_UID, Workspace, reachable_by, reachable_temp_dir

ISOLATION_LEVELS = ("bubblewrap", "process")
_REPL_SOURCE = (Path(__file__).with_name("_repl.py")).read_text()
_MAX_REPLY = 64 << 20


@dataclass(frozen=True)
class SandboxLimits:
    """Per-interpreter rlimits and per-call caps. ``cpu_seconds`` is the interpreter's lifetime total."""

    timeout: float = 30.0  # wall clock seconds per call; then the whole sandbox is killed
    cpu_seconds: int = 120
    memory_bytes: int = 1 << 30  # address space
    file_size_bytes: int = 100 << 20
    processes: int = 64
    open_files: int = 256
    output_bytes: int = 64_000  # kept of stdout and of stderr per call; the rest is counted, not kept

    def __post_init__(self) -> None:
        check_positive(self)

    def rlimits(self) -> str:
        """As the sandbox loop reads them: ``name=value,...``."""
        limits = {"cpu": self.cpu_seconds, "as": self.memory_bytes, "fsize": self.file_size_bytes,
                  "nproc": self.processes, "nofile": self.open_files, "core": 0}
        return ",".join(f"{k}={int(v)}" for k, v in limits.items())


@dataclass
class ExecResult:
    stdout: str = ""
    stderr: str = ""
    value: str | None = None
    displays: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    truncated_bytes: int = 0
    timed_out: bool = False
    crashed: bool = False
    duration_ms: float = 0.0
    memory_kills: int = 0  # processes the whole-sandbox memory limit killed during the call


def parse_reply(data: bytes) -> dict[str, Any] | None:
    """The sandbox's reply (untrusted: it comes from inside), checked field by field; None if malformed."""
    def text(v: Any) -> str | None:
        if v is None:
            return None
        if not isinstance(v, str):
            raise ValueError("not a string")
        return bytes.fromhex(v).decode("utf-8", errors="replace")

    try:
        raw = json.loads(data)
        displays = []
        for mime, hexed in raw["displays"]:
            if mime in ("image/png", "text/html", "text/plain"):
                displays.append({"mime": mime, "data": text(hexed)})
        return {"value": text(raw["value"]), "error": text(raw["error"]), "displays": displays}
    except (ValueError, TypeError, KeyError):
        return None


class _Capped:
    """Drains one pipe in a thread; keeps at most ``cap`` bytes of the current call, up to its marker."""

    def __init__(self, stream: Any):
        self.stream = stream
        self.cond = threading.Condition()
        self.buf = bytearray()
        self.dropped = 0
        self.cap = 0
        self.marker = b""
        self.done = True
        self.eof = False
        self._tail = b""
        threading.Thread(target=self._pump, daemon=True).start()

    def begin(self, marker: bytes, cap: int) -> None:
        with self.cond:
            self.buf, self.dropped, self.cap, self.marker, self.done, self._tail = bytearray(), 0, cap, marker, False, b""

    def _take(self, data: bytes) -> None:
        room = self.cap - len(self.buf)
        if room > 0:
            self.buf += data[:room]
        self.dropped += max(0, len(data) - max(room, 0))

    def _pump(self) -> None:
        while True:
            chunk = os.read(self.stream.fileno(), 65536)
            with self.cond:
                if not chunk:
                    self.eof = True
                    self.cond.notify_all()
                    return
                if self.done:
                    continue  # output after a call ended (e.g. a background process): not attributed
                window = self._tail + chunk
                at = window.find(self.marker)
                if at >= 0:
                    self._take(window[len(self._tail):at] if at >= len(self._tail) else b"")
                    if at < len(self._tail):  # the marker began in bytes already taken
                        del self.buf[len(self.buf) - (len(self._tail) - at):]
                    self.done = True
                    self.cond.notify_all()
                    continue
                self._take(chunk)
                self._tail = window[-(len(self.marker) - 1):] if len(self.marker) > 1 else b""

    def wait(self, deadline: float) -> None:
        with self.cond:
            while not self.done and not self.eof and time.monotonic() < deadline:
                self.cond.wait(max(0.0, deadline - time.monotonic()))

    def text(self) -> str:
        return bytes(self.buf).decode("utf-8", errors="replace")


def _python_dirs() -> list[str]:
    """Directories the running interpreter needs, derived from it, not assumed: its prefixes (a venv
    and the installation it was made from, a conda-style prefix) and the directory of the executable,
    each as written and with symlinks resolved.  ``/usr`` is bound whole already."""
    exe = os.path.abspath(sys.executable)
    found = {os.path.dirname(exe), os.path.dirname(os.path.realpath(exe))}
    for prefix in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix):
        found |= {os.path.abspath(prefix), os.path.realpath(prefix)}
    return sorted(d for d in found if d not in ("/", "/usr") and not d.startswith("/usr/") and os.path.isdir(d))


_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "fonts", "mime.types")


def bwrap_command(workspace_dir: str, repl_args: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """The bwrap argv and the (source, stage) binds to make first when running as root."""
    bwrap = shutil.which("bwrap") or "/usr/bin/bwrap"
    if not os.access(sys.executable, os.X_OK):
        raise IsolationUnavailable(f"the interpreter {sys.executable} does not exist or cannot be run (was its "
                                   "virtualenv moved or deleted?); restart the kernel from a working Python")
    root = os.geteuid() == 0
    stages: list[tuple[str, str]] = []

    def source(path: str) -> str:
        if not root or reachable_by(path, SANDBOX_UID):
            return path
        try:
            stage_base = Path(reachable_temp_dir()) / "agio-sandbox-stage"
        except ActionError as exc:
            raise IsolationUnavailable(str(exc)) from None
        stage_base.mkdir(mode=0o755, exist_ok=True)
        stage = stage_base / str(len(stages))
        stage.mkdir(mode=0o755, exist_ok=True)
        stages.append((path, str(stage)))
        return str(stage)

    # bubblewrap applies mounts in order: the private /tmp comes first, so the binds made after it
    # (an interpreter or a workspace under /tmp) stay visible instead of being hidden by it
    args = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--hostname", "sandbox", "--size", str(64 << 20), "--tmpfs", "/tmp", "--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for name in _ETC:
        if os.path.exists(f"/etc/{name}"):
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    for d in _python_dirs():
        args += ["--ro-bind", source(d), d]
    args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev",
             "--bind", source(workspace_dir), "/workspace", "--chdir", "/workspace",
             "--clearenv", "--setenv", "HOME", "/tmp", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
             "--setenv", "LANG", "C.UTF-8", "--setenv", "MPLBACKEND", "Agg", "--setenv", "MPLCONFIGDIR", "/tmp",
             "--setenv", "OPENBLAS_NUM_THREADS", "1", "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
             "--", sys.executable, "-I", "-c", _REPL_SOURCE, *repl_args]
    return args, stages


# Run as root before anything else: join the sandbox's cgroups, then stage unreachable directories.
_PREPARE = ('c=$1; shift; while [ "$c" -gt 0 ]; do echo $$ > "$1" || exit 112; shift; c=$((c-1)); done; '
            'n=$1; shift; while [ "$n" -gt 0 ]; do mount --bind "$1" "$2" || exit 111; shift 2; n=$((n-1)); done; '
            'exec "$@"')


def launch_command(workspace_dir: str, repl_args: list[str], isolation: str,
                   cgroup_files: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The argv that starts the sandbox: optionally join ``cgroup_files``; as root, stage, drop to
    ``nobody`` and start bwrap from a private mount namespace."""
    root = os.geteuid() == 0
    stages: list[tuple[str, str]] = []
    if isolation == "process":
        inner = [sys.executable, "-I", "-c", _REPL_SOURCE, *repl_args]
    else:
        inner, stages = bwrap_command(workspace_dir, repl_args)
        if root:
            inner = ["setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", "--", *inner]
    namespace = ["unshare", "--mount", "--propagation", "private", "--"] if root and isolation != "process" else []
    if not namespace and not cgroup_files:
        return inner
    flat = [p for pair in stages for p in pair]
    return [*namespace, "/bin/sh", "-c", _PREPARE, "agio-sandbox", str(len(cgroup_files)), *cgroup_files,
            str(len(stages)), *flat, *inner]


def describe_failure(returncode: int, stderr: str) -> str:
    """Which step of starting the sandbox failed, and what to do about it."""
    lines = stderr.strip().splitlines()
    line = lines[-1] if lines else f"exit {returncode}"
    low = stderr.lower()
    if returncode == 112:
        return f"could not join the sandbox's cgroup ({line})"
    if returncode == 111 or line.startswith("mount:"):
        return (f"could not bind a directory the unprivileged user cannot reach onto a staging directory "
                f"(mount --bind as root): {line}")
    if line.startswith("unshare:"):
        return f"could not make a private mount namespace (unshare --mount): {line}"
    if line.startswith("setpriv:"):
        return f"could not switch to the unprivileged user {SANDBOX_UID} (setpriv): {line}"
    if "execvp" in line:
        dirs = ", ".join(_python_dirs()) or "none outside /usr"
        return (f"bubblewrap started, but could not run the interpreter {sys.executable} inside the sandbox "
                f"({line}); the sandbox binds the interpreter's directories ({dirs}) read-only: the "
                "interpreter must be inside them or under /usr")
    if "namespace" in low or "uid map" in low or "operation not permitted" in low:
        return (f"bubblewrap cannot create its namespaces here ({line}); allow unprivileged user namespaces "
                "(sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone, or AppArmor's "
                "kernel.apparmor_restrict_unprivileged_userns)")
    if line.startswith("bwrap:"):
        return f"bubblewrap could not set up the sandbox's filesystem ({line})"
    return f"the sandbox did not start ({line})"


# bwrap's --die-with-parent follows the *thread* that started it (PR_SET_PDEATHSIG), and tools run in
# short-lived worker threads: sandboxes are started from this one long-lived thread instead.
_launcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agio-sandbox-launcher")

_CLEAN_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
_probe: dict[str, str | None] = {}


def isolation_problem() -> str | None:
    """None if bubblewrap isolation works here, else why not (checked once per process)."""
    if "bubblewrap" in _probe:
        return _probe["bubblewrap"]
    problem: str | None = None
    if shutil.which("bwrap") is None:
        problem = "bubblewrap (bwrap) is not installed"
    else:
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o777)
            try:
                cmd = launch_command(tmp, [], "bubblewrap")
                cmd[cmd.index(_REPL_SOURCE)] = "pass"
                r = subprocess.run(cmd, env=_CLEAN_ENV, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
                if r.returncode != 0:
                    problem = describe_failure(r.returncode, r.stderr.decode(errors="replace"))
            except IsolationUnavailable as exc:
                problem = str(exc)
            except (OSError, subprocess.TimeoutExpired) as exc:
                problem = f"bubblewrap could not start: {exc}"
    _probe["bubblewrap"] = problem
    return problem


class Sandbox:
    """One live interpreter. ``executed`` lists the tool calls whose code it has run (see Workspace.sync)."""

    def __init__(self, workspace: Workspace, limits: SandboxLimits | None = None, isolation: str = "bubblewrap"):
        if isolation not in ISOLATION_LEVELS:
            raise ActionError(f"unknown isolation level {isolation!r} (choose from {', '.join(ISOLATION_LEVELS)})")
        self.workspace = workspace
        self.limits = limits or SandboxLimits()
        self.isolation = isolation
        self.executed: list[str] = []
        self.calls = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._group: cgroups.SandboxGroup | None = None
        self._lock = threading.Lock()

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        if self.isolation == "bubblewrap":
            problem = isolation_problem()
            if problem:
                raise IsolationUnavailable(
                    f"sandbox refused: bubblewrap cannot start here ({problem}); pass isolation='process' to "
                    "python_sandbox() to run without it, knowingly")
        self.workspace.create()
        self._group = cgroups.create(self.limits.memory_bytes, self.limits.processes)
        read_fd, write_fd = os.pipe()
        # inside bwrap the interpreter ends each call's processes with kill(-1) in its own PID namespace;
        # at the process level, by its process group
        tree = "namespace" if self.isolation == "bubblewrap" else "group"
        cmd = launch_command(str(self.workspace.dir), [self.limits.rlimits(), str(write_fd), tree],
                             self.isolation, self._group.procs_files if self._group else ())
        try:
            self._proc = _launcher.submit(
                subprocess.Popen, cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(write_fd,),
                env=dict(_CLEAN_ENV, MPLBACKEND="Agg", HOME=str(self.workspace.dir)) if self.isolation == "process"
                else _CLEAN_ENV, cwd=self.workspace.dir if self.isolation == "process" else "/",
                start_new_session=True
            ).result()
        finally:
            os.close(write_fd)
        self._reply = os.fdopen(read_fd, "rb", buffering=0)
        self._out = _Capped(self._proc.stdout)
        self._err = _Capped(self._proc.stderr)
        self.executed = []
        self.calls = 0

    def execute(self, code: str, timeout: float | None = None) -> ExecResult:
        """Run ``code`` in the live interpreter (started if needed). Never raises for the code's failures."""
        with self._lock:
            if not self.alive:
                self.close()
                self.start()
            assert self._proc is not None and self._proc.stdin is not None
            limit = timeout if timeout is not None else self.limits.timeout
            marker = f"\n\x00agio-end-{new_id()}\x00".encode()
            cap = self.limits.output_bytes
            self._out.begin(marker, cap)
            self._err.begin(marker, cap)
            t0 = time.monotonic()
            result = ExecResult()
            reply = None
            ooms = self._group.oom_kills() if self._group else 0
            try:
                request = marshal.dumps((code, marker))
                self._proc.stdin.write(len(request).to_bytes(4, "big") + request)
                self._proc.stdin.flush()
                reply = self._read_reply(t0 + limit)
            except BrokenPipeError:
                reply = None
            except TimeoutError:
                result.timed_out = True
            if reply is None:
                self._kill()
                result.crashed = not result.timed_out
            else:
                self.calls += 1
            # the markers were written before the reply: waiting for them only waits for our reader threads
            drain = time.monotonic() + (15.0 if reply is not None else 0.5)
            self._out.wait(drain)
            self._err.wait(drain)
            result.stdout, result.stderr = self._out.text(), self._err.text()
            result.truncated_bytes = self._out.dropped + self._err.dropped
            if reply is not None:
                result.value, result.displays, result.error = reply["value"], reply["displays"], reply["error"]
            elif result.timed_out:
                result.error = f"timed out after {limit:g}s; the sandbox was killed (its state is lost)"
            else:
                code_ = self._proc.returncode if self._proc is not None else None
                result.error = (f"the interpreter died (exit {code_}"
                                + (f", signal {signal.Signals(-code_).name}" if code_ and code_ < 0 else "")
                                + "); its state is lost and the next call starts a fresh one")
            killed = (self._group.oom_kills() - ooms) if self._group else 0
            if killed:
                result.memory_kills = killed
                note = (f"the sandbox reached its memory limit ({self._group.bound}): the kernel killed "
                        f"{killed} process(es)")
                result.error = f"{note}; {result.error}" if result.error else None
                result.stderr += f"\n[{note}]"
            result.duration_ms = (time.monotonic() - t0) * 1000.0
            return result

    def _read_reply(self, deadline: float) -> dict[str, Any] | None:
        data = bytearray()
        sel = selectors.DefaultSelector()
        sel.register(self._reply, selectors.EVENT_READ)
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                if not sel.select(left):
                    continue
                chunk = os.read(self._reply.fileno(), 1 << 20)
                if not chunk:
                    return None
                data += chunk
                if len(data) > _MAX_REPLY:
                    return None
                if data.endswith(b"\n"):
                    return parse_reply(bytes(data))
        finally:
            sel.close()

    def _kill(self) -> None:
        """Kill the sandbox; with a cgroup, every process in it is gone when this returns."""
        proc = self._proc
        if proc is None:
            return
        if self._group is not None:
            self._group.kill()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        proc = self._proc
        if proc is None:
            return
        self._kill()
        for stream in (proc.stdin, proc.stdout, proc.stderr, getattr(self, "_reply", None)):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        self._proc = None
        if self._group is not None:
            self._group.remove()
            self._group = None

    @property
    def memory_bound(self) -> str:
        """The memory bound in force for this sandbox, in words."""
        per_process = f"{self.limits.memory_bytes >> 20} MiB address space per process (rlimit)"
        if self._group is not None:
            return f"{self._group.bound}, and {per_process}"
        return per_process + f" (no cgroup: the whole sandbox may use up to processes x that; {cgroups.why_none()})"


class SandboxPool:
    """The live sandbox of each session in this process; all closed at exit."""

    def __init__(self) -> None:
        self._boxes: dict[str, Sandbox] = {}
        self.stale: dict[str, str] = {}  # session id -> why its interpreter was ended (said on the next call)
        self._lock = threading.Lock()
        atexit.register(self.close_all)
        Workspace.restore_listeners.append(self._restored)

    def get(self, session_id: str, workspace: Workspace, limits: SandboxLimits, isolation: str) -> Sandbox:
        with self._lock:
            box = self._boxes.get(session_id)
            if box is None or box.isolation != isolation or box.limits != limits or box.workspace is not workspace:
                if box is not None:
                    box.close()
                box = self._boxes[session_id] = Sandbox(workspace, limits, isolation)
            return box

    def _restored(self, session_id: str, why: str) -> None:
        """The session's workspace was restored: its interpreter no longer matches it."""
        self.stale[session_id] = why
        self.close(session_id)

    def close(self, session_id: str) -> None:
        with self._lock:
            box = self._boxes.pop(session_id, None)
        if box is not None:
            box.close()

    def close_all(self) -> None:
        for session_id in list(self._boxes):
            self.close(session_id)


pool = SandboxPool()

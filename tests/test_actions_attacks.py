"""The attack battery: each attack is blocked, reaches the model as a clear error tool result, and the
next call in the same session works. CI runs these as root, which is the harder case (the sandbox must
drop to an unprivileged user itself)."""

from __future__ import annotations

import os
import socket
import sys
import time

import pytest

from agio_notebook.storage import TinyDBRepository
from agio_notebook.toolkits import SandboxLimits, python_sandbox, workspace_files
from agio_notebook.toolkits.sandbox import pool

from actions_support import one_tool_step


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("AGIO_WORKSPACES", str(tmp_path / "ws"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-value-123456")
    repo = TinyDBRepository(tmp_path / "store")
    tools = [*python_sandbox(limits=SandboxLimits(timeout=5, memory_bytes=1 << 30)), *workspace_files()]
    yield repo, tools
    pool.close_all()
    repo.close()


def attack(env, session, name, **args):
    """Run the attack as a tool call; then check the session's interpreter still answers."""
    repo, tools = env
    step = one_tool_step(repo, session, tools, name, **args)
    after = one_tool_step(repo, session, tools, "run_python", code="6 * 7")
    assert after.status == "ok", after.content
    assert "[value] 42" in after.content
    return step


def assert_blocked(step, *needles):
    assert step.status == "error", step.content
    assert step.content.startswith("Error"), step.content
    for needle in needles:
        assert needle in step.content, step.content
    assert step.extra["actions"][0]["status"] == "error"


def test_reading_etc_shadow_and_ssh_from_python(env):
    step = attack(env, "s", "run_python", code="open('/etc/shadow').read()")
    assert_blocked(step, "No such file or directory: '/etc/shadow'")
    step = attack(env, "s", "run_python", code="import os; os.listdir(os.path.expanduser('~/.ssh'))")
    assert_blocked(step, "FileNotFoundError")
    home = os.path.expanduser("~")  # the kernel's home, e.g. /root in CI
    step = attack(env, "s", "run_python", code=f"os.listdir({home + '/.ssh'!r})")
    assert_blocked(step, "FileNotFoundError")
    # the kernel user's home holds at most the interpreter's own read-only directories (bound at their
    # own paths because the virtualenv points to them), nothing else
    home = os.path.expanduser("~")
    python_dirs = sorted({os.path.relpath(p, home).split(os.sep)[0] for p in (sys.prefix, sys.base_prefix)
                          if p.startswith(home + os.sep)})
    step = attack(env, "s", "run_python", code=f"sorted(os.listdir({home!r})) if os.path.isdir({home!r}) else []")
    assert step.status == "ok" and f"[value] {python_dirs!r}" in step.content, step.content


def test_reading_etc_shadow_and_ssh_with_file_tools(env):
    assert_blocked(attack(env, "f", "read_file", path="/etc/shadow"), "is absolute")
    assert_blocked(attack(env, "f", "read_file", path="../../../../etc/shadow"), "uses '..'")
    assert_blocked(attack(env, "f", "read_file", path="~/.ssh/id_rsa"), "no file")


def test_writing_outside_the_workspace(env, tmp_path):
    outside = tmp_path / "outside.txt"
    assert_blocked(attack(env, "w", "write_file", path=str(outside), content="x"), "is absolute")
    assert_blocked(attack(env, "w", "write_file", path="../outside.txt", content="x"), "uses '..'")
    step = attack(env, "w", "run_python", code=f"open({str(outside)!r}, 'w').write('x')")
    assert_blocked(step, "Error")
    step = attack(env, "w", "run_python", code="open('/usr/evil', 'w').write('x')")
    assert_blocked(step, "Read-only file system")
    assert not outside.exists()


def test_symlink_escape_and_dotdot(env, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    # the agent's code makes a symlink pointing out of the workspace; the file tools refuse to follow it
    step = attack(env, "l", "run_python", code=f"import os; os.symlink({str(secret)!r}, 'link.txt'); "
                                                f"os.symlink({str(tmp_path)!r}, 'dirlink')")
    assert step.status == "ok", step.content
    assert_blocked(attack(env, "l", "read_file", path="link.txt"), "outside the workspace")
    assert_blocked(attack(env, "l", "read_file", path="dirlink/secret.txt"), "outside the workspace")
    assert_blocked(attack(env, "l", "write_file", path="link.txt", content="pwned"), "outside the workspace")
    assert_blocked(attack(env, "l", "replace_in_file", path="dirlink/secret.txt", old="top", new="x"),
                   "outside the workspace")
    assert_blocked(attack(env, "l", "read_file", path="sub/../../x"), "uses '..'")
    assert secret.read_text() == "top secret"
    # inside the sandbox the link points at nothing: the host path does not exist there
    assert_blocked(attack(env, "l", "run_python", code="open('link.txt').read()"), "FileNotFoundError")


def test_a_fifo_or_device_in_the_workspace_does_not_hang_the_file_tools(env):
    step = attack(env, "ff", "run_python", code="import os; os.mkfifo('pipe'); os.symlink('/dev/zero', 'zero')")
    assert step.status == "ok", step.content
    assert_blocked(attack(env, "ff", "read_file", path="pipe"), "is not a regular file")
    assert_blocked(attack(env, "ff", "write_file", path="pipe", content="x"), "'pipe'")
    assert_blocked(attack(env, "ff", "read_file", path="zero"), "outside the workspace")
    assert attack(env, "ff", "search_files", pattern="x").status == "ok"  # skips what is not a regular file


def test_socket_to_a_loopback_server_started_here(env):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted = []
    server.settimeout(0.2)

    def accept():
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    step = attack(env, "n", "run_python",
                  code=f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)")
    accept()
    server.close()
    assert_blocked(step, "ConnectionRefusedError")
    assert not accepted


def test_fork_bomb(env):
    step = attack(env, "b", "run_python", code="import os\nwhile True:\n    os.fork()")
    assert_blocked(step, "BlockingIOError")


SURVIVING_BOMB = """import os, time
main = os.getpid()
try:
    while True:
        os.fork()
except BlockingIOError:
    if os.getpid() != main:
        time.sleep(1000)  # each child that hit the limit holds its process slot
    raise
"""


def test_a_fork_bombs_children_do_not_survive_the_call(env):
    repo, tools = env
    step = one_tool_step(repo, "fb", tools, "run_python", code=SURVIVING_BOMB)
    assert_blocked(step, "BlockingIOError")
    # at once, in the same interpreter: only bwrap's init and the interpreter are left, and new
    # processes can start (the bomb's children held every slot until the call killed them)
    after = one_tool_step(repo, "fb", tools, "run_python", code=(
        "import os, subprocess\n"
        "left = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
        "(left, [subprocess.run(['true']).returncode for _ in range(20)], 'main' in dir())"))
    assert after.status == "ok", after.content
    assert "[value] ([1, 2], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], True)" in after.content


def test_a_process_group_level_call_ends_its_processes_too(env):
    repo, _ = env
    tools = python_sandbox(isolation="process", limits=SandboxLimits(timeout=10))
    step = one_tool_step(repo, "pg", tools, "run_python",
                         code="import subprocess; p = subprocess.Popen(['sleep', '1000']); p.pid")
    assert step.status == "ok", step.content
    assert not _sleepers()


MEMORY_HOGS = """import os, time
pids = []
for i in range(4):
    pid = os.fork()
    if pid == 0:
        block = b'x' * (300 << 20)  # written, so really resident
        time.sleep(3)
        os._exit(0)
    pids.append(pid)
statuses = [os.waitpid(p, 0)[1] for p in pids]
[('killed' if os.WIFSIGNALED(s) else 'ok') for s in statuses]
"""


def test_memory_is_capped_for_the_whole_sandbox(env):
    """Four processes of 300 MiB each, every one under the 512 MiB per-process limit: the whole
    sandbox's cap stops them, and the bound in force is the one the toolkit names."""
    from agio_notebook.toolkits import cgroups

    repo, _ = env
    tools = python_sandbox(limits=SandboxLimits(timeout=60, memory_bytes=512 << 20))
    if cgroups.memory_bound(512 << 20) is None:  # what the toolkit itself asks
        pytest.skip(f"no cgroup can be made here ({cgroups.why_none()}); the per-process bound is tested by "
                    "test_without_a_cgroup_the_per_process_bound_is_named")
    assert "512 MiB for the whole sandbox (cgroup v" in repr(tools), repr(tools)
    step = one_tool_step(repo, "mem", tools, "run_python", code=MEMORY_HOGS)
    assert step.status == "ok", step.content
    assert "'killed'" in step.content, step.content  # the kernel killed at least one of them
    assert step.content.count("'ok'") <= 1, step.content  # never more than 512 MiB at once
    assert "the sandbox reached its memory limit (512 MiB for the whole sandbox" in step.content, step.content
    output = step.extra["actions"][0]["output"]
    assert output["memory_kills"] >= 1 and "cgroup v" in output["memory_bound"]
    again = one_tool_step(repo, "mem", tools, "run_python", code="6 * 7")
    assert again.status == "ok" and "[value] 42" in again.content, again.content


def test_allocating_2_gb(env):
    step = attack(env, "m", "run_python", code="x = bytearray(2 * 1024**3)")
    assert_blocked(step, "MemoryError")


def test_infinite_loop_is_stopped_by_the_timeout(env):
    step = attack(env, "t", "run_python", code="while True:\n    pass")
    assert_blocked(step, "timed out after 5s")
    assert step.extra["actions"][0]["output"]["timed_out"] is True


def test_a_process_left_running_does_not_outlive_its_call(env):
    repo, tools = env
    step = one_tool_step(repo, "z", tools, "run_python",
                         code="import subprocess; p = subprocess.Popen(['sleep', '1000']); p.pid")
    assert step.status == "ok", step.content
    assert not _sleepers()  # gone when the call returned, not later
    after = one_tool_step(repo, "z", tools, "run_python", code="p.pid > 0")
    assert "[value] True" in after.content, after.content  # the interpreter and its variables live on


def _sleepers() -> list[str]:
    return [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p) == "sleep\x001000"]


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline") as f:
            return f.read().rstrip("\x00")
    except OSError:
        return ""


def test_100_mb_of_output_is_capped(env):
    step = attack(env, "o", "run_python", code="import sys\nfor _ in range(100):\n    sys.stdout.write('x' * 1_000_000)")
    assert step.status == "ok"
    assert "[output truncated:" in step.content
    assert len(step.content) < 100_000


def test_kernel_environment_is_not_visible(env):
    assert os.environ["OPENAI_API_KEY"]
    step = attack(env, "e", "run_python",
                  code="import os\nprint(sorted(os.environ))\nos.environ['OPENAI_API_KEY']")
    assert_blocked(step, "KeyError: 'OPENAI_API_KEY'")
    assert "sk-test-secret" not in step.content
    step = attack(env, "e", "run_python", code="open('/proc/1/environ').read() + open('/proc/self/environ').read()")
    assert step.status == "ok"
    assert "sk-test-secret" not in step.content and "OPENAI_API_KEY" not in step.content


def test_killing_the_parent_process(env):
    step = attack(env, "k", "run_python", code="import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill(1, signal.SIGKILL)\n'still here'")
    assert step.status == "ok"  # pid 1 of the sandbox's own namespace ignores it; the kernel is unreachable
    step = attack(env, "k", "run_python", code="import os\nos.kill(os.getpid(), 9)")
    assert_blocked(step, "the interpreter died")


def test_proc_sys_is_read_only_and_code_runs_unprivileged(env):
    step = attack(env, "p", "run_python", code="open('/proc/sys/kernel/core_pattern', 'w').write('|/tmp/x')")
    assert_blocked(step, "Read-only file system")
    ok = one_tool_step(env[0], "p", env[1], "run_python", code="import os; (os.getuid(), os.getpid() < 10)")
    assert "[value] (" in ok.content
    if os.geteuid() == 0:
        assert "[value] (65534, True)" in ok.content


def test_isolation_unavailable_refuses_with_one_line(env, monkeypatch):
    from agio_notebook.toolkits import sandbox

    monkeypatch.setitem(sandbox._probe, "bubblewrap", "bubblewrap (bwrap) is not installed")
    repo, tools = env
    step = one_tool_step(repo, "u", tools, "run_python", code="1+1")
    assert step.status == "error"
    assert "sandbox refused: bubblewrap cannot start here (bubblewrap (bwrap) is not installed); pass " \
           "isolation='process'" in step.content
    weak = one_tool_step(repo, "u2", python_sandbox(isolation="process"), "run_python", code="1+1")
    assert weak.status == "ok" and "[sandbox: process (weak, opted in)" in weak.content


def test_a_directory_swapped_for_a_symlink_is_not_followed(env, tmp_path):
    """Checked at open, not only before: a walk by descriptors with O_NOFOLLOW on every part."""
    from agio_notebook.toolkits import ActionError, workspace_for

    repo, _ = env
    ws = workspace_for("swap", repository=repo)
    ws.create()
    (ws.dir / "sub").mkdir()
    ws.resolve("sub/x.txt")  # the static check passes while sub is a directory...
    (ws.dir / "sub").rmdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws.dir / "sub").symlink_to(outside)  # ...then the agent's code swaps it for a symlink
    with pytest.raises(ActionError, match="outside the workspace|symlinks are not followed"):
        ws.open("sub/x.txt", os.O_WRONLY | os.O_CREAT)
    import agio_notebook.toolkits.workspace as wsmod

    real_resolve = wsmod.Workspace.resolve
    try:  # even if the static check were fooled, the walk refuses the symlink
        wsmod.Workspace.resolve = lambda self, rel: self.dir / rel
        with pytest.raises(ActionError, match="symlinks are not followed"):
            ws.open("sub/x.txt", os.O_WRONLY | os.O_CREAT)
    finally:
        wsmod.Workspace.resolve = real_resolve
    assert not (outside / "x.txt").exists()


def test_a_restore_never_writes_through_a_symlink_or_a_damaged_path(env, tmp_path, monkeypatch):
    """A retry or fork restores files into a tree the agent's code may have rigged: a directory swapped
    for a symlink to the outside is replaced, not followed; a path the store names with '..' is refused."""
    from agio_notebook.toolkits import ActionError, workspace_for

    repo, _ = env
    ws = workspace_for("rigged", repository=repo)
    ws.create()
    (ws.dir / "sub").mkdir()
    (ws.dir / "sub" / "a.txt").write_text("kept content")
    sha = ws.store_blob("sub/a.txt")[0]
    (ws.dir / "sub" / "a.txt").unlink()
    (ws.dir / "sub").rmdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws.dir / "sub").symlink_to(outside)
    ws.restore({"sub/a.txt": sha}, None)
    assert not (ws.dir / "sub").is_symlink() and (ws.dir / "sub" / "a.txt").read_text() == "kept content"
    assert list(outside.iterdir()) == []
    # planted after the restore looked at the tree: the descriptor walk refuses it
    (ws.dir / "sub" / "a.txt").unlink()
    (ws.dir / "sub").rmdir()
    (ws.dir / "sub").symlink_to(outside)
    monkeypatch.setattr(type(ws), "_walk", lambda self: iter(()))
    with pytest.raises(ActionError, match="symlinks are not followed"):
        ws.restore({"sub/a.txt": sha}, None)
    assert list(outside.iterdir()) == []
    monkeypatch.undo()
    for bad in ("../escaped.txt", "/etc/escaped.txt", "sub/../../escaped.txt"):
        with pytest.raises(ActionError, match="'\\.\\.'|absolute"):
            ws.restore({bad: sha}, None)
    assert not (ws.root / "sessions" / "escaped.txt").exists() and not (tmp_path / "escaped.txt").exists()


def test_snapshots_never_copy_a_file_from_outside_through_a_swapped_link(env, tmp_path):
    """Code left running in the sandbox may swap a file for a symlink between the scan's lstat and its
    read; the snapshot reads through a descriptor opened without following links, so nothing from
    outside the workspace reaches the blobs (and so a fork's workspace)."""
    from agio_notebook.toolkits import workspace_for

    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    ws = workspace_for("blobs", repository=env[0])
    ws.create()
    (ws.dir / "f.txt").symlink_to(secret)
    (ws.dir / "d").symlink_to(tmp_path)
    assert ws.store_blob("f.txt") is None
    assert ws.store_blob("d/secret.txt") is None
    assert not any(b.read_bytes() == b"TOP SECRET" for b in ws.blobs.rglob("*") if b.is_file())


def test_without_a_cgroup_the_per_process_bound_is_named(env, monkeypatch):
    """Where no cgroup can be made, the sandbox still runs and says that memory is bounded per process."""
    from agio_notebook.toolkits import cgroups

    why = "cgroup v2: no cgroup v2 hierarchy is mounted; cgroup v1: no v1 memory hierarchy holds this process"
    monkeypatch.setattr(cgroups, "create", lambda *args: None)
    monkeypatch.setattr(cgroups, "_probed", {"kind": "rlimit"})
    monkeypatch.setattr(cgroups, "_last_problem", [why])
    repo, _ = env
    tools = python_sandbox(limits=SandboxLimits(timeout=10, memory_bytes=512 << 20, processes=32))
    assert (f"memory: 512 MiB address space per process (rlimit) only, no cgroup here ({why}): up to 32 processes "
            "x that;") in repr(tools), repr(tools)
    step = one_tool_step(repo, "nocg", tools, "run_python", code="6 * 7")
    assert step.status == "ok" and "[value] 42" in step.content, step.content
    assert step.extra["actions"][0]["output"]["memory_bound"] == (
        "512 MiB address space per process (rlimit) (no cgroup: the whole sandbox may use up to processes x that; "
        f"{why})")

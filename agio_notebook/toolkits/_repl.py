"""The interpreter loop that runs *inside* the sandbox (its source is passed to ``python -I -c``).

It imports only built-in modules at start (cold start is measured against a bare ``python -c pass``):
``marshal`` for requests, ``_ast`` through ``compile``, ``binascii`` for PNGs; ``traceback`` and ``io``
load when first needed.

- ``argv[1]``: rlimits as ``name=value,...``, set before any request is read; ``argv[2]``: the reply fd;
  ``argv[3]``: how a call's processes are ended before it answers (``namespace``: ``kill(-1)`` in the
  sandbox's own PID namespace, where only pid 1, bwrap's init, is spared; ``group``: the process group).
- Requests on stdin, one at a time: a 4-byte big-endian length, then ``marshal`` of ``(code, marker)``
  (the parent writes them; nothing from inside is ever unmarshalled outside).
- Output goes to the real fds 1 and 2 (the parent reads and caps them); after each call the loop writes
  ``marker`` to both, so the parent knows where a call's output ends.
- The reply is one line of JSON on the reply fd, every string hex-encoded UTF-8 so no JSON library is
  needed here: ``{"value": hex|null, "error": hex|null, "displays": [[mime, hex], ...]}``.  It carries the
  last expression's value, rich displays (matplotlib figures as PNG, ``_repr_html_`` such as DataFrames)
  and the error, if any.  The parent parses it with ``json`` and checks every field.
"""

import _ast
import binascii
import marshal
import os
import resource
import sys

REPLY_FD = int(sys.argv[2]) if len(sys.argv) > 2 else 2
TREE = sys.argv[3] if len(sys.argv) > 3 else "group"
MAIN_PID = os.getpid()
MAX_REPR = 20_000
MAX_HTML = 500_000
MAX_PNG = 5_000_000
ONLY_AST = 0x400  # ast.PyCF_ONLY_AST, without importing ast


def set_limits(spec):
    for item in filter(None, spec.split(",")):
        name, value = item.split("=")
        soft = hard = int(value)
        if name == "cpu":
            hard = soft + 5  # SIGXCPU first, SIGKILL 5 s later
        resource.setrlimit(getattr(resource, "RLIMIT_" + name.upper()), (soft, hard))


def rich(value, displays):
    html = getattr(value, "_repr_html_", None)
    if callable(html) and not isinstance(value, type):
        try:
            text = html()
        except Exception:
            text = None
        if isinstance(text, str):
            displays.append(("text/html", text[:MAX_HTML]))


def figures(displays):
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    import io

    for num in plt.get_fignums():
        buf = io.BytesIO()
        try:
            plt.figure(num).savefig(buf, format="png", dpi=80, bbox_inches="tight")
        except Exception as exc:
            print(f"could not render figure {num}: {exc}", file=sys.stderr)
            continue
        data = buf.getvalue()
        if len(data) <= MAX_PNG:
            displays.append(("image/png", binascii.b2a_base64(data, newline=False).decode("ascii")))
    plt.close("all")


def run(code, namespace):
    displays, value, error = [], None, None
    namespace["display"] = lambda obj: rich(obj, displays) or displays.append(("text/plain", repr(obj)[:MAX_REPR]))
    try:
        tree = compile(code, "<agent>", "exec", ONLY_AST)
        last = None
        if tree.body and isinstance(tree.body[-1], _ast.Expr):
            last = _ast.Expression(tree.body.pop().value)
        exec(compile(tree, "<agent>", "exec"), namespace)
        if last is not None:
            result = eval(compile(last, "<agent>", "eval"), namespace)
            if result is not None:
                value = repr(result)[:MAX_REPR]
                rich(result, displays)
                namespace["_"] = result
    except BaseException as exc:  # noqa: BLE001 - the agent's code failing is a result
        if os.getpid() != MAIN_PID:
            os._exit(1)  # a child forked by the agent's code never answers for the interpreter
        if isinstance(exc, SystemExit):
            error = f"SystemExit: {exc.code}"
        else:
            import traceback

            lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
            error = "".join(line for line in lines if 'File "<string>"' not in line)[-MAX_REPR:]
    try:
        figures(displays)
    except Exception as exc:  # noqa: BLE001
        print(f"could not collect figures: {exc}", file=sys.stderr)
    return value, error, displays


def _others():
    """Other live processes this interpreter answers for: the whole PID namespace but its init, or the
    members of its process group."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in (MAIN_PID, 1):
            continue
        if TREE == "group":
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    if int(f.read().rsplit(b")", 1)[1].split()[2]) != MAIN_PID:
                        continue
            except (OSError, IndexError, ValueError):
                continue
        found.append(int(entry))
    return found


def end_processes():
    """Kill every process the call left (a fork bomb's children, a background server) and wait until
    they are gone, so none outlives the call or holds its process slots into the next one."""
    own_namespace = TREE == "namespace" and MAIN_PID == 2 and os.getppid() == 1  # pid 2 is never ours outside
    for _ in range(10_000):
        if own_namespace:
            try:
                os.kill(-1, 9)  # everything in this PID namespace but init and this process, atomically
            except ProcessLookupError:
                pass
        else:
            for pid in _others():
                try:
                    os.kill(pid, 9)
                except (ProcessLookupError, PermissionError):
                    pass
        while True:  # reap our own children; bwrap's init reaps the orphans
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        if not _others():
            return
        import time

        time.sleep(0.001)


def hexed(text):
    return "null" if text is None else '"' + text.encode("utf-8", "replace").hex() + '"'


def read_exact(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            raise SystemExit(0)
        data += chunk
    return data


def main():
    set_limits(sys.argv[1] if len(sys.argv) > 1 else "")
    namespace = {"__name__": "__main__"}
    while True:
        size = int.from_bytes(read_exact(4), "big")
        code, marker = marshal.loads(read_exact(size))
        value, error, displays = run(code, namespace)
        if os.getpid() != MAIN_PID:
            os._exit(0)
        end_processes()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os.write(1, marker)
        os.write(2, marker)
        shown = ",".join(f'["{mime}",{hexed(data)}]' for mime, data in displays)
        reply = f'{{"value":{hexed(value)},"error":{hexed(error)},"displays":[{shown}]}}\n'.encode()
        view = memoryview(reply)
        while view:
            view = view[os.write(REPLY_FD, view):]


main()

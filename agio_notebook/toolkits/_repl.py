"""The interpreter loop that runs *inside* the sandbox (stdlib only; its source is passed to ``python -c``).

Limits (rlimits) come as JSON in ``argv[1]``, the reply fd's number in ``argv[2]``; and are set before any request is read.  Requests
arrive as JSON lines on stdin, one at a time: ``{"code", "marker"}``.  Code runs in
one persistent namespace, so state lasts across calls.  Output goes to the real fds 1 and 2 (the parent
reads and caps them); after each call the loop writes ``marker`` to both, so the parent knows where a
call's output ends.  The reply goes to that fd as one JSON line: the last expression's value, rich displays
(matplotlib figures as PNG, objects with ``_repr_html_`` such as DataFrames) and the error, if any.
"""

import ast
import base64
import io
import json
import os
import resource
import sys
import traceback

REPLY = os.fdopen(int(sys.argv[2]), "w", encoding="utf-8")
MAIN_PID = os.getpid()
MAX_REPR = 20_000
MAX_HTML = 500_000
MAX_PNG = 5_000_000


def set_limits(limits):
    for name, value in limits.items():
        which = getattr(resource, "RLIMIT_" + name.upper())
        soft = hard = int(value)
        if name == "cpu":
            hard = soft + 5  # SIGXCPU first, SIGKILL 5 s later
        resource.setrlimit(which, (soft, hard))


def rich(value, displays):
    html = getattr(value, "_repr_html_", None)
    if callable(html) and not isinstance(value, type):
        try:
            text = html()
        except Exception:
            text = None
        if isinstance(text, str):
            displays.append({"mime": "text/html", "data": text[:MAX_HTML]})


def figures(displays):
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    for num in plt.get_fignums():
        buf = io.BytesIO()
        try:
            plt.figure(num).savefig(buf, format="png", dpi=80, bbox_inches="tight")
        except Exception as exc:
            print(f"could not render figure {num}: {exc}", file=sys.stderr)
            continue
        data = buf.getvalue()
        if len(data) <= MAX_PNG:
            displays.append({"mime": "image/png", "data": base64.b64encode(data).decode("ascii")})
    plt.close("all")


def run(code, namespace):
    displays, value, error = [], None, None
    namespace["display"] = lambda obj: rich(obj, displays) or displays.append(
        {"mime": "text/plain", "data": repr(obj)[:MAX_REPR]})
    try:
        tree = ast.parse(code, "<agent>", "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
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
            lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
            error = "".join(line for line in lines if 'File "<string>"' not in line)[-MAX_REPR:]
    try:
        figures(displays)
    except Exception as exc:  # noqa: BLE001
        print(f"could not collect figures: {exc}", file=sys.stderr)
    return {"value": value, "displays": displays, "error": error}


def main():
    namespace = {"__name__": "__main__"}
    set_limits(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {})
    for line in sys.stdin:
        request = json.loads(line)
        reply = run(request["code"], namespace)
        if os.getpid() != MAIN_PID:
            os._exit(0)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        marker = request["marker"].encode()
        os.write(1, marker)
        os.write(2, marker)
        REPLY.write(json.dumps(reply) + "\n")
        REPLY.flush()


main()

"""``browser()``: a real browser for the agent — Playwright driving Debian's chromium (no download).

One browser process per toolkit, one browser *context* per session (its own cookies and storage),
closed by :meth:`Agent.close`, by :func:`close_browsers`, or when the kernel exits.  Playwright's sync
API is bound to the thread that started it, so every browser call runs on one dedicated thread.

When the kernel runs as root, chromium runs as ``nobody`` with its own sandbox on (rather than as root
with ``--no-sandbox``), and every file of the browser's (the profile, Playwright's temporary files,
chromium's own) goes into a directory of this toolkit's that ``nobody`` can reach, whatever ``TMPDIR`` is.

A page cannot disable the browser: a call that times out closes its page (and, if that fails, the
session's context), kills a renderer that keeps spinning, and the session's next call gets a fresh page.  Addresses are guarded twice: a Playwright route check refuses a blocked URL before any request, and
chromium's whole network goes through :class:`~agio_notebook.toolkits.proxy.FilteringProxy`, which also
sees redirect hops, WebSockets and subresources.
"""

from __future__ import annotations

import atexit
import base64
import os
import queue
import shlex
import shutil
import signal
import tempfile
import threading
import time
from concurrent.futures import Future, TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..tools import Tool, tool
from ..tools.context import get_call
from .actions import MANUAL_SESSION, recorded
from .errors import ActionError, check_positive
from .proxy import BLOCK_HEADER, FilteringProxy
from .web import Guard, to_markdown
from .workspace import SANDBOX_UID, reachable_temp_dir

CHROMIUM = "/usr/bin/chromium"  # Debian's; found on PATH or named by AGIO_CHROMIUM where it lives elsewhere
_CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_NODE_LAUNCHER = """#!/bin/sh
export TMPDIR={files}
exec {node} "$@"
"""
_LAUNCHER = """#!/bin/sh
for arg in "$@"; do
  case "$arg" in --user-data-dir=*) chown -R {uid}:{uid} "${{arg#--user-data-dir=}}" ;; esac
done
export HOME={home} TMPDIR={home}
exec setpriv --reuid={uid} --regid={uid} --clear-groups -- {executable} "$@"
"""
_ENV_LOCK = threading.Lock()


class _BrowserThread:
    """The one thread Playwright's sync API is bound to.  Not a ThreadPoolExecutor: the interpreter joins
    those before atexit handlers run, so the browser could no longer be closed at exit."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="agio-browser", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, fn = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    future.set_exception(exc)

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        self._jobs.put((future, fn))
        return future

    def stop(self) -> None:
        self._jobs.put(None)


def _running(pid: int) -> bool | None:
    """Is the process's main thread running or waiting for a CPU (state R)? None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "R"
    except (OSError, IndexError):
        return None


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(ppid, []).append(int(entry))
    return tree


@dataclass(frozen=True)
class BrowserLimits:
    timeout: float = 20.0  # seconds per navigation or action
    max_chars: int = 20_000  # of extracted text handed to the model
    viewport: tuple[int, int] = (1024, 700)

    def __post_init__(self) -> None:
        check_positive(self)


class BrowserHost:
    """The kernel's browser: one chromium, one context per session, all on one thread."""

    def __init__(self, allow: tuple[str, ...], executable: str):
        self.allow = allow
        self.executable = executable
        self._thread = _BrowserThread()
        self._pw: Any = None
        self._browser: Any = None
        self._proxy: FilteringProxy | None = None
        self.guard = Guard(allow)
        self.contexts: dict[str, tuple[Any, Any]] = {}  # session id -> (context, page)
        self.closed = False
        self._files: str | None = None  # the browser's own files (profile, launcher, temporary files)
        self.renderers_killed = 0

    def call(self, fn: Callable[..., Any], *args: Any, deadline: float | None = None) -> Any:
        """Run ``fn`` on the browser thread.  Past ``deadline`` seconds a renderer that keeps a core busy
        is killed, which ends whatever Playwright call it was blocking."""
        if self.closed:
            raise ActionError("this browser was closed (its agent was closed); create the tools again")
        future = self._thread.submit(lambda: fn(*args))
        try:
            return future.result(timeout=deadline)
        except FutureTimeout:
            self.kill_spinning_renderers()
            try:
                return future.result(timeout=30)
            except FutureTimeout:
                raise ActionError("the browser stopped answering; close the agent (or call close_browsers()) "
                                  "and create the tools again") from None

    def _start(self) -> None:
        if self._browser is not None:
            return
        from playwright.sync_api import sync_playwright

        root = os.geteuid() == 0
        self._files = tempfile.mkdtemp(prefix="agio-browser-", dir=reachable_temp_dir() if root else None)
        if root:
            os.chmod(self._files, 0o711)  # nobody walks in to its profile; it lists nothing here
            home = Path(self._files) / "home"
            home.mkdir(mode=0o700)
            os.chown(home, SANDBOX_UID, SANDBOX_UID)
        self._proxy = FilteringProxy(self.guard).start()
        # Playwright's driver makes the profile and its other files in its own TMPDIR, read when it starts:
        # the driver alone is started with ours (through a launcher), the process's environment never changes
        with _ENV_LOCK:
            saved = os.environ.get("PLAYWRIGHT_NODEJS_PATH")
            os.environ["PLAYWRIGHT_NODEJS_PATH"] = self._node_launcher()
            try:
                self._pw = sync_playwright().start()
            finally:
                if saved is None:
                    os.environ.pop("PLAYWRIGHT_NODEJS_PATH", None)
                else:
                    os.environ["PLAYWRIGHT_NODEJS_PATH"] = saved
        args = ["--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-quic",
                "--proxy-bypass-list=<-loopback>", "--force-webrtc-ip-handling-policy=disable_non_proxied_udp"]
        executable = self._unprivileged(self.executable) if root else self.executable
        self._browser = self._pw.chromium.launch(executable_path=executable, args=args, chromium_sandbox=True,
                                                 proxy={"server": self._proxy.url})

    def _node_launcher(self) -> str:
        """A launcher for Playwright's driver (its own Node.js) that gives it this browser's TMPDIR."""
        from playwright._impl._driver import compute_driver_executable

        assert self._files is not None
        node, _ = compute_driver_executable()
        launcher = Path(self._files) / "node"
        launcher.write_text(_NODE_LAUNCHER.format(files=shlex.quote(self._files), node=shlex.quote(node)))
        launcher.chmod(0o700)
        return str(launcher)

    def _unprivileged(self, executable: str) -> str:
        """As root, chromium would need ``--no-sandbox``; instead it runs as ``nobody``, with its own
        sandbox, through a launcher that first gives ``nobody`` the profile directory."""
        assert self._files is not None
        launcher = Path(self._files) / "chromium"
        launcher.write_text(_LAUNCHER.format(uid=SANDBOX_UID, executable=shlex.quote(executable),
                                             home=shlex.quote(str(Path(self._files) / "home"))))
        launcher.chmod(0o700)
        return str(launcher)

    def page(self, session_id: str, limits: BrowserLimits) -> Any:
        self._start()
        entry = self.contexts.get(session_id)
        if entry is None:
            width, height = limits.viewport
            context = self._browser.new_context(viewport={"width": width, "height": height},
                                                service_workers="block", accept_downloads=False)
            context.set_default_timeout(limits.timeout * 1000)
            context.set_default_navigation_timeout(limits.timeout * 1000)
            context.route("**/*", self._route)
            entry = self.contexts[session_id] = (context, context.new_page())
        return entry[1]

    def fresh_page(self, session_id: str) -> None:
        """After a timeout: close the session's page (its context too if that fails), kill a renderer that
        does not stop, and give the session a fresh page in its context.  Runs on the browser thread."""
        entry = self.contexts.get(session_id)
        if entry is None:
            return
        context, page = entry
        try:
            page.close(run_before_unload=False)
            self.contexts[session_id] = (context, context.new_page())
        except Exception:  # noqa: BLE001 - a crashed or wedged page: its context goes with it
            self.close_session(session_id)
        self.kill_spinning_renderers()

    def _browser_pid(self) -> int | None:
        """chromium's main process: the one started with this toolkit's profile directory."""
        if self._files is None:
            return None
        marker = f"--user-data-dir={self._files}".encode()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/cmdline", "rb") as f:
                        argv = f.read().split(b"\0")
                except OSError:
                    continue
                if b"--type=" not in b" ".join(argv) and any(a.startswith(marker) for a in argv):
                    return int(entry)
        return None

    def kill_spinning_renderers(self, window: float = 0.5) -> int:
        """Kill this browser's renderers that stay busy for a whole ``window`` (a page in an endless
        loop); a renderer that is idle or merely working in bursts is left alone."""
        pid = self._browser_pid()
        if pid is None:
            return 0
        tree, todo, renderers = _children(), [pid], []
        while todo:
            for child in tree.get(todo.pop(), ()):
                todo.append(child)
                try:
                    with open(f"/proc/{child}/cmdline", "rb") as f:
                        if b"--type=renderer" in f.read():
                            renderers.append(child)
                except OSError:
                    continue
        # a renderer in an endless loop is always runnable (state R), whatever the machine's load; an idle
        # or merely busy one sleeps now and then
        samples = {r: 0 for r in renderers}
        rounds = 0
        end = time.monotonic() + window
        while time.monotonic() < end:
            rounds += 1
            for r in renderers:
                samples[r] += bool(_running(r))
            time.sleep(0.01)
        killed = 0
        for r, hits in samples.items():
            if rounds and hits >= 0.9 * rounds:
                try:
                    os.kill(r, signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    pass
        self.renderers_killed += killed
        return killed

    def _route(self, route: Any) -> None:
        try:
            url = route.request.url
            if url.startswith(("data:", "blob:", "about:")):
                route.continue_()
                return
            self.guard.check(url)
        except ActionError:
            route.abort("blockedbyclient")
            return
        route.continue_()

    def close_session(self, session_id: str) -> None:
        entry = self.contexts.pop(session_id, None)
        if entry is not None:
            try:
                entry[0].close()
            except Exception:  # noqa: BLE001 - already gone with the browser
                pass

    def close(self) -> None:
        """Close every context, the browser and the proxy; safe to call again, and at interpreter exit."""
        if self.closed:
            return
        self.closed = True

        def shutdown() -> None:
            for session_id in list(self.contexts):
                self.close_session(session_id)
            if self._browser is not None:
                self._browser.close()
                self._browser = None
            if self._pw is not None:
                self._pw.stop()
                self._pw = None
            if self._proxy is not None:
                self._proxy.close()
                self._proxy = None

        try:
            done = self._thread.submit(shutdown)
            try:
                done.result(timeout=30)
            except FutureTimeout:  # the thread is stuck in a page: end chromium, which unblocks it
                pid = self._browser_pid()
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                done.result(timeout=30)
        finally:
            self._thread.stop()
            if self._files is not None:
                shutil.rmtree(self._files, ignore_errors=True)
                self._files = None


_hosts: list[BrowserHost] = []


def close_browsers() -> None:
    """Close every browser this kernel started (also done at exit)."""
    while _hosts:
        _hosts.pop().close()


def _close_at_exit() -> None:
    """At exit, quietly: a browser that cannot be closed any more is ended with the process anyway."""
    try:
        close_browsers()
    except Exception:  # noqa: BLE001 - nothing useful to tell anyone at interpreter exit
        pass


atexit.register(_close_at_exit)


def _session() -> str:
    call = get_call()
    return call.session_id if call is not None else MANUAL_SESSION


def find_chromium(executable: str | None = None) -> str:
    """The chromium to drive: ``executable``, else ``$AGIO_CHROMIUM``, else the first of chromium,
    chromium-browser and google-chrome on PATH, else Debian's path; one line when there is none."""
    given = executable or os.environ.get("AGIO_CHROMIUM")
    if given:
        found = shutil.which(given) or (given if os.path.isfile(given) and os.access(given, os.X_OK) else None)
        if found is None:
            source = "executable=" if executable else "AGIO_CHROMIUM"
            raise ActionError(f"no chromium at {given} (from {source}); give the path of a chromium that exists")
        return found
    found = next((p for p in map(shutil.which, _CHROMIUM_NAMES) if p), None)
    if found is None and os.access(CHROMIUM, os.X_OK):
        found = CHROMIUM
    if found is None:
        raise ActionError(f"no chromium found ({', '.join(_CHROMIUM_NAMES)} on PATH, or {CHROMIUM}); install "
                          "Debian's chromium package, or name one with AGIO_CHROMIUM or browser(executable=...)")
    return found


def browser(*, allow: list[str] | tuple[str, ...] = (), limits: BrowserLimits | None = None,
            executable: str | None = None, requires_approval: bool = False) -> list[Tool]:
    """Browser tools: navigate_and_extract, click, fill_form, screenshot. ``allow`` as for web_fetch.

    ``executable``: the chromium to drive (default: :func:`find_chromium`), checked here, before any tool runs."""
    limits = limits or BrowserLimits()
    host = BrowserHost(tuple(allow), find_chromium(executable))
    _hosts.append(host)

    def describe(page: Any, status: int | None = None) -> dict[str, Any]:
        text = to_markdown(page.content())
        return {"url": page.url, "title": page.title(), "status_code": status,
                "text": text[:limits.max_chars] + ("\n[truncated]" if len(text) > limits.max_chars else "")}

    def goto(page: Any, url: str) -> int | None:
        host.guard.check(url)  # refuses before the browser is asked
        try:
            response = page.goto(url, wait_until="domcontentloaded")
        except Exception as exc:  # noqa: BLE001 - playwright's errors say what the browser saw
            raise ActionError(f"navigation to {url} failed: {str(exc).splitlines()[0]}") from None
        if response is not None and response.headers.get(BLOCK_HEADER.lower()):
            raise ActionError(f"blocked: {response.headers[BLOCK_HEADER.lower()]}")
        return response.status if response is not None else None

    def guarded(session_id: str, body: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        """``body`` on the session's page; a timeout or a crashed page leaves the session a fresh page."""
        from playwright.sync_api import Error as PlaywrightError

        try:
            return body(host.page(session_id, limits))
        except (ActionError, PlaywrightError) as exc:
            text = str(exc)
            crashed = isinstance(exc, PlaywrightError) and ("crash" in text.lower() or "closed" in text.lower())
            if not crashed and "Timeout" not in text:
                raise
            # a navigation that timed out, a crashed page, or a renderer stuck in a loop: the page is
            # closed; an element that merely did not appear in time leaves the page as it is
            if not (crashed or text.startswith("navigation to") or host.kill_spinning_renderers()):
                raise
            host.fresh_page(session_id)
            first = (text.splitlines()[0] if text else type(exc).__name__).strip().rstrip(".")
            raise ActionError(f"{first}; the page was closed and the session's next call gets a fresh page") from None

    def run(kind: str, name: str, data: dict[str, Any], body: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        session_id = _session()
        with recorded(kind, name, data) as action:
            host.call(host._start)  # chromium's start-up is not the page's time
            result = host.call(guarded, session_id, body, deadline=limits.timeout * 1.5)
            action.output = {k: v for k, v in result.items() if k != "text"} | (
                {"text": result["text"][:5000]} if "text" in result else {})
        return result

    @tool(name="navigate_and_extract", timeout=limits.timeout * 3, requires_approval=requires_approval)
    def navigate_and_extract(url: str) -> str:
        """Open a URL in the browser and return the page's readable text (Markdown).

        Args:
            url: The http or https URL to open.
        """
        page = run("web_browsing", "navigate_and_extract", {"url": url}, lambda p: describe(p, goto(p, url)))
        return f"URL: {page['url']}\nTitle: {page['title']}\nStatus: {page['status_code']}\n\n{page['text']}"

    @tool(name="click", timeout=limits.timeout * 3, requires_approval=requires_approval)
    def click(selector: str) -> str:
        """Click an element of the current page and return the page's text afterwards.

        Args:
            selector: A CSS or Playwright selector, e.g. ``text=Next`` or ``#submit``.
        """
        def body(p: Any) -> dict[str, Any]:
            if p.url == "about:blank":
                raise ActionError("no page is open; call navigate_and_extract first")
            try:
                p.click(selector)
                p.wait_for_load_state("domcontentloaded")
            except Exception as exc:  # noqa: BLE001
                raise ActionError(f"click on {selector!r} failed: {str(exc).splitlines()[0]}") from None
            return describe(p)

        page = run("web_browsing", "click", {"selector": selector}, body)
        return f"URL: {page['url']}\nTitle: {page['title']}\n\n{page['text']}"

    @tool(name="fill_form", timeout=limits.timeout * 4, requires_approval=requires_approval)
    def fill_form(form_data: dict[str, str], url: str | None = None, submit: str | None = None) -> str:
        """Fill form fields (selector -> value), optionally opening ``url`` first and clicking ``submit``.

        Args:
            form_data: Field selectors (e.g. ``#name`` or ``input[name=q]``) mapped to the text to type.
            url: A page to open first.
            submit: Selector of the button to click after filling.
        """
        def body(p: Any) -> dict[str, Any]:
            if url:
                goto(p, url)
            try:
                for selector, value in form_data.items():
                    p.fill(selector, str(value))
                if submit:
                    p.click(submit)
                    p.wait_for_load_state("domcontentloaded")
            except Exception as exc:  # noqa: BLE001
                raise ActionError(f"filling the form failed: {str(exc).splitlines()[0]}") from None
            return describe(p)

        page = run("web_browsing", "fill_form", {"url": url, "form_data": form_data, "submit": submit}, body)
        return f"URL: {page['url']}\nTitle: {page['title']}\n\n{page['text']}"

    @tool(name="screenshot", timeout=limits.timeout * 3, requires_approval=requires_approval)
    def screenshot(full_page: bool = False) -> str:
        """Take a screenshot of the current page; it is shown to the user.

        Args:
            full_page: The whole page rather than the visible part.
        """
        def body(p: Any) -> dict[str, Any]:
            if p.url == "about:blank":
                raise ActionError("no page is open; call navigate_and_extract first")
            png = p.screenshot(full_page=full_page, type="png")
            return {"url": p.url, "bytes": len(png), "screenshot": base64.b64encode(png).decode("ascii")}

        shot = run("web_browsing", "screenshot", {"full_page": full_page}, body)
        return f"Screenshot of {shot['url']} taken ({shot['bytes']} bytes PNG) and shown to the user."

    tools = [navigate_and_extract, click, fill_form, screenshot]
    for t in tools:
        t.close = host.close
    return tools

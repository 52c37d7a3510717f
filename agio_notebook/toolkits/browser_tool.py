"""``browser()``: a real browser for the agent — Playwright driving Debian's chromium (no download).

One browser process per toolkit, one browser *context* per session (its own cookies and storage),
closed by :meth:`Agent.close`, by :func:`close_browsers`, or when the kernel exits.  Playwright's sync
API is bound to the thread that started it, so every browser call runs on one dedicated thread.

When the kernel runs as root, chromium runs as ``nobody`` with its own sandbox on (rather than as root
with ``--no-sandbox``).  Addresses are guarded twice: a Playwright route check refuses a blocked URL before any request, and
chromium's whole network goes through :class:`~agio_notebook.toolkits.proxy.FilteringProxy`, which also
sees redirect hops, WebSockets and subresources.
"""

from __future__ import annotations

import atexit
import base64
import os
import shlex
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..tools import Tool, tool
from ..tools.context import get_call
from .actions import MANUAL_SESSION, recorded
from .errors import ActionError, check_positive
from .proxy import BLOCK_HEADER, FilteringProxy
from .web import Guard, to_markdown
from .workspace import SANDBOX_UID

CHROMIUM = "/usr/bin/chromium"
_LAUNCHER = """#!/bin/sh
for arg in "$@"; do
  case "$arg" in --user-data-dir=*) chown -R {uid}:{uid} "${{arg#--user-data-dir=}}" ;; esac
done
export HOME=/tmp
exec setpriv --reuid={uid} --regid={uid} --clear-groups -- {executable} "$@"
"""


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
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agio-browser")
        self._pw: Any = None
        self._browser: Any = None
        self._proxy: FilteringProxy | None = None
        self.guard = Guard(allow)
        self.contexts: dict[str, tuple[Any, Any]] = {}  # session id -> (context, page)
        self.closed = False
        self._launcher_dir: tempfile.TemporaryDirectory[str] | None = None

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self.closed:
            raise ActionError("this browser was closed (its agent was closed); create the tools again")
        return self._thread.submit(fn, *args).result()

    def _start(self) -> None:
        if self._browser is not None:
            return
        if not os.path.exists(self.executable):
            raise ActionError(f"no chromium at {self.executable}; install Debian's chromium package")
        from playwright.sync_api import sync_playwright

        self._proxy = FilteringProxy(self.guard).start()
        self._pw = sync_playwright().start()
        args = ["--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-quic",
                "--proxy-bypass-list=<-loopback>", "--force-webrtc-ip-handling-policy=disable_non_proxied_udp"]
        executable = self.executable if os.geteuid() != 0 else self._unprivileged(self.executable)
        self._browser = self._pw.chromium.launch(executable_path=executable, args=args, chromium_sandbox=True,
                                                 proxy={"server": self._proxy.url})

    def _unprivileged(self, executable: str) -> str:
        """As root, chromium would need ``--no-sandbox``; instead it runs as ``nobody``, with its own
        sandbox, through a launcher that first gives ``nobody`` the profile directory."""
        self._launcher_dir = tempfile.TemporaryDirectory(prefix="agio-browser-")
        launcher = Path(self._launcher_dir.name) / "chromium"
        launcher.write_text(_LAUNCHER.format(uid=SANDBOX_UID, executable=shlex.quote(executable)))
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
            context.route("**/*", self._route)
            entry = self.contexts[session_id] = (context, context.new_page())
        return entry[1]

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
        """Close every context, the browser and the proxy; safe to call again."""
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
            if self._launcher_dir is not None:
                self._launcher_dir.cleanup()
                self._launcher_dir = None

        try:
            self._thread.submit(shutdown).result()
        finally:
            self._thread.shutdown(wait=False)


_hosts: list[BrowserHost] = []


def close_browsers() -> None:
    """Close every browser this kernel started (also done at exit)."""
    while _hosts:
        _hosts.pop().close()


atexit.register(close_browsers)


def _session() -> str:
    call = get_call()
    return call.session_id if call is not None else MANUAL_SESSION


def browser(*, allow: list[str] | tuple[str, ...] = (), limits: BrowserLimits | None = None,
            executable: str = CHROMIUM, requires_approval: bool = False) -> list[Tool]:
    """Browser tools: navigate_and_extract, click, fill_form, screenshot. ``allow`` as for web_fetch."""
    limits = limits or BrowserLimits()
    host = BrowserHost(tuple(allow), executable)
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

    def run(kind: str, name: str, data: dict[str, Any], body: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        session_id = _session()
        with recorded(kind, name, data) as action:
            result = host.call(lambda: body(host.page(session_id, limits)))
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

    @tool(name="screenshot", timeout=limits.timeout * 2, requires_approval=requires_approval)
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

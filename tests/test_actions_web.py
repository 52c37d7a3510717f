"""web_fetch against a real HTTP server on 127.0.0.1 (allowlisted), and the SSRF and size attacks."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import agio_notebook
from agio_notebook.storage import TinyDBRepository
from agio_notebook.toolkits import python_sandbox, web_fetch
from agio_notebook.toolkits.sandbox import pool
from agio_notebook.toolkits.web import WebLimits

from actions_support import one_tool_step

# Link targets that run code or carry content when followed, each written a way filters miss: case,
# whitespace, HTML entities (decimal, hex, named, without semicolons), tabs and newlines inside the scheme
UNSAFE_TARGETS = [
    "javascript:alert(3)", "JavaScript:alert(3)", "JAVASCRIPT:alert(3)", " javascript:alert(3)",
    "\tjavascript:alert(3)", "java\tscript:alert(3)", "java\nscript:alert(3)", "java\rscript:alert(3)",
    "&#106;avascript:alert(3)", "&#x6A;avascript:alert(3)", "&#0000106&#0000097vascript:alert(3)",
    "jav&#x09;ascript:alert(3)", "jav&#10;ascript:alert(3)", "jav&Tab;ascript:alert(3)",
    "javascript&colon;alert(3)", "&#x20;javascript:alert(3)", "\x01javascript:alert(3)",
    "vbscript:msgbox(3)", "VBScript:msgbox(3)", "vb&#115;cript:msgbox(3)",
    "data:text/html;base64,PHNjcmlwdD5hbGVydCgzKTwvc2NyaXB0Pg==", "DATA:text/html,<script>alert(3)</script>",
    " d a t a :text/html,x", "&#100;ata:text/html,x",
]
SAFE_TARGETS = ["https://example.com/ok", "/relative/ok", "other.html", "#section", "mailto:a@example.com",
                "?q=1&r=2"]


def links_page() -> bytes:
    items = [f'<li><a href="{t.replace(chr(34), "&quot;")}">bad link {i}</a></li>' for i, t in enumerate(UNSAFE_TARGETS)]
    items += [f"<li><a href='{t}'>good link {i}</a></li>" for i, t in enumerate(SAFE_TARGETS)]
    items += ['<li><img alt="bad image" src="data:image/png;base64,iVBORw0KGgo="></li>',
              '<li><img alt="js image" src="javascript:alert(3)"></li>',
              '<li><a href=javascript:alert(3)>unquoted</a></li>', "<li><a HREF='JaVaScRiPt:alert(3)'>mixed</a></li>"]
    return ("<html><body><h1>Links</h1><ul>" + "".join(items) + "</ul></body></html>").encode()


PAGE = b"""<html><head><title>T</title><script>alert(1)</script></head><body>
<h1>Prices</h1><p>Apples cost <b>3</b> coins.</p><ul><li>one</li><li>two</li></ul></body></html>"""


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        port = self.server.server_address[1]
        if self.path == "/page":
            self._send(200, "text/html; charset=utf-8", PAGE)
        elif self.path == "/links":
            self._send(200, "text/html; charset=utf-8", links_page())
        elif self.path == "/data.json":
            self._send(200, "application/json", b'{"a": 1}')
        elif self.path == "/hop":
            self._redirect("/page")
        elif self.path == "/to-private":
            self._redirect("http://10.0.0.1/secret")
        elif self.path == "/to-localhost":
            self._redirect(f"http://localhost:{port}/page")
        elif self.path == "/loop":
            self._redirect("/loop")
        elif self.path == "/image":
            self._send(200, "image/png", b"\x89PNG....")
        elif self.path == "/huge":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(1 << 30))
            self.end_headers()
            try:
                chunk = b"x" * (1 << 20)
                for _ in range(1024):
                    self.wfile.write(chunk)
            except OSError:
                pass
        elif self.path == "/huge-chunked":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()  # no length: the cap must hold while streaming
            try:
                for _ in range(1024):
                    self.wfile.write(b"y" * (1 << 20))
            except OSError:
                pass
        else:
            self._send(404, "text/plain", b"not here")

    def _send(self, status, ctype, body):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, location):
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("AGIO_WORKSPACES", str(tmp_path / "ws"))
    repo = TinyDBRepository(tmp_path / "store")
    yield repo, [web_fetch(allow=["127.0.0.1"], limits=WebLimits(max_bytes=1_000_000)), *python_sandbox()]
    pool.close_all()
    repo.close()


def fetch(env, session, url):
    repo, tools = env
    step = one_tool_step(repo, session, tools, "web_fetch", url=url)
    after = one_tool_step(repo, session, tools, "run_python", code="6 * 7")
    assert after.status == "ok" and "[value] 42" in after.content
    return step


def test_html_becomes_markdown_and_is_recorded(env, server):
    step = fetch(env, "w", f"{server}/page")
    assert step.status == "ok", step.content
    assert "# Prices" in step.content and "Apples cost **3** coins." in step.content and "* one" in step.content
    assert "alert(1)" not in step.content
    frame = agio_notebook.actions("w", repository=env[0])
    row = frame[frame["name"] == "web_fetch"].iloc[0]
    assert row["url"] == f"{server}/page" and row["http_status"] == 200 and row["kind"] == "web_browsing"


def test_json_redirects_and_content_types(env, server):
    assert '{"a": 1}' in fetch(env, "j", f"{server}/data.json").content
    hop = fetch(env, "j", f"{server}/hop")
    assert hop.status == "ok" and f"URL: {server}/page" in hop.content
    image = fetch(env, "j", f"{server}/image")
    assert image.status == "error" and "unsupported content type 'image/png'" in image.content
    loop = fetch(env, "j", f"{server}/loop")
    assert loop.status == "error" and "too many redirects" in loop.content


def test_private_addresses_are_blocked(env, server):
    port = server.rsplit(":", 1)[1]
    direct = fetch(env, "p", "http://10.0.0.1/")
    assert direct.status == "error" and "10.0.0.1 is a private address (SSRF protection)" in direct.content
    named = fetch(env, "p", f"http://localhost:{port}/page")
    assert named.status == "error" and "localhost resolves to 127.0.0.1, a loopback address" in named.content
    meta = fetch(env, "p", "http://169.254.169.254/latest/meta-data/")
    assert meta.status == "error" and "link-local" in meta.content
    for sneaky, reason in ((f"http://[::1]:{port}/page", "loopback"), (f"http://0.0.0.0:{port}/page", "unspecified"),
                           (f"http://2130706433:{port}/page", "loopback"), (f"http://[::ffff:127.0.0.1]:{port}/", "loopback"),
                           ("file:///etc/passwd", "only http and https"),
                           ("http://100.100.100.200/latest/meta-data/", "a non-public address"),  # cloud metadata
                           (f"http://[2002:7f00:1::]:{port}/page", "loopback"),  # 6to4 of 127.0.0.1
                           ("http://[2002:a9fe:a9fe::1]/", "link-local"),  # 6to4 of 169.254.169.254
                           (f"http://[64:ff9b::7f00:1]:{port}/page", "loopback")):  # NAT64 of 127.0.0.1
        step = fetch(env, "p", sneaky)
        assert step.status == "error" and reason in step.content, (sneaky, step.content)


def test_redirects_to_private_addresses_are_blocked(env, server):
    step = fetch(env, "r", f"{server}/to-private")
    assert step.status == "error" and "blocked: 10.0.0.1 is a private address" in step.content
    step = fetch(env, "r", f"{server}/to-localhost")
    assert step.status == "error" and "localhost resolves to 127.0.0.1" in step.content


def test_a_1_gb_download_is_refused(env, server):
    declared = fetch(env, "g", f"{server}/huge")
    assert declared.status == "error" and "1073741824 bytes, over the 1000000-byte limit" in declared.content
    streamed = fetch(env, "g", f"{server}/huge-chunked")
    assert streamed.status == "error" and "sent more than 1000000 bytes" in streamed.content


def test_script_and_data_link_targets_never_reach_the_model(env, server):
    step = fetch(env, "js", f"{server}/links")
    assert step.status == "ok", step.content
    text = step.content.lower()
    for needle in ("javascript", "vbscript", "data:", "alert(3)", "msgbox", "base64", "<script", "&#"):
        assert needle not in text, (needle, step.content)
    for i in range(len(UNSAFE_TARGETS)):
        assert f"* bad link {i}\n" in step.content or step.content.endswith(f"* bad link {i}"), step.content
    for i, target in enumerate(SAFE_TARGETS):
        assert f"[good link {i}]({target})" in step.content, step.content
    assert "* bad image" in step.content and "* js image" in step.content
    assert "* unquoted" in step.content and "* mixed" in step.content
    recorded = step.extra["actions"][0]["output"]["text"].lower()
    assert "javascript" not in recorded and "data:" not in recorded


def test_link_scheme_reads_targets_as_a_browser_does():
    from agio_notebook.toolkits.web import link_scheme

    assert link_scheme("java\tscript:x") == "javascript"
    assert link_scheme(" \x00JaVa\nScRiPt :x") == "javascript"
    assert link_scheme("/a:b") is None and link_scheme("page.html") is None and link_scheme("#x") is None
    assert link_scheme("HTTPS://example.com") == "https"

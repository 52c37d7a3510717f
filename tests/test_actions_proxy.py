"""The browser's filtering proxy in a process that holds more than 1,024 descriptors (a kernel that has run
for a while): requests still pass through it (``select.select`` refused such descriptors)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = r"""
import os, resource, threading, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from agio_notebook.toolkits.proxy import FilteringProxy
from agio_notebook.toolkits.web import Guard

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]  # every new socket now gets a descriptor > 1024

class Page(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        body = b"through the proxy"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

site = ThreadingHTTPServer(("127.0.0.1", 0), Page)
threading.Thread(target=site.serve_forever, daemon=True).start()
proxy = FilteringProxy(Guard(allow=["127.0.0.1"])).start()
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy.url}))
with opener.open(f"http://127.0.0.1:{site.server_address[1]}/", timeout=30) as reply:
    print(min(held) < 1024 < max(held), reply.status, reply.read().decode())
proxy.close()
"""


def test_the_proxy_passes_requests_when_the_process_holds_descriptors_above_1024():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "200", "through", "the", "proxy"], done.stdout + done.stderr[-2000:]

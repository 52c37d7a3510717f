"""A loopback OpenAI-compatible ``/v1/embeddings`` endpoint for the hybrid retrieval tests.

Vectors are bags of concepts: words are mapped through a small synonym table first, so "car hire"
and "renting an automobile" land close although they share no word (which BM25 cannot see).
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SYNONYMS = {"automobile": "car", "vehicle": "car", "hire": "rent", "renting": "rent", "rental": "rent",
            "rented": "rent", "abroad": "foreign", "overseas": "foreign"}
DIM = 64


def embed(text: str) -> list[float]:
    vec = [0.0] * DIM
    for word in re.findall(r"\w+", text.lower()):
        word = SYNONYMS.get(word, word)
        vec[sum(map(ord, word)) % DIM] += 1.0
    return vec


class EmbeddingsServer:
    def __init__(self) -> None:
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "body": body,
                                       "auth": self.headers.get("Authorization")})
                inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
                data = {"object": "list", "model": body["model"],
                        "data": [{"object": "embedding", "index": i, "embedding": embed(t)}
                                 for i, t in enumerate(inputs)],
                        "usage": {"prompt_tokens": 1, "total_tokens": 1}}
                raw = json.dumps(data).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

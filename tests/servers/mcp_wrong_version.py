"""Answers MCP's initialize with a protocol version no client knows, then waits: a server that speaks
another protocol version."""

from __future__ import annotations

import json
import sys

for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    if message.get("method") == "initialize":
        result = {"protocolVersion": "1999-01-01", "capabilities": {}, "serverInfo": {"name": "old", "version": "0"}}
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
    else:
        reply = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "unknown method"}}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()

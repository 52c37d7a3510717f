"""What an MCP server offers is checked before it becomes a tool: a server is not trusted to be sane.

- A tool name must be one providers accept (letters, digits, ``_`` and ``-``, at most 64 characters).
- An input schema must have no ``$ref`` loop: a chain of references (through ``allOf``/``anyOf``/``oneOf``/
  ``not``/``if``, which look at the same value) that comes back to where it started makes validation
  recurse without end. A reference that points nowhere is refused too. A recursive schema whose
  references pass through ``properties`` or ``items`` (a tree of nodes) is fine: each level is a level of
  the value.
- A result is capped (:func:`cap`), as web fetch caps a page, and says so.

Each check returns why a tool is refused, or None; the connection refuses that tool and keeps the others.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# keywords whose subschemas apply to the same value as their parent (so a loop through them never ends)
_SAME_VALUE_LISTS = ("allOf", "anyOf", "oneOf")
_SAME_VALUE_ONE = ("not", "if", "then", "else")
MAX_RESULT_CHARS = 100_000  # what a result may hold; more is cut and the result says so


def bad_name(name: Any) -> str | None:
    if isinstance(name, str) and _NAME.match(name):
        return None
    return "its name is not a tool name (letters, digits, _ and -, at most 64 characters)"


def bad_schema(schema: Any) -> str | None:
    """Why ``schema`` cannot be used as a tool's input schema, or None."""
    if not isinstance(schema, dict):
        return f"its input schema is a {type(schema).__name__}, not a JSON object"
    seen: dict[str, str] = {}  # pointer -> "active" while its same-value chain is walked, "done" after
    for start in _pointers(schema):
        loop = _loop_from(schema, start, seen)
        if loop is not None:
            return loop
    return None


def _pointers(schema: dict[str, Any]) -> list[str]:
    """Every subschema's JSON pointer (walked with a stack: a deeply nested schema cannot recurse here)."""
    out, stack = [], [("", schema)]
    while stack:
        pointer, node = stack.pop()
        if isinstance(node, dict):
            out.append(pointer)
            stack += [(f"{pointer}/{_escape(k)}", v) for k, v in node.items() if isinstance(v, (dict, list))]
        elif isinstance(node, list):
            stack += [(f"{pointer}/{i}", v) for i, v in enumerate(node) if isinstance(v, (dict, list))]
    return out


def _loop_from(schema: dict[str, Any], start: str, seen: dict[str, str]) -> str | None:
    """Walk the same-value edges from ``start`` depth first (iteratively); a loop or a dangling ``$ref``."""
    if seen.get(start) == "done":
        return None
    path: list[str] = []
    stack: list[tuple[str, bool]] = [(start, False)]
    while stack:
        pointer, leaving = stack.pop()
        if leaving:
            seen[pointer] = "done"
            path.pop()
            continue
        state = seen.get(pointer)
        if state == "done":
            continue
        if state == "active":
            cycle = path[path.index(pointer):] + [pointer]
            return "its input schema has a $ref loop (" + " → ".join("#" + p for p in cycle) + ")"
        node = _resolve(schema, pointer)
        if node is None:
            return f"its input schema has a $ref to #{pointer}, which points nowhere"
        seen[pointer] = "active"
        path.append(pointer)
        stack.append((pointer, True))
        for target in _same_value_edges(node, pointer):
            if target is None:
                return f"its input schema has a $ref that is not within the schema ({node.get('$ref')!r})"
            stack.append((target, False))
    return None


def _same_value_edges(node: Any, pointer: str) -> list[str | None]:
    if not isinstance(node, dict):
        return []
    edges: list[str | None] = []
    ref = node.get("$ref")
    if isinstance(ref, str):
        edges.append(unquote(ref[1:]) if ref.startswith("#") else None)
    for key in _SAME_VALUE_LISTS:
        if isinstance(node.get(key), list):
            edges += [f"{pointer}/{key}/{i}" for i, v in enumerate(node[key]) if isinstance(v, dict)]
    edges += [f"{pointer}/{key}" for key in _SAME_VALUE_ONE if isinstance(node.get(key), dict)]
    return edges


def _resolve(schema: dict[str, Any], pointer: str) -> Any:
    node: Any = schema
    for part in pointer.split("/")[1:] if pointer else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def cap(parts: list[str], limit: int = MAX_RESULT_CHARS) -> str:
    """The parts of a result joined by newlines, cut at ``limit`` characters with a line saying so."""
    total = sum(len(p) for p in parts) + max(len(parts) - 1, 0)
    if total <= limit:
        return "\n".join(parts)
    out, room = [], limit
    for i, part in enumerate(parts):
        piece = (("\n" if i else "") + part)[:room]
        out.append(piece)
        room -= len(piece)
        if room <= 0:
            break
    return "".join(out) + f"\n[truncated: the result had {total:,} characters; the first {limit:,} are shown]"

"""``@tool``: a function's signature and docstring become its JSON schema and argument validator.

pydantic does the type work (str, int, float, bool, lists, dicts, Optional, Literal, Enum, defaults);
this module adds per-parameter descriptions from Google, NumPy or reST docstrings and inlines
``$ref``s so any OpenAI-compatible server accepts the schema.
"""

from __future__ import annotations

import inspect
import re
import typing
from typing import Any, Callable, overload

import pydantic

from .base import Tool

_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params|Returns?|Raises|Yields|Examples?|Notes?)\s*:?\s*$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(summary, {param: description}) from a Google, NumPy or reST docstring."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    i = 0
    while i < len(lines) and not _SECTION.match(lines[i]) and not lines[i].lstrip().startswith(":"):
        if i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"} and lines[i].strip():
            break  # a NumPy section title
        summary.append(lines[i])
        i += 1
    section = None
    current: str | None = None
    for line in lines[i:]:
        stripped = line.strip()
        rest = re.match(r"^:param\s+(?:[\w\[\], |.]+\s+)?(\w+)\s*:\s*(.*)$", stripped)
        if rest:
            current = rest.group(1)
            params[current] = rest.group(2).strip()
            section = "rest"
            continue
        if stripped.startswith(":"):
            current = None
            continue
        m = _SECTION.match(line)
        if m or (stripped and set(stripped) == {"-"}):
            if m:
                section = "params" if m.group(1) in ("Args", "Arguments", "Parameters", "Params") else "other"
            current = None
            continue
        if section == "params":
            google = re.match(r"^\s*(\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$", line)
            numpy = re.match(r"^(\w+)\s*(?::\s*.*)?$", line) if not line.startswith((" ", "\t")) else None
            if google and (line.startswith((" ", "\t")) or not numpy):
                current = google.group(1)
                params[current] = google.group(3).strip()
            elif numpy:
                current = numpy.group(1)
                params[current] = ""
            elif current and stripped:
                params[current] = (params[current] + " " + stripped).strip()
        elif section == "rest" and current and stripped:
            params[current] = (params[current] + " " + stripped).strip()
    return " ".join(s.strip() for s in summary if s.strip()).strip(), params


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    defs = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                target = {k: v for k, v in defs[node["$ref"].rsplit("/", 1)[-1]].items() if k != "title"}
                return resolve({**target, **{k: v for k, v in node.items() if k != "$ref"}})
            return {k: resolve(v) for k, v in node.items()}
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    return resolve(schema)


_ON_REPLAY = ("record", "confirm", "block")


def _build(fn: Callable[..., Any], name: str | None, description: str | None, timeout: float | None,
           retries: int, requires_approval: bool, side_effects: bool = False, on_replay: str = "record") -> Tool:
    if not callable(fn):
        raise TypeError(f"@tool needs a function, got {type(fn).__name__}")
    if on_replay not in _ON_REPLAY:
        raise ValueError(f"tool {getattr(fn, '__name__', fn)!r}: on_replay must be one of "
                         f"{', '.join(_ON_REPLAY)}, got {on_replay!r}")
    sig = inspect.signature(fn)
    summary, param_docs = parse_docstring(inspect.getdoc(fn))
    fields: dict[str, Any] = {}
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - unresolved forward refs: fall back to raw annotations
        hints = {}
    for pname, param in sig.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {fn.__name__!r}: *{pname} / **{pname} parameters cannot be described to a "
                            "model; use named parameters")
        annotation = hints.get(pname, param.annotation)
        if annotation is inspect.Parameter.empty:
            annotation = Any
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (annotation, pydantic.Field(default, description=param_docs.get(pname) or None))
    model_name = "".join(part.capitalize() for part in (name or fn.__name__).split("_")) + "Arguments"
    try:
        args_model = pydantic.create_model(model_name, __config__=pydantic.ConfigDict(extra="forbid"),
                                           **fields)
        schema = _inline_refs(args_model.model_json_schema())
    except Exception as exc:  # noqa: BLE001 - say which tool and why
        raise TypeError(f"tool {fn.__name__!r}: cannot build a JSON schema from its signature: {exc}") from exc
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    schema.setdefault("required", [])

    def validate(arguments: dict[str, Any]) -> dict[str, Any]:
        return dict(args_model.model_validate(arguments).__dict__)

    return Tool(name=name or fn.__name__, description=description or summary or fn.__name__,
                parameters=schema, function=fn,
                is_async=inspect.iscoroutinefunction(fn), validate=validate, timeout=timeout,
                retries=retries, requires_approval=requires_approval, side_effects=side_effects,
                on_replay=on_replay)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(*, name: str | None = None, description: str | None = None, timeout: float | None = None,
         retries: int = 0, requires_approval: bool = False, side_effects: bool = False,
         on_replay: str = "record") -> Callable[[Callable[..., Any]], Tool]: ...


def tool(fn: Callable[..., Any] | None = None, /, *, name: str | None = None, description: str | None = None,
         timeout: float | None = None, retries: int = 0, requires_approval: bool = False,
         side_effects: bool = False, on_replay: str = "record") -> Any:
    """Turn a (sync or async) function into a :class:`Tool`; usable bare or with options.

    ``side_effects=True`` marks a tool whose calls must not simply run again during a replay, retry or
    fork: ``on_replay`` replays the recorded result (``"record"``), asks for approval (``"confirm"``)
    or blocks the call (``"block"``).
    """
    if on_replay not in _ON_REPLAY:
        raise ValueError(f"on_replay must be one of {', '.join(_ON_REPLAY)}, got {on_replay!r}")
    if fn is not None:
        return _build(fn, name, description, timeout, retries, requires_approval, side_effects, on_replay)
    return lambda f: _build(f, name, description, timeout, retries, requires_approval, side_effects, on_replay)

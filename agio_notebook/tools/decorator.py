"""``@tool``: a function's signature and docstring become its JSON schema and argument validator.

pydantic does the type work (str, int, float, bool, lists, dicts, Optional, Literal, Enum, defaults);
griffe reads per-parameter descriptions from Google, NumPy or reST docstrings; this module inlines
``$ref``s so any OpenAI-compatible server accepts the schema.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any, Callable, overload

import pydantic
from griffe import Docstring, DocstringSectionKind

from .base import Tool
from .context import RunContext

_QUIET = {"warnings": False}
_STYLE_OPTIONS: dict[str, dict[str, bool]] = {"google": _QUIET, "numpy": _QUIET, "sphinx": _QUIET}


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(summary, {param: description}) from a Google, NumPy or reST docstring, parsed by griffe."""
    if not doc:
        return "", {}
    sections = Docstring(inspect.cleandoc(doc)).parse("auto", method="max_sections", per_style_options=_STYLE_OPTIONS)
    summary = ""
    params: dict[str, str] = {}
    for section in sections:
        if section.kind is DocstringSectionKind.text and not summary:
            summary = " ".join(section.value.split())
        elif section.kind is DocstringSectionKind.parameters:
            params.update({p.name: " ".join(p.description.split()) for p in section.value})
    return summary, params


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with its ``$ref``s written out in place (what models follow best); a recursive type's
    reference to itself stays a ``$ref``, its definition kept in the top ``$defs``."""
    defs = schema.pop("$defs", {})
    kept: dict[str, Any] = {}

    def resolve(node: Any, within: frozenset[str]) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                name = node["$ref"].rsplit("/", 1)[-1]
                if name in within:  # a type inside itself: inlining would never end
                    if name not in kept:
                        kept[name] = {}
                        kept[name] = resolve(defs[name], within)
                    return node
                target = {k: v for k, v in defs[name].items() if k != "title"}
                return resolve({**target, **{k: v for k, v in node.items() if k != "$ref"}}, within | {name})
            return {k: resolve(v, within) for k, v in node.items()}
        if isinstance(node, list):
            return [resolve(v, within) for v in node]
        return node

    resolved = resolve(schema, frozenset())
    if kept:
        resolved["$defs"] = kept
    return resolved


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
    params = list(sig.parameters.items())
    takes_context = bool(params) and _is_run_context(hints.get(params[0][0], params[0][1].annotation))
    if takes_context:  # the engine passes it; the model never sees it
        params = params[1:]
    for pname, param in params:
        if _is_run_context(hints.get(pname, param.annotation)):
            raise TypeError(f"tool {fn.__name__!r}: a RunContext parameter must come first")
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
                on_replay=on_replay, takes_context=takes_context)


def _is_run_context(annotation: Any) -> bool:
    """``RunContext`` or ``RunContext[SomeDeps]`` (also written as a string)."""
    if isinstance(annotation, str):
        return annotation == "RunContext" or annotation.startswith("RunContext[")
    return annotation is RunContext or typing.get_origin(annotation) is RunContext


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

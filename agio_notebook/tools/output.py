"""Typed outputs: an agent that answers with a value of a type, not with free text.

``Agent(output_type=...)`` takes a pydantic model, a dataclass, a ``TypedDict``, a list or dict of them,
or a plain type (``int``, ``float``, ``bool``, ``Literal[...]``). The model is asked for that shape one of
two ways (``output_mode``): with a ``final_result`` tool whose parameters are the type's JSON schema
(``"tool"``, every model that calls tools), or with the provider's structured output, the same schema as
the request's ``response_format`` (``"native"``), the answer then being the reply's JSON text. A type that
is not an object is wrapped as ``{"result": ...}`` either way. pydantic validates the answer, and one that
does not fit goes back to the model with the reason, for a bounded number of tries. A tool-mode model that
answers in text instead is read the same way. One ``pydantic.TypeAdapter`` does the schema, the
validation and the JSON form stored with the run.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterator

import orjson
import pydantic

from .base import Tool
from .decorator import _inline_refs

FINAL_RESULT = "final_result"
RESULT_FIELD = "result"
ACCEPTED = "Final result accepted."
_EITHER_NAME = {"by_alias": True, "by_name": True}  # a field is read by its alias or its own name, whichever came
_FENCE = re.compile(r"(```|~~~)[A-Za-z0-9_+-]*[ \t]*\n?(.*?)\1", re.S)  # a fenced block, whatever its language tag
_QUOTED = re.compile(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")
_MODULES = re.compile(r"(?<![\w'\"])(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_])")  # typing.Optional[app.Quote]: Optional[Quote]
NOT_USED = "A final result was already accepted in this turn; this one was not used."
OUTPUT_MODES = ("tool", "native")
_SCHEMA_NAME = re.compile(r"[^A-Za-z0-9_-]+")  # what a response_format's name may hold


def type_name(kind: Any) -> str:
    """A type as a person reads it: ``Quote``, ``list[Quote]``, ``Optional[Quote]`` (no module paths)."""
    if isinstance(kind, type):
        return kind.__qualname__
    parts = _QUOTED.split(repr(kind))  # quoted parts (a Literal's values) stay as they are
    return "".join(p if i % 2 else _MODULES.sub("", p) for i, p in enumerate(parts))


class OutputError(ValueError):
    """A value that does not fit the output type; the text is what the model reads to fix it."""


def _errors(exc: pydantic.ValidationError) -> str:
    """pydantic's reasons as the model reads them: where (a field's path; "the value" for the whole), what."""
    return "; ".join(f"{'.'.join(str(p) for p in err.get('loc', ())) or 'the value'}: {err.get('msg')}"
                     for err in exc.errors()[:5])


@dataclass(frozen=True, slots=True)
class Answer:
    """A typed answer that fit: the value as validated (what ``result.output`` returns, as it was made; a
    validator that transforms runs once) and its JSON form, as stored with the run (data and text). ``None``
    is an answer too (an ``Optional`` type): a run has one when it has an ``Answer``, whatever its value."""

    value: Any
    data: Any
    text: str  # the JSON, as the run's final text


class OutputSpec:
    """How an agent's typed answer is asked for, validated and stored (see the module docstring)."""

    def __init__(self, output_type: Any, mode: str = "tool"):
        self.mode = _checked_mode(mode)
        self.by_call = mode == "tool"  # the answer comes as a final_result call (else as the reply's JSON)
        try:
            self.adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(output_type)
            schema = _inline_refs(self.adapter.json_schema())
        except Exception as exc:  # noqa: BLE001 - say which type and why, once, when the agent is made
            raise TypeError(f"output_type {output_type!r} cannot describe an answer: {exc}") from None
        self.type = output_type
        self.name = type_name(output_type)
        schema.pop("title", None)
        defs = schema.pop("$defs", None)  # a recursive type's definitions: at the top, where "#/$defs/..." points
        self.wrapped = schema.get("type") != "object" or "properties" not in schema
        parameters = ({"type": "object", "properties": {RESULT_FIELD: schema}, "required": [RESULT_FIELD]}
                      if self.wrapped else {**schema, "required": schema.get("required", [])})
        if defs:
            parameters["$defs"] = defs
        about = schema.get("description") or f"an answer of type {self.name}"
        # native: the provider's structured output, asked in the request (merged under the agent's settings)
        self.settings: dict[str, Any] = {} if self.by_call else {"response_format": {
            "type": "json_schema",
            "json_schema": {"name": _SCHEMA_NAME.sub("_", self.name).strip("_")[:64] or "answer",
                            "schema": parameters, "strict": False}}}
        self.ask = (f"Call {FINAL_RESULT} with your answer." if self.by_call
                    else f"Answer with the JSON of {self.name} only." if not self.wrapped
                    else f'Answer with the JSON {{"{RESULT_FIELD}": <the {self.name}>}} only.')
        self.tool = Tool(name=FINAL_RESULT, parameters=parameters, function=_accepted, is_async=True,
                         validate=self._validate_arguments,
                         description=f"Give your final answer: {about}. Call it once, when you are done; "
                                     "its arguments are the answer.")

    def _validate_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.answer(self.from_arguments(arguments))  # a wrong answer is the tool's error, with the reason
        return {}

    def from_arguments(self, arguments: dict[str, Any]) -> Any:
        """The typed value a ``final_result`` call gave; :class:`OutputError` with the reason if it does not fit."""
        if self.wrapped:
            if not isinstance(arguments, dict) or RESULT_FIELD not in arguments:
                raise OutputError(f"call {FINAL_RESULT} with {{\"{RESULT_FIELD}\": <the answer>}}")
            arguments = arguments[RESULT_FIELD]
        try:
            return self._read(json.dumps(arguments))
        except pydantic.ValidationError as exc:
            raise OutputError(f"the answer does not fit {self.name}: {_errors(exc)}") from None

    def _read(self, text: str) -> Any:
        """The one rule every answer is read by, as a call's arguments, a reply's text or a stored answer:
        its JSON, validated in pydantic's JSON mode (a strict type takes an ISO date as JSON gives it)."""
        return self.adapter.validate_json(text, **_EITHER_NAME)

    def from_text(self, text: str | None) -> Any:
        """The typed value a text answer gives: JSON of the type (or of the tool's arguments), alone, in a
        fenced block (```json, ```JSON, ~~~, ``` after a sentence; of several, the last that fits: an answer
        comes after its examples), or at the start of the text with words after it."""
        body = (text or "").strip()
        if not self.wrapped:
            try:  # the usual answer, the type's JSON alone
                return self._read(body)
            except pydantic.ValidationError:
                pass
        error: pydantic.ValidationError | None = None
        for value in _json_values(body):
            tries = [value]
            if self.wrapped and isinstance(value, dict) and set(value) == {RESULT_FIELD}:
                tries.insert(0, value[RESULT_FIELD])  # what the schema asks for: {"result": <the answer>}
            for candidate in tries:
                try:
                    return self._read(json.dumps(candidate))
                except pydantic.ValidationError as exc:
                    error = error or exc  # the likeliest candidate's reason is the one told
        if error is None:
            raise OutputError(_no_json(body, self.name, self.by_call))
        raise OutputError(f"the answer does not fit {self.name}: {_errors(error)}")

    def answer(self, value: Any) -> Answer:
        """A validated value with its JSON form, as data and as text;
        :class:`OutputError` for a value the store cannot hold as it is (NaN, Infinity, an integer past 64
        bits, a lone surrogate), which the model is told, as for any answer that does not fit."""
        data = self.dump(value)
        try:
            orjson.dumps(data)  # as the stores write it
        except orjson.JSONEncodeError as exc:
            raise OutputError(f"the answer does not fit {self.name}: it cannot be stored as JSON ({exc})") from None
        try:
            text = json.dumps(data, ensure_ascii=False, allow_nan=False)
        except ValueError:  # orjson would have written them as null
            raise OutputError(f"the answer does not fit {self.name}: NaN and Infinity are not numbers JSON holds") from None
        return Answer(value, data, text)

    def dump(self, value: Any) -> Any:
        """The value as JSON data, as it is stored with the run: by its fields' own names (the columns of
        ``outputs()``), without computed fields, so that it validates back into the type."""
        return self.adapter.dump_python(value, mode="json", exclude_computed_fields=True)

    def load(self, data: Any) -> Any:
        """A stored value back as the type."""
        return self._read(json.dumps(data))

    def arguments_for(self, value: Any) -> dict[str, Any]:
        """The ``final_result`` arguments that give ``value`` (what an offline model sends)."""
        data = self.dump(value)
        return {RESULT_FIELD: data} if self.wrapped else data


def _checked_mode(mode: Any) -> str:
    if not isinstance(mode, str) or mode not in OUTPUT_MODES:
        raise ValueError(f"output_mode must be one of {', '.join(map(repr, OUTPUT_MODES))}, got {mode!r}")
    return mode


def _no_json(body: str, name: str, by_call: bool) -> str:
    """Why a text answer held no JSON value, as the model reads it: empty, JSON that does not parse (where),
    or words."""
    if not body:
        return f"the answer was empty (it must be {name})"
    if body[:1] in ("{", "["):
        try:
            json.loads(body)
        except json.JSONDecodeError as exc:
            return f"the answer is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    if by_call:
        return f"answer by calling {FINAL_RESULT} (the answer must be {name}, not free text)"
    return f"the answer must be the JSON of {name}, not free text"


async def _accepted(**_: Any) -> str:
    return ACCEPTED


def _json_values(body: str) -> Iterator[Any]:
    """The JSON values a text answer may hold, the likeliest first: the whole text, its fenced blocks from
    the last one up, the value the text starts with (words after it)."""
    try:
        yield json.loads(body)
    except json.JSONDecodeError:
        pass
    for part in reversed([found[2] for found in _FENCE.finditer(body)]):
        try:
            yield json.loads(part)
        except json.JSONDecodeError:
            continue
    if body[:1] in ("{", "["):
        try:
            yield json.JSONDecoder().raw_decode(body)[0]
        except json.JSONDecodeError:
            pass


def output_spec(output_type: Any, mode: str = "tool") -> OutputSpec | None:
    """The spec of an ``output_type`` (None, ``str``: plain text, no spec) asked for in ``mode``."""
    _checked_mode(mode)
    if output_type is None or output_type is str:
        if mode != "tool":
            raise ValueError(f"output_mode={mode!r} asks for a typed answer: give an output_type (not str)")
        return None
    return OutputSpec(output_type, mode)
